"""Benchmark-level settings shared by every method: the rows of the paper's Tables 1 and 2 that are
the same in every column (rollout geometry, discounting, evaluation). Each algorithm file fills in its
own column (networks, learning rates, algorithm coefficients) on top of these.
"""

import dataclasses

from ._core.config import EvalArgs, LogArgs, RolloutArgs, TrainArgs

GAMMA_095_TASKS = ("BallInCup", "FingerSpin")
"""Table 1 footnote: the FPO Playground setup uses gamma = 0.95 on these tasks, 0.995 elsewhere."""


def playground(env: str) -> TrainArgs:
    """Table 1: 2048 envs, unroll 30, batch 1024 x 32 minibatches (16 unrolls), 16 updates per batch,
    reward scaling 10, GAE per minibatch with the current critic (Brax/FPO), 60M steps, 10 evaluations."""
    rollout = RolloutArgs(
        num_envs=2048,
        unroll_length=30,
        unrolls_per_iteration=1024 * 32 // 2048,
        num_minibatches=32,
        epochs=16,
        gamma=0.95 if env in GAMMA_095_TASKS else 0.995,
        gae_lambda=0.95,
        reward_scaling=10.0,
        recompute_gae=True,
        episode_length=1000,
    )
    return TrainArgs(
        env=env,
        total_steps=60_000_000,
        preset="playground",
        rollout=rollout,
        eval=EvalArgs(num_evals=10, num_envs=128),
        log=LogArgs(checkpoint_every=5),
    )


def gym(env: str) -> TrainArgs:
    """Table 2: 1024 envs x 24 steps, 4 minibatches of 6144, 4 epochs, gamma 0.99, 40M steps,
    evaluation every 1M steps over 10 episodes."""
    rollout = RolloutArgs(
        num_envs=1024,
        unroll_length=24,
        unrolls_per_iteration=1,
        num_minibatches=4,
        epochs=4,
        gamma=0.99,
        gae_lambda=0.95,
        reward_scaling=1.0,
        recompute_gae=False,
    )
    return TrainArgs(
        env=env,
        total_steps=40_000_000,
        preset="gym",
        rollout=rollout,
        eval=EvalArgs(interval_steps=1_000_000, episodes=10),
        log=LogArgs(checkpoint_every=20),
    )


def specialise(args_type: type, base: TrainArgs, **changes):
    """An algorithm's `Args` from a shared preset: base's shared fields, then `changes` on top."""
    shared = {f.name: getattr(base, f.name) for f in dataclasses.fields(TrainArgs)}
    return args_type(**{**shared, **changes})


def with_fields(args, **changes):
    """`dataclasses.replace` for nested groups: with_fields(args, rollout={"epochs": 8}, seed=1)."""
    resolved = {
        name: dataclasses.replace(getattr(args, name), **value) if isinstance(value, dict) else value
        for name, value in changes.items()
    }
    return dataclasses.replace(args, **resolved)
