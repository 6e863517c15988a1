"""Fine-tuning from a pretrained flow policy (`--init-from`, `--init.critic-warmup-steps`): the run starts
from the pretrained actor and normaliser, the actor stays put during the critic warm-up, run.json records
the source, and every way of getting it wrong is one line."""

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsbpolicy import make_policy, save_policy
from gsbpolicy._io import policy_tensors
from gsbpolicy._policy import sample_noise
from trainers import dppo, fpo, fpo_pp, gaussian_ppo, genpo, gsb_mdpo
from trainers._core.cli import CliExit
from trainers._core.config import OptimArgs
from trainers._core.init_from import path_kl, strided, weights_sha256
from trainers._core.loop import Trainer
from trainers._core.model import ActorCritic, Optimizers
from trainers.presets import with_fields

TINY = {
    "rollout": {"num_envs": 4, "unroll_length": 16, "num_minibatches": 2, "epochs": 2},
    "policy": {"num_steps": 4, "width": 16, "depth": 1},
    "critic": {"width": 16, "depth": 1},
    "eval": {"num_evals": 1, "episodes": 2, "final_episodes": 2},
    "log": {"progress": False},
}
TINY_FLAGS = ["--rollout.num-envs", "4", "--rollout.unroll-length", "16", "--rollout.num-minibatches", "2",
              "--rollout.epochs", "2", "--policy.num-steps", "4", "--policy.width", "16", "--policy.depth", "1",
              "--critic.width", "16", "--critic.depth", "1", "--eval.num-evals", "1", "--eval.episodes", "2",
              "--eval.final-episodes", "2", "--log.no-progress", "--total-steps", "128"]  # fmt: skip


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    """A GSB-MDPO-shaped policy (the tiny spec) with its own weights and observation statistics, saved."""
    args = with_fields(gsb_mdpo.cpu_preset("InvertedPendulum-v5"), **TINY)
    spec = args.policy.spec(4, 1, [-3.0], [3.0], "InvertedPendulum-v5")
    policy = make_policy(spec, key=jax.random.key(123))
    obs = np.random.default_rng(0).normal(0.5, 2.0, (500, 4)).astype(np.float32)
    policy = policy.with_normalizer(policy.normalizer.update(jnp.asarray(obs)))
    folder = tmp_path_factory.mktemp("pretrained") / "policy"
    save_policy(policy, folder)
    return folder, policy


def tiny(module, tmp_path, name, **changes):
    return with_fields(module.cpu_preset("InvertedPendulum-v5"), total_steps=128, output_dir=tmp_path / name,
                       **TINY, **changes)  # fmt: skip


def same_tensors(a, b) -> bool:
    ta, tb = policy_tensors(a), policy_tensors(b)
    return ta.keys() == tb.keys() and all(np.array_equal(ta[k], tb[k]) for k in ta)


def test_the_actor_starts_pretrained_and_stays_put_during_the_critic_warmup(pretrained, tmp_path):
    folder, policy = pretrained
    args = tiny(gsb_mdpo, tmp_path, "warm", init={"source": str(folder), "critic_warmup_steps": 64})
    trainer = Trainer(gsb_mdpo.GsbMdpo(args.algo), args)
    try:
        start = trainer.state.model
        assert same_tensors(start.actor, policy), "weights and observation statistics are the pretrained ones"
        ((warmup, _),) = trainer.collect_and_update()  # iteration 1 (64 env steps): the warm-up
        after_warmup = trainer.state.model
        assert same_tensors(after_warmup.actor.drift_net, policy.drift_net), "the actor did not move"
        assert not same_tensors(after_warmup.critic, start.critic), "the critic learned"
        assert same_tensors(after_warmup.reference, policy), (
            "the yardstick is the pretrained policy, untrained"
        )
        assert warmup["path_kl_init"] == 0.0, "the rollout policy was the pretrained one"
        trainer.collect_and_update()  # iteration 2: its rollout's policy is still the pretrained one
        assert not same_tensors(trainer.state.model.actor.drift_net, policy.drift_net), "the actor learns"
        assert same_tensors(trainer.state.model.reference, policy), "the reference never moves"
        ((moved, _),) = trainer.collect_and_update()  # iteration 3 collected with the fine-tuned actor
        assert moved["path_kl_init"] > 0.0
    finally:
        trainer.folder.release()
        trainer.close()


@pytest.mark.parametrize("module", [fpo, fpo_pp, dppo], ids=["fpo", "fpo_pp", "dppo"])
def test_fpo_and_dppo_start_from_the_same_policy_given_its_sampler(module, pretrained, tmp_path):
    """Their presets' samplers differ from GSB-MDPO's; with the pretrained values they take it as it is."""
    folder, policy = pretrained
    cpu = gsb_mdpo.CPU_POLICY
    sampler = {"sigma_schedule": cpu.sigma_schedule, "sigma_max": cpu.sigma_max, "sigma_min": cpu.sigma_min,
               "squash": cpu.squash}  # fmt: skip
    args = tiny(module, tmp_path, module.__name__, init={"source": str(folder)})
    args = with_fields(args, policy={**TINY["policy"], **sampler}, algo={"time_reversed": False})
    trainer = Trainer(_algorithm(module, args), args)
    try:
        assert same_tensors(trainer.state.model.actor, policy)
    finally:
        trainer.folder.release()
        trainer.close()


def _algorithm(module, args):
    classes = {"trainers.fpo": fpo.Fpo, "trainers.fpo_pp": fpo_pp.FpoPlusPlus, "trainers.dppo": dppo.Dppo}
    return classes[module.__name__](args.algo)


def test_run_json_records_the_source_and_the_weights_hash(pretrained, tmp_path, capsys):
    folder, policy = pretrained
    gsb_mdpo.main([*TINY_FLAGS, "--init-from", str(folder), "--output-dir", str(tmp_path / "run")])
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["init"] == {"source": str(folder), "weights_sha256": weights_sha256(policy)}
    assert run["args"]["init"] == {"source": str(folder), "critic_warmup_steps": 0}
    # --resume refuses another starting point: it would be another experiment
    with pytest.raises(CliExit) as exit_:
        gsb_mdpo.main([*TINY_FLAGS, "--init-from", str(tmp_path / "other"), "--resume", "--output-dir",
                       str(tmp_path / "run")])  # fmt: skip
    assert exit_.value.code == 2 and "--init.source" in str(exit_.value)


def test_the_warmup_schedule_freezes_only_the_actor_for_its_updates():
    params = ActorCritic(jnp.ones(3), jnp.ones(2))
    grads = ActorCritic(jnp.ones(3), jnp.ones(2))
    optimizers = Optimizers.make(OptimArgs(actor_lr=0.1, critic_lr=0.1), 10, actor_frozen_updates=4)
    state = optimizers.init(params)
    for update in range(5):
        before = params
        params, state = optimizers.update(grads, state, params)
        assert np.array_equal(params.actor, before.actor) == (update < 4), update
        assert not np.array_equal(params.critic, before.critic)


def test_a_warmup_as_long_as_the_run_keeps_the_actor_exactly_as_it_was():
    """The fine-tuning suites' "pretrained only" column: the pretrained policy scored under the run's own
    protocol (with a cosine schedule, whose decay would otherwise span zero updates)."""
    params = ActorCritic(jnp.ones(3), jnp.ones(2))
    args = OptimArgs(actor_lr=0.1, critic_lr=0.1, actor_cosine_decay=True)
    optimizers = Optimizers.make(args, 6, actor_frozen_updates=6)
    state = optimizers.init(params)
    for _ in range(6):
        params, state = optimizers.update(ActorCritic(jnp.ones(3), jnp.ones(2)), state, params)
    assert np.array_equal(params.actor, jnp.ones(3)) and not np.array_equal(params.critic, jnp.ones(2))


def _gaussian_folder(tmp_path):
    from gsbpolicy import GaussianActor
    from gsbpolicy._gaussian import GaussianSpec

    spec = GaussianSpec(
        obs_dim=4, act_dim=1, action_low=(-3.0,), action_high=(3.0,), env_id="InvertedPendulum-v5"
    )
    folder = tmp_path / "gaussian"
    save_policy(GaussianActor(spec, key=jax.random.key(0)), folder)
    return folder


@pytest.mark.parametrize(
    "case",
    ["spec mismatch", "missing folder", "gaussian source", "gaussian_ppo", "genpo", "ppo", "warmup alone",
     "warmup too long", "negative warmup", "empty source", "another env of the same sizes"],
)  # fmt: skip
def test_bad_init_is_one_line(case, pretrained, tmp_path, capsys):
    folder = str(pretrained[0])
    main, argv, expected = gsb_mdpo.main, [*TINY_FLAGS, "--init-from", folder], ""
    if case == "spec mismatch":
        argv, expected = (
            [*argv, "--policy.width", "32"],
            "width (set by --policy.width): pretrained 16, this run 32",
        )
    elif case == "missing folder":
        argv, expected = [*TINY_FLAGS, "--init-from", str(tmp_path / "nope")], "cannot load it"
    elif case == "gaussian source":
        argv, expected = [*TINY_FLAGS, "--init-from", str(_gaussian_folder(tmp_path))], "a gaussian policy"
    elif case in ("gaussian_ppo", "genpo"):
        main = {"gaussian_ppo": gaussian_ppo.main, "genpo": genpo.main}[case]
        argv, expected = ["--total-steps", "1024", "--init-from", folder], "not a flow policy"
    elif case == "ppo":
        from trainers import ppo

        main, argv, expected = (
            ppo.main,
            ["--total-steps", "1024", "--init-from", folder],
            "ppo does not start",
        )
    elif case == "warmup alone":
        argv, expected = [*TINY_FLAGS, "--init.critic-warmup-steps", "64"], "0 without --init-from"
    elif case == "warmup too long":
        argv, expected = [*argv, "--init.critic-warmup-steps", "129"], "<= --total-steps (128"
    elif case == "negative warmup":
        argv, expected = [*argv, "--init.critic-warmup-steps", "-1"], ">= 0"
    elif case == "empty source":
        argv, expected = [*TINY_FLAGS, "--init-from", " "], "a policy folder or Hub id"
    elif case == "another env of the same sizes":  # its observations mean other things: the weights are wrong
        other = dataclasses.replace(pretrained[1].spec, env_id="InvertedPendulumTwin-v0")
        save_policy(make_policy(other, key=jax.random.key(0)), tmp_path / "twin")
        argv = [*TINY_FLAGS, "--init-from", str(tmp_path / "twin")]
        expected = (
            "env_id (set by --env): pretrained 'InvertedPendulumTwin-v0', this run 'InvertedPendulum-v5'"
        )
    with pytest.raises(CliExit) as exit_:
        main([*argv, "--output-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and expected in err, err
    assert err.count("\n") == 0 and err.startswith("error: ")
    assert not (tmp_path / "run" / "policy").exists()


def test_path_kl_is_the_summed_closed_form_kl_of_each_gaussian_step(pretrained):
    """KL(P_actor || P_ref) on the actor's own paths: sum_n dt ||f_actor - f_ref||^2 / (2 sigma_n^2), averaged
    over observations; zero against itself, and None for a noise-free sampler."""
    _, reference = pretrained
    actor = make_policy(reference.spec, key=jax.random.key(7)).with_normalizer(reference.normalizer)
    obs = jnp.asarray(np.random.default_rng(1).normal(size=(5, 4)), jnp.float32)
    key = jax.random.key(3)
    paths = jax.vmap(actor.sample)(obs, sample_noise(key, actor.spec, (5,)))
    _, ref_drifts = jax.vmap(reference.log_probs_and_drifts)(obs, paths.path)
    sigmas, n = np.asarray(actor.sigmas()), actor.spec.num_steps
    energy = np.sum((np.asarray(paths.drifts) - np.asarray(ref_drifts)) ** 2, -1)  # [5, N]
    by_hand = np.mean(np.sum((1 / n) / (2 * sigmas**2) * energy, -1))
    assert float(path_kl(actor, reference, obs, key)) == pytest.approx(by_hand, rel=1e-5)
    assert float(path_kl(actor, actor, obs, key)) == 0.0
    silent = dataclasses.replace(actor.spec, sigma_schedule="constant", sigma_max=0.0)
    ode = make_policy(silent, key=jax.random.key(0))
    assert path_kl(ode, ode, obs, key) is None


def test_the_path_kl_observations_are_spread_over_the_whole_batch():
    obs = jnp.arange(2 * 1000 * 3, dtype=jnp.float32).reshape(2, 1000, 3)
    picked = strided(obs, 256)
    assert picked.shape == (256, 3)
    rows = np.asarray(picked[:, 0]) // 3
    assert rows[0] == 0 and rows[-1] > 1000 and np.all(np.diff(rows) == 7)  # both sequences, evenly
    assert strided(obs[:, :10], 256).shape == (20, 3)  # a small batch whole
