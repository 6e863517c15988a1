"""Shared fixtures and the session's compilation cache. JAX raises on implicit rank promotion everywhere, and modules marked
`strict_promotion` (the policy maths) also run with strict dtype promotion, so silent broadcasting and
dtype bugs in likelihood code fail loudly (the Equinox/diffrax habit). Optax itself does not run under
strict dtype promotion, so training tests keep the standard rules."""

import os
import tempfile

import jax
import numpy as np
import pytest

from trainers._core import compile_cache

jax.config.update("jax_numpy_rank_promotion", "raise")

# One persistent compilation cache for the whole test session, this process and every subprocess it starts
# (they inherit the variable): a function compiled by one test or CLI subprocess is loaded by the next.
# Set before anything compiles (JAX decides at a process's first compile). `.ci/run` sets the folder itself.
os.environ.setdefault(compile_cache.ENV_VAR, tempfile.mkdtemp(prefix="gsbpolicy-test-compile-cache-"))
compile_cache.enable("auto")

from gsbpolicy import PolicySpec, make_policy  # noqa: E402


@pytest.fixture(autouse=True)
def _dtype_promotion(request):
    if request.node.get_closest_marker("strict_promotion"):
        with jax.numpy_dtype_promotion("strict"):
            yield
    else:
        yield


@pytest.fixture
def getkey():
    """A fresh PRNG key per call, deterministic per test."""
    counter = iter(range(1_000_000))
    return lambda: jax.random.key(next(counter))


@pytest.fixture(scope="session")
def tiny_spec() -> PolicySpec:
    return PolicySpec(
        obs_dim=4,
        act_dim=2,
        num_steps=6,
        width=16,
        depth=2,
        sigma_schedule="exponential",
        sigma_max=1.5,
        sigma_min=0.5,
        action_low=(-1.0, -2.0),
        action_high=(1.0, 3.0),
        env_id="Tiny-v0",
    )


@pytest.fixture(scope="session")
def tiny_policy(tiny_spec):
    """A tiny policy with non-trivial observation statistics."""
    policy = make_policy(tiny_spec, key=jax.random.key(42))
    batch = np.random.default_rng(0).normal(2.0, 3.0, (64, tiny_spec.obs_dim)).astype(np.float32)
    return policy.with_normalizer(policy.normalizer.update(batch))


LONGEST_FILES_FIRST = (
    "test_slurm.py",
    "test_seed_group.py",
    "test_readme.py",
    "test_trainer.py",
    "test_distributed.py",
    "test_contract.py",
    "test_pins_update.py",
    "test_ppo.py",
    "test_envs.py",
    "test_genpo.py",
    "test_fpo.py",
    "test_benchmark.py",
    "test_policy_kinds.py",
    "test_bad_inputs_publish.py",
    "test_dppo.py",
    "test_gaussian_ppo.py",
    "test_api.py",
    "test_progress.py",
)
"""Test files queued heaviest first: the files whose tests start subprocesses or compile whole training runs
(on a 2-core CPU, `bash .ci/run` took 434-446 s with this order and 494-499 s with the files sorted by their
summed `--durations=0`, which starts test_readme.py and test_contract.py together). With
`-n 2 --dist loadfile` each file runs whole on one of the two workers, and xdist hands the files out in
queue order as workers free up; by default it queues the files with the most tests first, and the longest
files here have few tests, so they started last and one worker sat idle for minutes at the end. Queued
longest first, the short files fill in around them. test_slurm.py leads: most of its minutes are Slurm jobs
sleeping through a time limit or waiting to be requeued, which leaves the CPU to the other worker."""


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist >= 3.6: keep the collection order below
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order
