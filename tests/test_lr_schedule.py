"""`--optim.cosine-decay-steps`: a cosine schedule laid out for more env steps than the run trains, so that a run
can be read part way through a longer schedule (walker2d-causes-cpu-gym's `gsb_mdpo:paper-updates`)."""

import math

import jax.numpy as jnp
import numpy as np
import pytest

from trainers import gsb_mdpo
from trainers._core.cli import parse
from trainers._core.config import OptimArgs
from trainers._core.loop import make_optimizers
from trainers._core.model import ActorCritic, Optimizers


def _steps_taken(optimizers: Optimizers, updates: int) -> np.ndarray:
    """The actor's learning rate at each update: with a constant gradient Adam's step is the rate itself (its
    bias-corrected moments divide to 1, up to eps)."""
    params = ActorCritic(jnp.zeros(1), jnp.zeros(1))
    state, taken = optimizers.init(params), []
    for _ in range(updates):
        before = params
        params, state = optimizers.update(ActorCritic(jnp.ones(1), jnp.ones(1)), state, params)
        taken.append(float(before.actor[0] - params.actor[0]))
    return np.asarray(taken)


def test_a_longer_decay_is_the_same_cosine_stopped_part_way():
    args = OptimArgs(actor_lr=1.0, critic_lr=1.0, actor_cosine_decay=True)
    expected = [0.5 * (1 + math.cos(math.pi * k / 40)) for k in range(10)]
    np.testing.assert_allclose(
        _steps_taken(Optimizers.make(args, 10, decay_updates=40), 10), expected, rtol=1e-4
    )
    whole = [0.5 * (1 + math.cos(math.pi * k / 10)) for k in range(10)]
    np.testing.assert_allclose(_steps_taken(Optimizers.make(args, 10), 10), whole, rtol=1e-4, atol=1e-6)


def test_the_horizon_is_counted_in_whole_iterations_of_the_runs_geometry(monkeypatch):
    argv = ["--preset", "gym", "--env", "Walker2d-v5", "--total-steps", "1000000", "--rollout.num-envs", "32",
            "--rollout.unroll-length", "64", "--optim.cosine-decay-steps", "3334144"]  # fmt: skip
    args = parse(gsb_mdpo.Args, gsb_mdpo.PRESETS, "cpu", "", argv)
    seen = {}
    monkeypatch.setattr(Optimizers, "make", lambda *a, **k: seen.update(args=a, kwargs=k))
    make_optimizers(args)
    # 2048 env steps an iteration, 4 epochs x 4 minibatches: 489 iterations run, 1628 in the schedule.
    assert seen["args"][1] == 489 * 16 and seen["kwargs"]["decay_updates"] == 1628 * 16
    monkeypatch.setattr(Optimizers, "make", lambda *a, **k: seen.update(args=a, kwargs=k))
    make_optimizers(parse(gsb_mdpo.Args, gsb_mdpo.PRESETS, "cpu", "", argv[:-2]))
    assert seen["kwargs"]["decay_updates"] is None


def test_a_horizon_below_one_step_is_refused():
    with pytest.raises(ValueError, match="--optim.cosine-decay-steps must be >= 1"):
        OptimArgs(cosine_decay_steps=0).validate()
