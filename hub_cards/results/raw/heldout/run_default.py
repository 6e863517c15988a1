"""Train GSB-MDPO with its defaults (what `gsb_mdpo.train(MyEnv)` runs) and SB3 PPO with its defaults on the
two held-out envs, 3 seeds each, and log the deterministic return over the baselines' 50 episodes.

Run from the repository root: `OMP_NUM_THREADS=1 PYTHONPATH=. python hub_cards/results/raw/heldout/run_default.py
gsb_mdpo` (then `sb3_ppo`); the envs were written for this check by an author who had not seen the trainer's
settings, after the default was fixed, and were never used to choose anything.
"""

import json
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from envs import OverheadCrane, TankLevel  # noqa: E402

from gsbpolicy.gym import evaluate  # noqa: E402

OUT = HERE / "results.jsonl"


def log(line):
    with open(OUT, "a") as f:
        f.write(json.dumps(line) + "\n")
    print(line, flush=True)


def main(which):
    for cls in (TankLevel, OverheadCrane):
        for seed in (0, 1, 2):
            start = time.perf_counter()
            if which == "gsb_mdpo":
                from trainers import gsb_mdpo

                with tempfile.TemporaryDirectory() as d:
                    policy = gsb_mdpo.train(cls, seed=seed, output_dir=d)  # the default budget and preset
                    result = evaluate(policy, cls(), n_episodes=50, deterministic=True, seed=10000)
                steps = 150_000
            else:
                from stable_baselines3 import PPO

                model = PPO("MlpPolicy", cls(), seed=seed, device="cpu").learn(150_000)
                result = evaluate(model, cls(), n_episodes=50, deterministic=True, seed=10000)
                steps = 150_000
            log(
                {
                    "env": cls.__name__,
                    "algo": which,
                    "seed": seed,
                    "steps": steps,
                    "mean": result.mean,
                    "std": result.std,
                    "wall_s": round(time.perf_counter() - start, 1),
                }
            )


if __name__ == "__main__":
    main(sys.argv[1])
