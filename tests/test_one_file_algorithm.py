"""An algorithm is its file plus one registry line. A tiny algorithm is written here, in this module alone, as a
new algorithm's file would be (its args, how it acts, its loss, its presets, `train` and `main`), registered for
the test, and put through what every algorithm goes through: training from the command line and from Python,
a kill and a resume, loading with `GSBPolicy.from_pretrained`, evaluation, ONNX export and a model card. No other
file of the repository names it.
"""

import dataclasses
import json
import shutil
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_contract import TINY, _records

from export import onnx as onnx_export
from export.runtime import OnnxPolicy
from gsbpolicy import FlowPolicy, GSBPolicy, evaluate
from gsbpolicy._internal import sample_noise
from hub_cards import publish
from trainers import registry
from trainers._core import lifecycle
from trainers._core.algorithm import AbstractAlgorithm
from trainers._core.api import loop_entry_points
from trainers._core.config import TrainArgs, require


# ------------------------------------------------------------------------------------------ the algorithm's file
@dataclasses.dataclass(frozen=True)
class PathReinforceArgs:
    """A flow policy trained by the score-function gradient of its path log-density (REINFORCE on paths)."""

    advantage_scale: float = 1.0
    """Multiplies the advantages in the loss."""

    def validate(self) -> None:
        require(self.advantage_scale > 0, "algo.advantage_scale", "> 0", self.advantage_scale)


@dataclasses.dataclass(frozen=True)
class Args(TrainArgs):
    algo: PathReinforceArgs = PathReinforceArgs()


class PathExtras(NamedTuple):
    path: jax.Array
    """a^(0:N), stored at rollout."""


class PathReinforce(AbstractAlgorithm):
    name = "path_reinforce"
    args: PathReinforceArgs

    def act(self, actor: FlowPolicy, obs, key):
        sample = jax.vmap(actor.sample)(obs, sample_noise(key, actor.spec, obs.shape[:1]))
        return jax.vmap(actor.to_env)(sample.path[:, -1]), PathExtras(sample.path)

    def actor_loss(self, actor: FlowPolicy, obs, extras: PathExtras, advantages, key):
        log_prob = jax.vmap(actor.log_prob)(obs, extras.path)
        loss = -jnp.mean(log_prob * jax.lax.stop_gradient(self.args.advantage_scale * advantages))
        return loss, {"log_prob": jnp.mean(log_prob)}


PRESETS = {"cpu": lambda env: Args(env=env or "InvertedPendulum-v5", total_steps=2048, preset="cpu")}

train, main = loop_entry_points(PathReinforce, Args, PRESETS, __doc__)

REGISTRY_LINE = registry.Algorithm("path_reinforce", "Path REINFORCE", "flow", module=__name__)
"""The one line a new algorithm adds to `trainers.registry.ALGORITHMS` (here registered for the test alone)."""


# ----------------------------------------------------------------------------------------------------- the test
@pytest.fixture(scope="module")
def registered():
    registry.register(REGISTRY_LINE)
    yield
    registry.unregister(REGISTRY_LINE.name)


@pytest.fixture(scope="module")
def finished(registered, tmp_path_factory):
    out = tmp_path_factory.mktemp("one_file") / "run"
    main([*TINY, "--log.export-onnx", "--output-dir", str(out)])
    return out


def test_it_trains_from_the_command_line_and_its_policy_loads_evaluates_and_exports(finished):
    run = json.loads((finished / "run.json").read_text())
    assert run["algo"] == "path_reinforce" and run["module"] == __name__
    assert [r["type"] for r in _records(finished)] == ["train", "train", "train", "eval"]
    assert "train/log_prob" in _records(finished)[0]
    policy = GSBPolicy.from_pretrained(finished / "policy")
    assert policy.kind == "flow" and policy.spec.env_id == "InvertedPendulum-v5"
    assert np.isfinite(evaluate(policy, "InvertedPendulum-v5", n_episodes=2).returns).all()
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    actions, _ = OnnxPolicy(finished / "policy" / "policy.onnx").predict(obs)
    np.testing.assert_allclose(actions, policy.predict(obs)[0], atol=1e-5)
    assert onnx_export.main([str(finished / "policy"), "--out", str(finished.parent / "again.onnx")]) == 0


def test_a_killed_run_resumes_to_the_same_records(finished, tmp_path, monkeypatch):
    out = tmp_path / "run"
    original, calls = lifecycle.train_record, []

    def killed_in_third_iteration(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(lifecycle, "train_record", killed_in_third_iteration)
    with pytest.raises(SystemExit):
        main([*TINY, "--log.export-onnx", "--output-dir", str(out)])
    monkeypatch.undo()
    main([*TINY, "--log.export-onnx", "--output-dir", str(out), "--resume"])
    assert _records(out) == _records(finished)


def test_it_trains_from_python_and_refuses_what_its_args_forbid(registered, tmp_path):
    policy = train("InvertedPendulum-v5", total_steps=1024, output_dir=tmp_path / "py",
                   eval={"num_evals": 1, "episodes": 2, "final_episodes": 2}, log={"progress": False})  # fmt: skip
    assert isinstance(policy, GSBPolicy) and policy.spec.obs_dim == 4
    with pytest.raises(ValueError, match=r"--algo\.advantage-scale must be > 0, got -1\.0"):
        train("InvertedPendulum-v5", algo={"advantage_scale": -1.0}, output_dir=tmp_path / "bad")


def test_its_run_publishes_a_card_that_names_its_own_command(finished, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(finished, run, ignore=shutil.ignore_patterns("run.lock"))
    assert publish.main([str(run), "--repo-id", "org/path-reinforce", "--dry-run", "--no-video"]) == 0
    card = (run / "hub" / "README.md").read_text()
    assert f"python -m {__name__} --preset cpu" in card and REGISTRY_LINE.label in card
