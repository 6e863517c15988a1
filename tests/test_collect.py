"""`python -m trainers.collect`: episodes of a loadable policy recorded as a Minari dataset, and every bad
input as one line (exit 2) with nothing written."""

import shutil
import warnings

import jax
import minari
import numpy as np
import pytest

from gsbpolicy import GSBPolicy, PolicySpec, make_policy, save_policy
from trainers import collect
from trainers._core.cli import CliExit

EPISODES = 3


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory):
    """An untrained InvertedPendulum policy: its episodes are short, which is all a recording test needs."""
    spec = PolicySpec(obs_dim=4, act_dim=1, num_steps=4, width=16, depth=1, sigma_schedule="exponential",
                      sigma_max=1.0, sigma_min=0.5, action_low=(-3.0,), action_high=(3.0,),
                      env_id="InvertedPendulum-v5")  # fmt: skip
    folder = tmp_path_factory.mktemp("policy") / "policy"
    save_policy(make_policy(spec, key=jax.random.key(0)), folder)
    return folder


@pytest.fixture(scope="module")
def recorded(policy_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("datasets") / "demos"
    collect.main([str(policy_dir), "--out", str(out), "--episodes", str(EPISODES)])
    return out


def test_the_dataset_is_minaris_and_holds_the_policys_episodes(recorded, policy_dir):
    dataset = minari.MinariDataset(recorded / "data")
    assert dataset.total_episodes == EPISODES
    assert dataset.spec.env_spec.id == "InvertedPendulum-v5"  # the env defaults to the policy's
    assert dataset.id == "gsbpolicy/InvertedPendulum/demos-v0"
    policy = GSBPolicy.from_pretrained(policy_dir)
    for episode in dataset.iterate_episodes():
        expected, _ = policy.predict(episode.observations[:-1].astype(np.float32))
        np.testing.assert_allclose(episode.actions, expected, atol=1e-6)  # deterministic by default
    assert not list((recorded.parent).glob(".demos.*")), "no staging folder left behind"


def test_action_noise_perturbs_the_recorded_actions_within_the_bounds(policy_dir, tmp_path):
    out = tmp_path / "noisy"
    collect.main(
        [str(policy_dir), "--out", str(out), "--episodes", "2", "--action-noise", "0.5", "--seed", "3"]
    )
    policy = GSBPolicy.from_pretrained(policy_dir)
    episode = next(minari.MinariDataset(out / "data").iterate_episodes())
    clean, _ = policy.predict(episode.observations[:-1].astype(np.float32))
    assert np.abs(episode.actions - clean).mean() > 0.1
    assert np.all(np.abs(episode.actions) <= 3.0)


def test_overwrite_replaces_a_dataset_given_by_a_relative_path(policy_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "again"
    collect.main([str(policy_dir), "--out", "again", "--episodes", "1"])
    collect.main([str(policy_dir), "--out", str(out), "--episodes", "2", "--overwrite"])
    assert minari.MinariDataset(out / "data").total_episodes == 2


@pytest.mark.parametrize(
    "case, expected",
    [
        ("no episodes", "--episodes must be >= 1"),
        ("negative noise", "--action-noise must be a finite number >= 0"),
        ("nan noise", "--action-noise must be a finite number >= 0"),
        ("missing policy", "cannot load the policy"),
        ("other env", "the policy takes observations of shape (4,), Hopper-v5 gives (11,)"),
        ("unknown env", "cannot make the env 'Nope-v0'"),
        ("not empty", "is not empty; pass --overwrite"),
        ("overwrite other files", "replaces only a Minari dataset"),
        ("out is a file", "is a file, not a folder"),
        ("bad flag", "--episodes"),
        ("out empty", "--out must name a dataset folder, got '.'"),
        ("out a link", "is a symbolic link (to "),
        (
            "policy a URL",
            "cannot load the policy https://huggingface.co/org/x: expected a policy folder or a Hub repo "
            "id ORG/NAME, got the URL 'https://huggingface.co/org/x': pass the repo id ('org/x') or a local folder",
        ),
        ("policy empty", "got an empty string"),
        (
            "env returns a NaN observation",
            "faulty_env:FaultyNanObs-v0 returned observation[2] = nan at env step 40",
        ),
        (
            "env returns an infinite reward",
            "faulty_env:FaultyInfReward-v0 returned reward = inf at env step 40",
        ),
        (
            "env resets to the wrong shape",
            "faulty_env:FaultyResetShape-v0 returned an observation of shape (5,) from",
        ),
        (
            "env's action bounds have low > high",
            "faulty_env:FaultySwappedBounds-v0's action_space has low > high",
        ),
        ("out a run folder", "is the folder of a training run: writing there would replace it"),
        ("out a saved policy", "is a saved policy's folder: writing there would replace it"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(case, expected, policy_dir, tmp_path, capsys):
    out = tmp_path / "out"
    argv = [str(policy_dir), "--out", str(out), "--episodes", "1"]
    changes = {"no episodes": ["--episodes", "0"], "negative noise": ["--action-noise", "-0.1"],
               "nan noise": ["--action-noise", "nan"], "other env": ["--env", "Hopper-v5"],
               "unknown env": ["--env", "Nope-v0"], "bad flag": ["--episodes", "many"],
               "env returns a NaN observation": ["--env", "tests.faulty_env:FaultyNanObs-v0", "--episodes", "3"],
               "env returns an infinite reward": ["--env", "tests.faulty_env:FaultyInfReward-v0", "--episodes", "3"],
               "env resets to the wrong shape": ["--env", "tests.faulty_env:FaultyResetShape-v0"],
               "env's action bounds have low > high": ["--env", "tests.faulty_env:FaultySwappedBounds-v0"]}  # fmt: skip
    argv += changes.get(case, [])
    if case == "missing policy":
        argv[0] = str(tmp_path / "nope")
    argv[0] = {"policy a URL": "https://huggingface.co/org/x", "policy empty": ""}.get(case, argv[0])
    if case == "out empty":
        argv[2] = ""
    if case == "out a link":
        (tmp_path / "elsewhere").mkdir()
        out.symlink_to(tmp_path / "elsewhere")
    if case in ("not empty", "overwrite other files"):
        out.mkdir()
        (out / "mine.txt").write_text("keep me")
        argv += ["--overwrite"] if case == "overwrite other files" else []
    if case == "out is a file":
        out.write_text("a file")
    if case == "out a run folder":
        out.mkdir()
        (out / "run.json").write_text("{}")
        (out / "metrics.jsonl").write_text("")
        argv += ["--overwrite"]
    if case == "out a saved policy":
        shutil.copytree(policy_dir, out)
        argv += ["--overwrite"]
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    with pytest.raises(CliExit) as exit_, warnings.catch_warnings():
        if case == "env resets to the wrong shape":  # gymnasium's env checker warns first; the error is ours
            warnings.filterwarnings("ignore", ".*The obs returned by the `reset\\(\\)` method", UserWarning)
        collect.main(argv)
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and expected in err, err
    assert err.startswith("error: ") and "\n" not in err
    if case in ("not empty", "overwrite other files"):
        assert (out / "mine.txt").read_text() == "keep me"
    elif case == "out a link":
        assert out.is_symlink() and not list((tmp_path / "elsewhere").iterdir())
    elif case in ("out a run folder", "out a saved policy"):
        assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
    elif case != "out is a file":
        assert not out.exists()
    assert not list(tmp_path.glob(".out.*"))
