"""The default on two envs written elsewhere: GSB-MDPO with its defaults (what `gsb_mdpo.train(MyEnv)` runs) and
SB3 PPO with its defaults, 3 seeds each, scored on the envs' author's 50 evaluation episodes.

    OMP_NUM_THREADS=1 python -m trainers.lab.heldout_envs gsb_mdpo   # then: sb3_ppo

The envs (`hub_cards/results/raw/heldout/envs.py`, a two-tank level process and an overhead crane, with their
author's controllers in `baselines.py`) were written for this check by an author who had not seen the trainer or
its settings, after the default was fixed, and were never used to choose anything. Appends one line per run to
`hub_cards/results/raw/heldout/results.jsonl`. One torch thread: two beside a JAX process slow SB3 to a crawl.
"""

import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path

from trainers.lab.default_search import EVAL_EPISODES, EVAL_SEED

FOLDER = Path(__file__).resolve().parents[2] / "hub_cards" / "results" / "raw" / "heldout"
STEPS = 150_000  # the cpu preset's own budget, as `gsb_mdpo.train(MyEnv)` runs it; SB3 gets the same


def _envs():
    spec = importlib.util.spec_from_file_location("heldout_envs_source", FOLDER / "envs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.TankLevel, module.OverheadCrane


def train_and_score(algo: str, env_cls, seed: int):
    """The deterministic evaluation, over the author's episodes (reset seeds 10000-10049), of one run."""
    from gsbpolicy.gym import evaluate

    if algo == "gsb_mdpo":
        from trainers import gsb_mdpo

        with tempfile.TemporaryDirectory() as run_dir:
            policy = gsb_mdpo.train(env_cls, seed=seed, output_dir=run_dir)
            return evaluate(policy, env_cls(), n_episodes=EVAL_EPISODES, deterministic=True, seed=EVAL_SEED)
    from stable_baselines3 import PPO

    model = PPO("MlpPolicy", env_cls(), seed=seed, device="cpu").learn(STEPS)
    return evaluate(model, env_cls(), n_episodes=EVAL_EPISODES, deterministic=True, seed=EVAL_SEED)


def main(argv=None) -> None:
    (algo,) = argv if argv is not None else sys.argv[1:]
    if algo not in ("gsb_mdpo", "sb3_ppo"):
        sys.exit(f"unknown column {algo!r}: gsb_mdpo or sb3_ppo")
    for env_cls in _envs():
        for seed in (0, 1, 2):
            start = time.perf_counter()
            result = train_and_score(algo, env_cls, seed)
            line = {
                "env": env_cls.__name__,
                "algo": algo,
                "seed": seed,
                "steps": STEPS,
                "mean": result.mean,
                "std": result.std,
                "wall_s": round(time.perf_counter() - start, 1),
            }
            with (FOLDER / "results.jsonl").open("a") as f:
                f.write(json.dumps(line) + "\n")
            print(line, flush=True)


if __name__ == "__main__":
    main()
