"""GenPO: PPO on an invertible coupled flow with exact likelihoods (Ding et al. 2025), as in FlowRL.

The actor (`gsbpolicy.GenPOFlow`) maps x_0 ~ N(0, I_2d) to a doubled action x_N = (z, y) by N
coupled, mixed steps; the env gets z. The rollout stores the full x_N and log pi_old(x_N | s); the update
recomputes log pi_theta(x_N | s) exactly through the inverse flow (its log-determinant is the constant
2 d N log p, derived in gsbpolicy's `_coupling` module) and minimises

    L = -E[min(r A, clip(r, 1 +- eps) A)] + c_ent E[log pi_theta(x_N | s)] + c_comp E[sqrt(|z - y|^2 + 1e-8)]

with r = pi_theta / pi_old on the stored x_N, and the compress term on fresh forward samples, plus the
shared critic MSE. Run `python -m trainers.genpo --help`.
"""

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from gsbpolicy import GenPOFlow
from gsbpolicy._internal import make_genpo, prior_log_prob

from ._core.algorithm import AbstractAlgorithm
from ._core.api import loop_entry_points
from ._core.clipped_ratio import clipped_surrogate, ratio_metrics
from ._core.config import CriticArgs, OptimArgs, PolicyArgs, RolloutArgs, TrainArgs, require
from .presets import gym, playground, specialise, with_fields


@dataclasses.dataclass(frozen=True)
class GenPOArgs:
    """GenPO coefficients (paper Tables 1-2, GenPO column; FlowRL `GenPOConfig`)."""

    clip: float = 0.2
    """PPO clip epsilon of the likelihood ratio."""
    flow_mix: float = 0.9
    """p: mixing parameter of each coupled step, in (0, 1] (log|det| per step is 2 d log p)."""
    compress_coef: float = 0.01
    """Weight of the compress loss E sqrt(|z - y|^2 + 1e-8) on fresh forward samples (keeps z and y close)."""
    entropy_coef: float = 0.0
    """Weight of E[log pi_theta(x_N | s)] on the stored samples (FlowRL's entropy term). The flow's true
    entropy is a constant, so this term only pushes pi_theta away from pi_old (see `GenPO.actor_loss`)."""

    def validate(self) -> None:
        require(0 < self.flow_mix <= 1, "algo.flow_mix", "in (0, 1]", self.flow_mix)
        require(self.clip > 0, "algo.clip", "> 0 (the half-width of PPO's ratio interval)", self.clip)
        require(self.compress_coef >= 0, "algo.compress_coef", ">= 0", self.compress_coef)
        require(self.entropy_coef >= 0, "algo.entropy_coef", ">= 0 (a bonus)", self.entropy_coef)


@dataclasses.dataclass(frozen=True)
class Args(TrainArgs):
    algo: GenPOArgs = GenPOArgs()


class GenPOExtras(NamedTuple):
    """What the rollout stores per transition."""

    x1: jax.Array
    """The full doubled action x_N = (z, y) [2 * act_dim] (the env saw only z)."""
    log_prob: jax.Array
    """log pi_old(x_N | s) = log N(x_0) - 2 d N log p, exact."""


class GenPO(AbstractAlgorithm):
    name = "genpo"
    args: GenPOArgs

    def make_actor(self, spec, args, *, key) -> GenPOFlow:
        return make_genpo(spec, self.args.flow_mix, key=key)

    def act(self, actor: GenPOFlow, obs, key):
        x0 = jax.random.normal(key, (obs.shape[0], 2 * actor.spec.act_dim))
        x1 = jax.vmap(actor.forward)(obs, x0)
        log_prob = jax.vmap(prior_log_prob)(x0) - actor.log_det()
        return jax.vmap(actor.to_env)(x1), GenPOExtras(x1, log_prob)

    def actor_loss(self, actor: GenPOFlow, obs, extras: GenPOExtras, advantages, key):
        a = self.args
        log_prob = jax.vmap(actor.log_prob)(obs, extras.x1)
        log_ratio = log_prob - extras.log_prob
        ratio = jnp.exp(log_ratio)
        policy_loss = -jnp.mean(clipped_surrogate(ratio, advantages, a.clip))
        # Entropy term as FlowRL writes it: mean log pi_theta on the stored (old-policy) samples. Because
        # log|det| is constant, the entropy of pi_theta is the constant d (1 + log 2 pi) + 2 d N log p and its
        # gradient is exactly zero; E_old[log pi_theta] = -H(pi_old) - KL(pi_old || pi_theta), so minimising the
        # term maximises KL(pi_old || pi_theta): its gradient is zero in expectation at theta = theta_old
        # and pushes away from the rollout policy after the first step. The presets set its coefficient to 0 (Tables 1-2).
        entropy_loss = a.entropy_coef * jnp.mean(log_prob)
        d = actor.spec.act_dim
        if a.compress_coef > 0:  # fresh forward samples, as both references do
            fresh = jax.vmap(actor.forward)(obs, jax.random.normal(key, extras.x1.shape))
            gap = jnp.mean(jnp.sqrt(jnp.sum((fresh[:, :d] - fresh[:, d:]) ** 2, axis=-1) + 1e-8))
        else:
            gap = jnp.zeros(())
        loss = policy_loss + entropy_loss + a.compress_coef * gap
        metrics = {
            "policy_loss": policy_loss,
            **ratio_metrics(ratio, log_ratio, a.clip),
            "log_prob_mean": jnp.mean(log_prob),
            "compress_gap": gap,
            "stored_gap": jnp.mean(jnp.linalg.norm(extras.x1[:, :d] - extras.x1[:, d:], axis=-1)),
            "adv_mean": jnp.mean(advantages),
            "adv_std": jnp.std(advantages),
        }
        return loss, metrics


def playground_preset(env: str | None) -> Args:
    """Table 1, GenPO column (activation silu as the FPO pipeline's actors; learnable Fourier time features
    as FlowRL's GenPO, since fixed 2^k frequencies are meaningless at 32 dimensions; output scale 1)."""
    base = playground(env or "CartpoleSwingup")
    return specialise(
        Args,
        base,
        policy=PolicyArgs(
            num_steps=5,
            width=64,
            depth=3,
            activation="silu",
            time_embedding="fourier",
            time_embed_dim=32,
            output_scale=1.0,
            squash="tanh",
        ),
        critic=CriticArgs(width=256, depth=5, activation="silu"),
        optim=OptimArgs(actor_lr=3e-4, critic_lr=3e-4, value_coef=1.0, max_grad_norm=None),
        algo=GenPOArgs(clip=0.2, flow_mix=0.9, compress_coef=0.01, entropy_coef=0.0),
    )


def gym_preset(env: str | None) -> Args:
    """Table 2, GenPO column. Humanoid-v5 uses 6 minibatches of ~4096 transitions (the paper's memory
    footnote): our minibatches are whole 24-step sequences, so 1024 envs cannot split 6 ways; 1020 envs
    give 6 x 170 sequences = 6 x 4080 transitions, the closest geometry not above the paper's 4096."""
    env = env or "HalfCheetah-v5"
    base = gym(env)
    if env == "Humanoid-v5":
        base = with_fields(base, rollout={"num_envs": 1020, "num_minibatches": 6})
    return specialise(
        Args,
        base,
        policy=PolicyArgs(
            num_steps=16,
            width=256,
            depth=3,
            activation="silu",
            time_embedding="fourier",
            time_embed_dim=16,
            output_scale=0.25,
            squash="clip",
        ),
        critic=CriticArgs(width=256, depth=3, activation="elu"),
        optim=OptimArgs(actor_lr=1e-3, critic_lr=1e-3, max_grad_norm=1.0, value_coef=1.0),
        algo=GenPOArgs(clip=0.2, flow_mix=0.9, compress_coef=0.01, entropy_coef=0.0),
    )


def cpu_preset(env: str | None) -> Args:
    """Small and fast: learns InvertedPendulum-v5 on a 2-core CPU in a few minutes."""
    return with_fields(
        Args(env=env or "InvertedPendulum-v5", total_steps=150_000, preset="cpu"),
        rollout=dataclasses.asdict(RolloutArgs(num_envs=16, unroll_length=64, num_minibatches=4, epochs=8)),
        policy=dataclasses.asdict(PolicyArgs(num_steps=4, width=64, depth=2, output_scale=1.0)),
    )


PRESETS = {"cpu": cpu_preset, "playground": playground_preset, "gym": gym_preset}


train, main = loop_entry_points(GenPO, Args, PRESETS, __doc__)

if __name__ == "__main__":
    main()
