"""GenPO: the coupled flow's exact inverse and likelihood (log-det against autodiff Jacobians, density against
samples and quadrature), the loss, save/load, presets and an end-to-end run."""

import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsbpolicy import GSBPolicy, PolicySpec, evaluate, load_policy, save_policy
from gsbpolicy._coupling import make_genpo
from gsbpolicy._sde import prior_log_prob
from trainers._core.loop import Trainer
from trainers.genpo import GenPO, GenPOArgs, cpu_preset, gym_preset, playground_preset
from trainers.presets import with_fields


def flow(act_dim, num_steps, mix, seed=0, output_scale=2.0):
    """A small flow with non-trivial observation statistics and a strongly non-linear velocity."""
    bounds = (-1.0,) * act_dim, (1.0,) * act_dim
    spec = PolicySpec(obs_dim=3, act_dim=act_dim, num_steps=num_steps, width=16, depth=2, output_scale=output_scale,
                      time_embedding="fourier", time_embed_dim=8, action_low=bounds[0], action_high=bounds[1])  # fmt: skip
    actor = make_genpo(spec, mix, key=jax.random.key(seed))
    stats = np.random.default_rng(seed).normal(1.0, 2.0, (32, 3)).astype(np.float32)
    return eqx.tree_at(lambda a: a.normalizer, actor, actor.normalizer.update(stats))


CASES = [(1, 1, 0.9), (3, 5, 0.7), (6, 16, 0.9)]  # one step; a small case; HalfCheetah at the gym preset


@pytest.mark.strict_promotion
@pytest.mark.parametrize(("act_dim", "num_steps", "mix"), CASES)
def test_inverse_is_exact_and_log_det_equals_slogdet_of_the_autodiff_jacobian(act_dim, num_steps, mix):
    actor = flow(act_dim, num_steps, mix)
    obs = jax.random.normal(jax.random.key(1), (4, 3))
    x0 = jax.random.normal(jax.random.key(2), (4, 2 * act_dim))

    @eqx.filter_jit
    def everything(actor, obs, x0):
        # The whole N-step map's 2d x 2d Jacobian by forward-mode autodiff, per sample (the references'
        # jacrev + slogdet), to compare with the closed form 2 d N log p.
        x1 = jax.vmap(actor.forward)(obs, x0)
        forward = jnp.linalg.slogdet(jax.vmap(jax.jacfwd(actor.forward, argnums=1))(obs, x0))
        inverse = jnp.linalg.slogdet(jax.vmap(jax.jacfwd(actor.inverse, argnums=1))(obs, x1))
        return x1, jax.vmap(actor.inverse)(obs, x1), forward, inverse[1], jax.vmap(actor.log_prob)(obs, x1)

    x1, x0_again, (sign, forward_logdet), inverse_logdet, log_prob = everything(actor, obs, x0)
    np.testing.assert_allclose(x0_again, x0, atol=1e-5)
    expected = 2 * act_dim * num_steps * np.log(mix)
    assert float(actor.log_det()) == pytest.approx(expected, abs=1e-5)
    assert np.all(np.asarray(sign) == 1.0)
    np.testing.assert_allclose(forward_logdet, expected, atol=2e-4)
    np.testing.assert_allclose(inverse_logdet, -expected, atol=2e-4)
    # The reference's likelihood, log N(x0) - slogdet(J), equals ours through the inverse.
    reference = jax.vmap(prior_log_prob)(x0) - forward_logdet
    np.testing.assert_allclose(log_prob, reference, atol=5e-4)


@pytest.fixture(scope="module")
def one_d():
    """A 1-D action flow (x in R^2), an observation, and its exact density on a fine grid."""
    actor, obs = flow(1, 5, 0.9, seed=3), jnp.array([0.5, -1.0, 2.0])
    h = 0.05
    axis = np.arange(-7.0, 7.0, h, dtype=np.float32) + h / 2
    grid = np.stack(np.meshgrid(axis, axis, indexing="ij"), -1).reshape(-1, 2)
    density = jnp.exp(jax.jit(jax.vmap(actor.log_prob, in_axes=(None, 0)))(obs, grid)).reshape(len(axis), -1)
    return actor, obs, axis, h, np.asarray(density)


def test_one_d_density_integrates_to_one_and_matches_a_sample_histogram(one_d):
    actor, obs, axis, h, density = one_d
    assert density.sum() * h * h == pytest.approx(1.0, abs=2e-3)  # numerical normalisation of exp(log pi)
    n = 400_000
    x1 = np.asarray(
        jax.jit(jax.vmap(actor.forward, in_axes=(None, 0)))(obs, jax.random.normal(jax.random.key(4), (n, 2)))
    )
    # Bins of 0.25 = 5 x 5 grid cells; compare the empirical density with the exact one averaged over the bin.
    edges = np.arange(-7.0, 7.0 + 1e-6, 0.25)
    counts, _, _ = np.histogram2d(x1[:, 0], x1[:, 1], bins=[edges, edges])
    exact = density.reshape(len(edges) - 1, 5, len(edges) - 1, 5).mean(axis=(1, 3))
    busy = counts >= 1000
    assert busy.sum() >= 20 and (exact[busy] * 0.0625 * n).sum() > 0.5 * n
    empirical = counts[busy] / (n * 0.0625)
    np.testing.assert_allclose(empirical, exact[busy], rtol=0.12)
    assert np.abs(empirical / exact[busy] - 1).mean() < 0.04


def test_true_entropy_gradient_is_zero_but_the_stored_sample_term_is_not():
    actor = flow(1, 3, 0.9)
    obs = jax.random.normal(jax.random.key(5), (8, 3))
    x0 = jax.random.normal(jax.random.key(6), (8, 2))
    params, static = eqx.partition(actor, eqx.is_inexact_array)

    def fresh(p):  # E[log pi(f(x0))] on reparameterised fresh samples = -H(pi): constant in theta
        a = eqx.combine(p, static)
        return jnp.mean(jax.vmap(lambda o, x: a.log_prob(o, a.forward(o, x)))(obs, x0))

    stored = jax.vmap(actor.forward)(obs, x0)

    def on_stored(p):  # FlowRL's entropy term: log pi_theta on fixed (stored) samples
        return jnp.mean(jax.vmap(eqx.combine(p, static).log_prob)(obs, stored))

    fresh_grad, stored_grad = jax.jit(
        lambda p: (jax.grad(fresh)(p).velocity, jax.grad(on_stored)(p).velocity)
    )(params)
    assert max(float(jnp.abs(g).max()) for g in jax.tree.leaves(fresh_grad)) < 1e-4
    assert max(float(jnp.abs(g).max()) for g in jax.tree.leaves(stored_grad)) > 1e-3


def test_loss_at_the_rollout_policy_is_the_plain_surrogate_plus_compress():
    actor = flow(2, 2, 0.9)
    algo = GenPO(GenPOArgs(clip=0.2, compress_coef=0.5, entropy_coef=0.1))
    obs = jax.random.normal(jax.random.key(7), (16, 3))
    actions, extras = eqx.filter_jit(algo.act)(actor, obs, jax.random.key(8))
    assert actions.shape == (16, 2) and extras.x1.shape == (16, 4) and bool(jnp.all(jnp.abs(actions) <= 1))
    np.testing.assert_allclose(actions, jnp.tanh(extras.x1[:, :2]), atol=1e-6)  # the env action is z
    advantages = jax.random.normal(jax.random.key(9), (16,))
    loss, m = eqx.filter_jit(algo.actor_loss)(actor, obs, extras, advantages, jax.random.key(10))
    assert float(m["ratio_mean"]) == pytest.approx(1.0, abs=1e-4) and float(m["clip_frac"]) == 0.0
    expected = (
        -float(advantages.mean()) + 0.1 * float(extras.log_prob.mean()) + 0.5 * float(m["compress_gap"])
    )
    assert float(loss) == pytest.approx(expected, abs=1e-4)
    # Shifted old log-probs (not centred, so the k3 KL's sign shows): the clipped surrogate, by hand.
    shifted = extras._replace(log_prob=extras.log_prob + jnp.linspace(-0.5, 0.3, 16))
    plain = GenPO(GenPOArgs(clip=0.2, compress_coef=0.0))
    _, m2 = eqx.filter_jit(plain.actor_loss)(actor, obs, shifted, advantages, None)
    ratio = np.exp(-np.linspace(-0.5, 0.3, 16))
    surrogate = np.minimum(ratio * advantages, np.clip(ratio, 0.8, 1.2) * advantages)
    assert float(m2["policy_loss"]) == pytest.approx(-surrogate.mean(), rel=1e-3)
    assert float(m2["clip_frac"]) == pytest.approx(np.mean(np.abs(ratio - 1) > 0.2))
    assert float(m2["ratio_max"]) == pytest.approx(ratio.max(), rel=1e-3)
    log_ratio = -np.linspace(-0.5, 0.3, 16)
    assert float(m2["approx_kl"]) == pytest.approx(np.mean(np.expm1(log_ratio) - log_ratio), rel=1e-2)
    assert float(m2["log_prob_mean"]) == pytest.approx(float(extras.log_prob.mean()), abs=1e-4)
    assert float(m2["compress_gap"]) == 0.0  # no fresh samples without the compress loss
    x1 = np.asarray(extras.x1, np.float64)
    assert float(m2["stored_gap"]) == pytest.approx(
        np.linalg.norm(x1[:, :2] - x1[:, 2:], axis=-1).mean(), rel=1e-5
    )
    assert float(m2["adv_mean"]) == pytest.approx(float(advantages.mean()), rel=1e-5, abs=1e-7)
    assert float(m2["adv_std"]) == pytest.approx(float(advantages.std()), rel=1e-5)
    # The compress gap: E sqrt(|z - y|^2 + 1e-8) on fresh forward samples of the loss key.
    fresh = np.asarray(
        jax.vmap(actor.forward)(obs, jax.random.normal(jax.random.key(10), (16, 4))), np.float64
    )
    gap = np.sqrt(((fresh[:, :2] - fresh[:, 2:]) ** 2).sum(-1) + 1e-8).mean()
    assert float(m["compress_gap"]) == pytest.approx(gap, rel=1e-4)
    assert float(m["policy_loss"]) == pytest.approx(-float(advantages.mean()), abs=1e-4)


def test_save_load_round_trip_and_clear_errors(tmp_path):
    actor = flow(2, 3, 0.8)
    save_policy(actor, tmp_path / "policy")
    loaded = load_policy(tmp_path / "policy")
    assert loaded.mix == 0.8 and loaded.spec == actor.spec
    leaves = [jax.tree.leaves(eqx.filter(m, eqx.is_array)) for m in (actor, loaded)]
    for a, b in zip(*leaves, strict=True):
        np.testing.assert_array_equal(a, b)
    assert GSBPolicy.from_pretrained(tmp_path / "policy").kind == "genpo"
    with pytest.raises(FileNotFoundError):
        load_policy(tmp_path / "missing")
    with pytest.raises(ValueError, match=r"p must be in \(0, 1\]"):
        make_genpo(actor.spec, 0.0, key=jax.random.key(0))


def test_make_genpo_builds_each_part_from_its_spec_and_takes_every_mix_in_0_1():
    """The velocity net and the normaliser take their own spec fields (none left at a default that happens
    to match); p = 1 (no mixing) is allowed, 0 and values above 1 are not."""
    from gsbpolicy._networks import ACTIVATIONS, FourierEmbedding

    spec = PolicySpec(obs_dim=3, act_dim=2, num_steps=4, width=12, depth=3, activation="tanh",
                      time_embedding="fourier", time_embed_dim=6, output_scale=0.7, obs_clip=4.0, obs_eps=1e-3,
                      action_low=(-1.0, -1.0), action_high=(1.0, 1.0))  # fmt: skip
    actor = make_genpo(spec, 1.0, key=jax.random.key(0))
    net = actor.velocity
    assert (
        actor.mix == 1.0 and isinstance(net.embedding, FourierEmbedding) and net.embedding.freqs.shape == (3,)
    )
    assert (net.mlp.in_size, net.mlp.out_size, net.mlp.width_size, net.mlp.depth) == (3 + 2 + 6, 2, 12, 3)
    assert net.mlp.activation is ACTIVATIONS["tanh"] and net.output_scale == 0.7
    assert (actor.normalizer.mean.shape, actor.normalizer.clip, actor.normalizer.eps) == ((3,), 4.0, 1e-3)
    for bad in (0.0, -0.5, 1.5):
        with pytest.raises(ValueError, match=r"p must be in \(0, 1\]"):
            make_genpo(spec, bad, key=jax.random.key(0))


def test_presets_follow_the_paper_tables():
    pg = playground_preset("CheetahRun")
    assert (pg.policy.num_steps, pg.policy.time_embed_dim, pg.policy.width, pg.policy.depth) == (5, 32, 64, 3)
    assert (pg.algo.flow_mix, pg.algo.compress_coef, pg.algo.clip, pg.algo.entropy_coef) == (
        0.9,
        0.01,
        0.2,
        0.0,
    )
    assert (pg.optim.actor_lr, pg.optim.critic_lr, pg.optim.value_coef) == (3e-4, 3e-4, 1.0)
    assert (pg.critic.width, pg.critic.depth, pg.rollout.num_envs, pg.rollout.epochs) == (256, 5, 2048, 16)
    gy = gym_preset("HalfCheetah-v5")
    assert (gy.policy.num_steps, gy.policy.time_embed_dim, gy.policy.output_scale, gy.policy.activation) == (
        16, 16, 0.25, "silu")  # fmt: skip
    assert (gy.optim.actor_lr, gy.optim.critic_lr, gy.optim.max_grad_norm, gy.critic.activation) == (
        1e-3, 1e-3, 1.0, "elu")  # fmt: skip
    assert gy.rollout.batch_size * gy.rollout.unroll_length == 6144 and gy.rollout.num_minibatches == 4
    hum = gym_preset("Humanoid-v5")
    assert hum.rollout.num_minibatches == 6 and hum.rollout.batch_size * hum.rollout.unroll_length == 4080
    with pytest.raises(ValueError, match="flow-mix"):
        with_fields(gy, algo={"flow_mix": 1.5}).validate()


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    args = with_fields(
        cpu_preset("InvertedPendulum-v5"),
        total_steps=4 * 64,
        output_dir=tmp_path_factory.mktemp("runs") / "genpo",
        rollout={"num_envs": 4, "unroll_length": 16, "num_minibatches": 2, "epochs": 2},
        policy={"num_steps": 3, "width": 16, "depth": 1},
        critic={"width": 16, "depth": 1},
        eval={"num_evals": 2, "episodes": 2, "final_episodes": 2},
        log={"checkpoint_every": 2, "progress": False},
    )  # fmt: skip
    return args, Trainer(GenPO(args.algo), args).run()


def test_trainer_writes_its_run_folder_and_a_loadable_policy(tiny_run):
    args, policy_dir = tiny_run
    run = json.loads((args.output_dir / "run.json").read_text())
    assert run["algo"] == "genpo" and run["args"]["algo"]["flow_mix"] == 0.9
    lines = [json.loads(line) for line in (args.output_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["type"] for r in lines].count("train") == 4 and [r["type"] for r in lines].count("eval") == 2
    assert {"train/clip_frac", "train/approx_kl", "train/compress_gap", "train/value_loss"} <= set(lines[0])
    results = json.loads((policy_dir / "results.json").read_text())
    assert results["algo"] == "genpo" and results["n_episodes"] == 2 and results["env_steps"] == 4 * 64
    policy = GSBPolicy.from_pretrained(policy_dir)
    obs = np.linspace(-0.1, 0.1, 4, dtype=np.float32)
    action, _ = policy.predict(obs, deterministic=True)
    assert action.shape == (1,) and abs(float(action[0])) <= 3.0
    assert float(action[0]) == pytest.approx(float(policy.policy.act(jnp.asarray(obs))[0]), abs=1e-6)
    result = evaluate(policy, "InvertedPendulum-v5", n_episodes=2, seed=0)
    assert result.n_episodes == 2 and result.mean > 0
