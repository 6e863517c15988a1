"""Stable-Baselines3 glue for `trainers.ppo` (imports SB3, hence torch): `model` builds the PPO model and
converts its policy and training state; `vecenv` is the env stack it trains on."""
