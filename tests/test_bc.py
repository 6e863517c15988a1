"""`python -m trainers.bc`: a flow policy fitted to a Minari dataset by bridge matching, written as an
ordinary run folder; datasets by folder or by local Minari id; every bad input one line (exit 2)."""

import json
import shutil

import equinox as eqx
import h5py
import jax
import jax.numpy as jnp
import minari
import numpy as np
import pytest

from gsbpolicy import GSBPolicy, PolicySpec, make_policy, save_policy
from trainers import bc, collect
from trainers._core.cli import CliExit

FIT = ["--steps", "800", "--batch-size", "128", "--eval-episodes", "2", "--policy.num-steps", "4",
       "--policy.width", "32", "--policy.depth", "1"]  # fmt: skip


@pytest.fixture(scope="module")
def demos(tmp_path_factory):
    """Demonstrations of an untrained policy with strong, state-dependent actions (short episodes)."""
    spec = PolicySpec(obs_dim=4, act_dim=1, num_steps=4, width=16, depth=1, output_scale=3.0,
                      sigma_schedule="exponential", sigma_max=1.0, sigma_min=0.5, action_low=(-3.0,),
                      action_high=(3.0,), env_id="InvertedPendulum-v5")  # fmt: skip
    root = tmp_path_factory.mktemp("bc")
    save_policy(make_policy(spec, key=jax.random.key(7)), root / "expert")
    collect.main([str(root / "expert"), "--out", str(root / "demos"), "--episodes", "20"])
    return root


@pytest.fixture(scope="module")
def fitted(demos):
    policy_dir = bc.main(["--dataset", str(demos / "demos"), "--output-dir", str(demos / "run"), *FIT])
    return policy_dir


def test_the_fit_imitates_the_demonstrations(fitted, demos):
    dataset = minari.MinariDataset(demos / "demos" / "data")
    obs, actions = bc.demonstrations(dataset)
    policy = GSBPolicy.from_pretrained(fitted)
    assert (
        policy.spec.num_steps == 4 and policy.spec.width == 32 and policy.spec.env_id == "InvertedPendulum-v5"
    )
    assert policy.spec.sigma_schedule == "exponential"  # GSB-MDPO's sampler: the cpu preset's policy group
    np.testing.assert_allclose(policy.policy.normalizer.mean, obs.mean(0), rtol=1e-4, atol=1e-5)
    assert float(policy.policy.normalizer.count) == len(obs)
    error = np.abs(policy.predict(obs)[0] - actions).mean()
    assert error < 0.5 * np.abs(actions - actions.mean()).mean(), error  # far better than a constant
    records = [json.loads(line) for line in (fitted.parent / "metrics.jsonl").read_text().splitlines()]
    losses = [r["train/bc_loss"] for r in records if r["type"] == "train"]
    assert losses[-1] < losses[0] and records[-1]["type"] == "eval"


def test_the_run_folder_is_a_trainers(fitted):
    run = json.loads((fitted.parent / "run.json").read_text())
    results = json.loads((fitted / "results.json").read_text())
    assert run["algo"] == results["algo"] == "bc" and run["args"]["env"] == "InvertedPendulum-v5"
    assert results["n_episodes"] == 2 and results["env_steps"] == 0


def test_a_dataset_in_the_local_minari_cache_loads_by_id(demos, tmp_path, monkeypatch):
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    shutil.copytree(demos / "demos", tmp_path / "minari" / "gsbpolicy" / "InvertedPendulum" / "demos-v0")
    dataset = bc.load_dataset("gsbpolicy/InvertedPendulum/demos-v0")
    assert dataset.total_episodes == 20


@pytest.mark.parametrize("squash", ["tanh", "clip", "none"])
def test_pre_squash_inverts_the_policys_squash(squash):
    spec = PolicySpec(obs_dim=2, act_dim=2, num_steps=2, width=4, depth=1, squash=squash,
                      action_low=(-1.0, 0.0), action_high=(1.0, 4.0))  # fmt: skip
    policy = make_policy(spec, key=jax.random.key(0))
    actions = np.array([[0.3, 1.0], [-0.9, 3.5], [1.0, 0.0]], np.float32)  # the last on the bounds
    back = np.asarray(jax.vmap(policy.to_env)(jnp.asarray(bc.pre_squash(actions, spec))))
    np.testing.assert_allclose(back, actions, atol=5e-3)


@pytest.mark.parametrize(
    "case, expected",
    [
        ("no dataset", "--dataset must be given"),
        ("missing folder", "no such dataset folder"),
        ("not a dataset", "not a Minari dataset folder"),
        ("unknown id", "not a dataset in the local Minari cache"),
        ("other env", "--env Hopper-v5 is not the dataset's env InvertedPendulum-v5"),
        ("no steps", "--steps must be >= 1"),
        ("bad lr", "--lr must be > 0"),
        ("finished run", "already holds a finished run"),
        ("bad spec", "sigma_min must be > 0"),
        ("truncated data file", "its data file is truncated or corrupted; record the dataset again"),
        ("actions outside the space", "action values outside its action space"),
        (
            "a bit flipped in an observation",
            "data/main_data.hdf5 does not match the sha256 trainers.collect recorded",
        ),
    ],
)
def test_bad_input_is_one_line(case, expected, demos, fitted, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    out = tmp_path / "run"
    argv = ["--dataset", str(demos / "demos"), "--output-dir", str(out), *FIT]
    changes = {"no dataset": ["--dataset", ""], "missing folder": ["--dataset", str(tmp_path / "nope")],
               "not a dataset": ["--dataset", str(tmp_path)], "unknown id": ["--dataset", "me/nothing-v0"],
               "other env": ["--env", "Hopper-v5"], "no steps": ["--steps", "0"], "bad lr": ["--lr", "0"],
               "finished run": ["--output-dir", str(fitted.parent)],
               "bad spec": ["--policy.sigma-min", "0"]}  # fmt: skip
    if case in ("truncated data file", "actions outside the space", "a bit flipped in an observation"):
        damaged = tmp_path / "damaged"
        shutil.copytree(demos / "demos", damaged)
        argv[1] = str(damaged)
        (data_file,) = damaged.rglob("*.hdf5")
        flip = case == "a bit flipped in an observation"
        if not flip:  # a dataset from elsewhere, without checksums: the reader's own checks apply
            (damaged / collect.CHECKSUMS).unlink()
        if case == "truncated data file":
            data_file.write_bytes(data_file.read_bytes()[: data_file.stat().st_size // 2])
        elif flip:  # the lowest mantissa bit of one value: still finite, still plausible
            with h5py.File(data_file, "r+") as file:
                observations = file["episode_0/observations"]
                first = observations[0]
                first.view(np.uint32 if first.dtype == np.float32 else np.uint64)[0] ^= 1
                observations[0] = first
        else:
            with h5py.File(data_file, "r+") as file:
                actions = file["episode_0/actions"]
                actions[0] = actions[0] * 10 + 5  # in other units than the space's [-3, 3]
    with pytest.raises(CliExit) as exit_:
        bc.main([*argv, *changes.get(case, [])])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and expected in err, err
    assert err.startswith("error: ") and "\n" not in err
    assert not (out / "policy").exists()


def test_the_bridge_points_have_the_brownian_bridges_mean_and_spread(tiny_policy):
    """With a drift of zero the loss is the mean of remaining * |target|^2, a closed form of where the bridge
    puts its points a_n = x0 + w_n (x1 - x0) + std_n z: with x0 = x1 = 0 it measures their spread
    std_n^2 = nu_n (nu_N - nu_n) / nu_N (a bridge that lost its noise gives 0), with z = 0 their mean."""
    from trainers._core.bridge_matching import bridge_matching_loss

    last = tiny_policy.drift_net.mlp.layers[-1]
    policy = eqx.tree_at(
        lambda p: (p.drift_net.mlp.layers[-1].weight, p.drift_net.mlp.layers[-1].bias),
        tiny_policy,
        (jnp.zeros_like(last.weight), jnp.zeros_like(last.bias)),
    )
    num_steps, batch = policy.spec.num_steps, 600
    step_var = np.asarray(policy.sigmas(), np.float64) ** 2 / num_steps
    nu = np.concatenate([[0.0], np.cumsum(step_var)])
    steps = np.arange(batch) % num_steps
    remaining, dt = nu[-1] - nu[steps], 1.0 / num_steps
    z = np.random.default_rng(0).normal(size=(batch, 2))
    zeros, obs = np.zeros((batch, 2)), np.zeros((batch, 4))

    def loss(x1, z):
        x0, x1, z = (jnp.asarray(a, jnp.float32) for a in (zeros, x1, z))
        return float(
            bridge_matching_loss(policy, jnp.asarray(obs, jnp.float32), x0, x1, jnp.asarray(steps), z)
        )

    spread = nu[steps] * remaining / nu[-1]
    expected = np.mean(step_var[steps] ** 2 * spread * (z**2).sum(-1) / (remaining * dt**2))
    assert loss(zeros, z) == pytest.approx(expected, rel=1e-4)
    ones, w = np.ones((batch, 2)), nu[steps] / nu[-1]
    expected = np.mean(step_var[steps] ** 2 * 2 * (1 - w) ** 2 / (remaining * dt**2))
    assert loss(ones, zeros) == pytest.approx(expected, rel=1e-4)
