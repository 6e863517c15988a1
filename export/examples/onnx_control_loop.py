"""A control loop running an exported policy in a Gymnasium env with numpy + onnxruntime only (no JAX).

    python -m export.onnx path/to/policy_folder --out policy.onnx      # once, where JAX is installed
    python -m export.examples.onnx_control_loop --onnx policy.onnx --env HalfCheetah-v5 --episodes 3

Prints each episode's return and length, then the per-step latency of `OnnxPolicy.predict` (median and
p99 over all steps), which is the time the policy takes out of each control period.
"""

import argparse
import time

import gymnasium as gym
import numpy as np

from export.runtime import OnnxPolicy


def run_episode(
    policy: OnnxPolicy, env: gym.Env, seed: int, deterministic: bool
) -> tuple[float, list[float]]:
    """One episode; returns its return and the seconds each `predict` call took."""
    obs, _ = env.reset(seed=seed)
    total, step_times, done = 0.0, [], False
    while not done:
        start = time.perf_counter()
        action, _ = policy.predict(obs, deterministic=deterministic)
        step_times.append(time.perf_counter() - start)
        obs, reward, terminated, truncated, _ = env.step(action)
        total += float(reward)
        done = terminated or truncated
    return total, step_times


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--onnx", required=True, help="ONNX file written by `python -m export.onnx`")
    parser.add_argument("--env", required=True, help="Gymnasium env id, e.g. HalfCheetah-v5")
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0, help="episode i is reset with seed + i")
    parser.add_argument("--stochastic", action="store_true", help="sample the SDE policy (needs --mode sde)")
    args = parser.parse_args(argv)
    policy = OnnxPolicy(args.onnx, seed=args.seed)
    env = gym.make(args.env)
    try:
        if env.observation_space.shape != (policy.obs_dim,) or env.action_space.shape != (policy.act_dim,):
            parser.error(
                f"{args.env} has observation shape {env.observation_space.shape} and action shape "
                f"{env.action_space.shape}, but {args.onnx} expects ({policy.obs_dim},) and ({policy.act_dim},)"
            )
        returns, step_times = [], []
        for episode in range(args.episodes):
            total, times = run_episode(policy, env, args.seed + episode, not args.stochastic)
            returns.append(total)
            step_times += times
            print(f"episode {episode}: return {total:.2f}, {len(times)} steps")
    finally:
        env.close()
    micros = np.asarray(step_times) * 1e6
    print(f"mean return {np.mean(returns):.2f} +/- {np.std(returns):.2f} over {args.episodes} episodes")
    print(f"predict latency: median {np.median(micros):.0f} us, p99 {np.percentile(micros, 99):.0f} us")


if __name__ == "__main__":
    main()
