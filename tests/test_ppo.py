"""SB3 PPO (trainers.ppo): the run folder, the exported policy against SB3's own, SB3's `evaluate_policy`
against `gsbpolicy.evaluate`, resume, config errors, and the Playground VecEnv adapter."""

import json

import gymnasium
import jax
import numpy as np
import pytest
import torch
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

from gsbpolicy import GSBPolicy, evaluate
from trainers._core.checkpoint import load_checkpoint
from trainers._core.envs import PlaygroundEnv
from trainers._core.rundir import RunFolderError
from trainers.ppo import Sb3Trainer, cpu_preset, main
from trainers.presets import with_fields
from trainers.sb3.vecenv import PlaygroundVecEnv

ENV = "InvertedPendulum-v5"
TINY = {
    "rollout": {"num_envs": 2, "unroll_length": 32, "num_minibatches": 2, "epochs": 2},
    "eval": {"num_evals": 2, "episodes": 2, "final_episodes": 2},
    "log": {"checkpoint_every": 2, "progress": False},
}


def tiny_args(run_dir, **changes):
    return with_fields(cpu_preset(ENV), **{"total_steps": 4 * 64, "output_dir": run_dir, **TINY, **changes})


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    trainer = Sb3Trainer(tiny_args(tmp_path_factory.mktemp("ppo") / "run"))
    return trainer, trainer.run()


def records(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_run_folder_matches_the_shared_layout(trained):
    trainer, policy_dir = trained
    run_dir = trainer.run_dir
    assert json.loads((run_dir / "run.json").read_text())["algo"] == "ppo"
    kinds = [r["type"] for r in records(run_dir)]
    assert kinds.count("train") == 4 and kinds.count("eval") == 2
    first = records(run_dir)[0]
    assert {"iteration", "env_steps", "time/wall_s", "time/sps", "train/episodes", "train/actor_loss",
            "train/value_loss", "train/clip_frac", "train/approx_kl", "train/entropy"} <= set(first)  # fmt: skip
    assert {"eval/return_deterministic", "eval/return_stochastic_std"} <= set(records(run_dir)[-1])
    results = json.loads((policy_dir / "results.json").read_text())
    assert set(results) == {"env_id", "algo", "mean", "std", "n_episodes", "returns", "lengths", "deterministic",
                            "seeds", "eval_seed", "env_steps", "git_commit", "git_dirty", "date",
                            "metrics_sha256"}  # fmt: skip
    assert results["algo"] == "ppo" and results["env_steps"] == 256 and results["n_episodes"] == 2
    suffixes = {p.suffix for p in run_dir.rglob("*") if p.is_file()}
    assert suffixes <= {".json", ".jsonl", ".safetensors", ".lock"}, suffixes  # no zip, no pickle


def test_exported_policy_equals_sb3(trained):
    trainer, policy_dir = trained
    model, vecnorm = trainer.model, trainer.normalizer
    obs = np.random.default_rng(0).normal(0, 0.5, (16, 4)).astype(np.float32)
    sb3_actions, _ = model.predict(vecnorm.normalize_obs(obs), deterministic=True)
    ours, _ = GSBPolicy.from_pretrained(policy_dir).predict(obs)
    np.testing.assert_allclose(ours, sb3_actions, atol=1e-5)
    actor = trainer.actor()
    u = np.random.default_rng(1).normal(0, 1, (16, 1)).astype(np.float32)
    with torch.no_grad():
        _, sb3_log_prob, _ = model.policy.evaluate_actions(
            torch.as_tensor(vecnorm.normalize_obs(obs)), torch.as_tensor(u)
        )
    ours = jax.vmap(actor.log_prob)(obs, u)
    np.testing.assert_allclose(ours, sb3_log_prob.numpy(), rtol=1e-4, atol=1e-4)


def test_sb3_evaluate_policy_and_ours_agree(trained):
    trainer, policy_dir = trained
    seed, episodes = 7, 6
    venv = VecNormalize(DummyVecEnv([lambda: Monitor(gymnasium.make(ENV)) for _ in range(3)]), training=False,
                        norm_reward=False, clip_obs=10.0, epsilon=1e-8)  # fmt: skip
    venv.obs_rms = trainer.normalizer.obs_rms
    venv.seed(seed)
    sb3_returns, sb3_lengths = evaluate_policy(
        trainer.model, venv, episodes, deterministic=True, return_episode_rewards=True
    )
    ours = evaluate(
        GSBPolicy.from_pretrained(policy_dir),
        gymnasium.make_vec(ENV, 3, vectorization_mode="sync"),
        episodes,
        True,
        seed,
    )
    np.testing.assert_allclose(ours.returns, sb3_returns)
    assert list(ours.lengths) == list(sb3_lengths)


def test_resume_continues_from_the_checkpoint(tmp_path, monkeypatch):
    """A 6-iteration run killed in iteration 5 (after its iteration-4 checkpoint) continues from exactly what
    that checkpoint holds, and ends with one unbroken sequence of records."""
    run_dir = tmp_path / "resumed"
    args = tiny_args(run_dir, total_steps=6 * 64)
    original, calls = Sb3Trainer.collect_and_update, []

    def killed_in_fifth_iteration(self):
        calls.append(1)
        if len(calls) == 5:
            raise KeyboardInterrupt
        return original(self)

    monkeypatch.setattr(Sb3Trainer, "collect_and_update", killed_in_fifth_iteration)
    with pytest.raises(KeyboardInterrupt):
        Sb3Trainer(args).run()
    monkeypatch.undo()
    with pytest.raises(RunFolderError, match="interrupted run; pass --resume"):
        Sb3Trainer(args)
    with pytest.raises(RunFolderError, match="--total-steps 384 -> 512"):
        Sb3Trainer(tiny_args(run_dir, total_steps=8 * 64, resume=True))
    resumed = Sb3Trainer(with_fields(args, resume=True))
    resumed.load_state(*resumed.folder.restore(resumed.state_trees()))
    saved, _ = load_checkpoint(run_dir / "checkpoint", resumed.state_trees())
    for name, tree in resumed.state_trees().items():
        for got, want in zip(jax.tree.leaves(tree), jax.tree.leaves(saved[name]), strict=True):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert resumed.iteration == 4
    resumed.run()
    train = [r for r in records(run_dir) if r["type"] == "train"]
    assert [r["iteration"] for r in train] == [1, 2, 3, 4, 5, 6] and train[-1]["env_steps"] == 384


def test_non_finite_update_stops_before_anything_is_saved(trained):
    """What went non-finite is named (the loop then stops the run before logging or saving the iteration: the
    message and diverged.json are the run folder's, `test_env_backends`)."""
    trainer, _ = trained
    assert trainer._non_finite({"actor_loss": 0.1, "value_loss": float("inf")}) == "value_loss"
    assert trainer._non_finite({"actor_loss": 0.1}) is None
    param = next(trainer.model.policy.parameters())
    saved = param.detach().clone()
    with torch.no_grad():
        param.view(-1)[0] = float("nan")
    try:
        assert trainer._non_finite({"actor_loss": 0.1}) == "parameters"
    finally:
        with torch.no_grad():
            param.copy_(saved)


def test_cli_rejects_what_sb3_cannot_express(tmp_path):
    with pytest.raises(SystemExit, match="one activation"):
        main(["--critic.activation", "elu", "--output-dir", str(tmp_path / "x")])
    with pytest.raises(SystemExit, match="recompute-gae"):
        main(["--rollout.recompute-gae", "--output-dir", str(tmp_path / "x")])


def test_playground_vecenv_reports_truncation_and_resets_to_first_states():
    # The adapter is the same for every Playground env: a pure-JAX one compiles in a second, an MJX task's
    # step in most of a minute on a shared 2-core CPU.
    venv = PlaygroundVecEnv(PlaygroundEnv.make("tests.jax_point_mass:PointMass", 2, episode_length=3))
    venv.seed(0)
    first = venv.reset()
    assert first.shape == (2, venv.observation_space.shape[0])
    for step in range(3):
        obs, reward, dones, infos = venv.step(np.full((2, *venv.action_space.shape), 0.5, np.float32))
        assert reward.shape == (2,) and dones.tolist() == [step == 2] * 2
    assert all(info["TimeLimit.truncated"] for info in infos)
    assert not np.allclose(infos[0]["terminal_observation"], first[0])
    np.testing.assert_array_equal(obs, first)  # auto-reset to the cached first states
