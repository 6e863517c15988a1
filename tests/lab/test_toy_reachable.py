"""The reachable-share decomposition of the toy: exact on a case with a closed form, below the total where
the advantage jumps, and bad input refused."""

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest

from gsbpolicy import PolicySpec, make_policy
from trainers.lab import toy_reachable


def _brownian(num_steps=4):
    """Zero drift, sigma = 1: a^(N) = a^(0) + sum of N steps of variance 1/N, so Var(a^(N)_1) = 2."""
    spec = PolicySpec(obs_dim=1, act_dim=2, num_steps=num_steps, width=8, depth=1, sigma_schedule="constant",
                      sigma_max=1.0, sigma_min=1.0, squash="none")  # fmt: skip
    policy = make_policy(spec, key=jax.random.key(0))
    params, static = eqx.partition(policy.drift_net, eqx.is_inexact_array)
    return eqx.tree_at(
        lambda p: p.drift_net, policy, eqx.combine(jax.tree.map(jnp.zeros_like, params), static)
    )


@pytest.fixture(scope="module")
def linear_shares():
    return toy_reachable.reachable_shares(_brownian(), lambda x: x[0], jax.random.key(1), paths=256,
                                          children=32, continuations=16)  # fmt: skip


def test_a_linear_advantage_of_brownian_motion_is_all_reachable_but_the_prior(linear_shares):
    # V_n(a) = a_1: the prior holds half of Var(A) = 2 and each step a quarter of the rest, all linear.
    assert linear_shares["var_a"] == pytest.approx(2.0, rel=0.15)
    assert linear_shares["prior_share"] == pytest.approx(0.5, abs=0.07)
    assert linear_shares["step_energy_share"] == pytest.approx([0.125] * 4, abs=0.04)
    assert linear_shares["reachable"] == pytest.approx(0.5, abs=0.08)
    assert abs(linear_shares["nonlinear"]) < 0.08


def test_an_advantage_that_jumps_leaves_a_nonlinear_remainder():
    shares = toy_reachable.reachable_shares(_brownian(), lambda x: jnp.sign(x[0]), jax.random.key(2),
                                            paths=256, children=32, continuations=16)  # fmt: skip
    total = shares["prior_share"] + sum(shares["step_energy_share"])
    assert total == pytest.approx(1.0, abs=0.1)  # the martingale terms account for all of Var(A)
    assert shares["nonlinear"] > 0.05 and shares["reachable"] < 1 - shares["prior_share"] - 0.05


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["--children", "3"], "--children must be an even number"), (["--paths", "1"], "--paths and --continuations"),
     (["--toy.num-steps", "0"], "--num-steps must be at least 1")],
)  # fmt: skip
def test_bad_settings_are_usage_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        toy_reachable.main(argv)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert message in error and len(error.strip().splitlines()) == 1
