"""FPO: Flow Policy Optimization (McAllister et al. 2025; the official FPO code's Playground and Gym trainers).

The likelihood ratio of PPO is replaced by a conditional flow-matching (CFM) surrogate. At rollout each
transition stores its pre-squash action a and N_mc pairs (eps_i, t_i) with their CFM losses l_i under the
rollout policy; the update recomputes them under the current policy and maximises

    rho = exp(mean_i l_i^old - mean_i l_i^new),    L = -E[min(rho A, clip(rho, 1 +- eps) A)]

plus the shared critic MSE (no entropy term).

Time convention. gsbpolicy runs generation time t from noise (t = 0) to action (t = 1); the FPO reference
runs tau = 1 - t from noise (tau = 1) to action (tau = 0) and its network outputs the velocity
v_hat = eps - a of x_tau = tau eps + (1 - tau) a. The mapping used here is exact:
  * interpolant: x_tau = (1 - t) eps + t a, the same point;
  * network: our drift is f(a, t) = -v_hat(a, 1 - t). With `time_reversed` the network is fed 1 - t, so
    its time features are the reference's emb(tau); the sign is absorbed by the last layer (its init is
    symmetric and Adam is sign-equivariant, so training is the same in distribution);
  * sampler: the reference's Euler step x <- x - 0.1 v_hat(x, tau_k), tau_k = 1 - k/10, is our
    a <- a + dt f(a, t_k), t_k = k/10: the same iterates, a^(0) ~ N(0, I), no diffusion noise (sigma = 0);
  * "u_but_supervise_as_eps" loss: eps_hat = x_tau + (1 - tau) v_hat = x_t - t f(x_t, t), and
    l = mean_dims (eps - eps_hat)^2. FlowRL's "eps" mode (t = 0 noise, like us) is the same formula;
  * t on the discrete sampling grid: tau_i in {1.0, ..., 0.1} is t_i = k/N, k ~ U{0..N-1}, as in FlowRL.
Run `python -m trainers.fpo --help`.
"""

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from gsbpolicy import FlowPolicy, PolicySpec, make_policy
from gsbpolicy._internal import sample_noise

from ._core.algorithm import AbstractAlgorithm
from ._core.api import loop_entry_points
from ._core.clipped_ratio import clipped_surrogate, ratio_metrics
from ._core.config import CriticArgs, OptimArgs, PolicyArgs, RolloutArgs, TrainArgs, require
from .presets import gym, playground, specialise, with_fields


@dataclasses.dataclass(frozen=True)
class FpoArgs:
    """FPO coefficients and sampler options (Tables 1-2, FPO column)."""

    num_samples: int = 8
    """N_mc: (eps, t) pairs per transition, drawn and stored at rollout."""
    clip: float = 0.05
    """PPO clip epsilon of the CFM ratio."""
    additive_noise: float = 0.0
    """Std of Gaussian noise added to the sampled action at rollout (FlowRL's `additive_noise`); the noisy
    action is what the env receives (after the squash) and what the CFM loss fits."""
    positive_advantages_only: bool = False
    """Clip normalized advantages at 0 before the surrogate (FlowRL's FPO divergence fix)."""
    time_reversed: bool = False
    """Feed the network 1 - t, the FPO reference's time (sets `PolicySpec.time_reversed`)."""
    clip_iterates: bool = False
    """Clip every Euler iterate to [-1, 1] (FlowRL's `clip_sampler`; sets `PolicySpec.clip_iterates`)."""

    def validate(self) -> None:
        require(self.num_samples >= 1, "algo.num_samples", ">= 1", self.num_samples)
        require(self.clip > 0, "algo.clip", "> 0 (the half-width of PPO's ratio interval)", self.clip)
        require(
            self.additive_noise >= 0,
            "algo.additive_noise",
            ">= 0 (a standard deviation)",
            self.additive_noise,
        )


@dataclasses.dataclass(frozen=True)
class Args(TrainArgs):
    policy: PolicyArgs = PolicyArgs(num_steps=10, sigma_schedule="constant", sigma_max=0.0)
    algo: FpoArgs = FpoArgs()


class CfmExtras(NamedTuple):
    """What the rollout stores per transition."""

    action: jax.Array
    """Pre-squash action a [act_dim] (with the additive noise, if any)."""
    eps: jax.Array
    """eps_i [N_mc, act_dim]."""
    t: jax.Array
    """t_i [N_mc] on the grid {0, 1/N, ..., (N-1)/N}."""
    cfm_losses: jax.Array
    """l_i^old [N_mc] under the rollout policy."""


def cfm_losses(actor: FlowPolicy, obs, action, eps, t):
    """l_i = mean_dims (eps_i - eps_hat_i)^2, eps_hat = x_t - t f(x_t, t), x_t = (1 - t) eps + t a (one obs)."""
    x_t = (1.0 - t[:, None]) * eps + t[:, None] * action[None, :]
    drift = jax.vmap(actor.drift, in_axes=(None, 0, 0))(obs, x_t, t)
    eps_hat = x_t - t[:, None] * drift
    return jnp.mean((eps - eps_hat) ** 2, axis=-1)


class Fpo(AbstractAlgorithm):
    name = "fpo"
    args: FpoArgs

    def make_actor(self, spec: PolicySpec, args: TrainArgs, *, key) -> FlowPolicy:
        a = self.args
        spec = dataclasses.replace(spec, time_reversed=a.time_reversed, clip_iterates=a.clip_iterates)
        return make_policy(spec, key=key)

    def act(self, actor: FlowPolicy, obs, key):
        spec, a = actor.spec, self.args
        batch = obs.shape[0]
        k_noise, k_add, k_eps, k_t = jax.random.split(key, 4)
        action = jax.vmap(actor.sample_final)(obs, sample_noise(k_noise, spec, (batch,)))
        if a.additive_noise > 0:
            action = action + a.additive_noise * jax.random.normal(k_add, action.shape)
        eps = jax.random.normal(k_eps, (batch, a.num_samples, spec.act_dim))
        t = jax.random.randint(k_t, (batch, a.num_samples), 0, spec.num_steps) / spec.num_steps
        old = jax.vmap(cfm_losses, in_axes=(None, 0, 0, 0, 0))(actor, obs, action, eps, t)
        return jax.vmap(actor.to_env)(action), CfmExtras(action, eps, t, old)

    def actor_loss(self, actor: FlowPolicy, obs, extras: CfmExtras, advantages, key):
        a = self.args
        new = jax.vmap(cfm_losses, in_axes=(None, 0, 0, 0, 0))(
            actor, obs, extras.action, extras.eps, extras.t
        )
        log_ratio = jnp.mean(extras.cfm_losses, axis=-1) - jnp.mean(new, axis=-1)  # average, then exp
        ratio = jnp.exp(log_ratio)
        if a.positive_advantages_only:
            advantages = jnp.maximum(advantages, 0.0)
        loss = -jnp.mean(clipped_surrogate(ratio, advantages, a.clip))
        metrics = {
            "cfm_loss": jnp.mean(new),
            **ratio_metrics(ratio, log_ratio, a.clip),
            "adv_mean": jnp.mean(advantages),
        }
        return loss, metrics


def playground_preset(env: str | None) -> Args:
    """Table 1, FPO column = the official FPO Playground defaults (its Playground trainer's config)."""
    base = playground(env or "CartpoleSwingup")
    return specialise(
        Args,
        base,
        policy=PolicyArgs(
            num_steps=10,
            width=32,
            depth=4,
            activation="silu",
            time_embedding="sinusoidal",
            time_embed_dim=8,
            output_scale=0.25,
            sigma_schedule="constant",
            sigma_max=0.0,
            squash="tanh",
        ),
        critic=CriticArgs(width=256, depth=5, activation="silu"),
        # One Adam over actor and critic in the reference; two with equal rates and no clipping are the same.
        optim=OptimArgs(actor_lr=3e-4, critic_lr=3e-4, value_coef=0.25, max_grad_norm=None),
        algo=FpoArgs(num_samples=8, clip=0.05, time_reversed=True),
    )


def gym_preset(env: str | None) -> Args:
    """Table 2, FPO column: FlowRL's FPO sampler (per-iterate clip, additive noise) with the FPO paper's
    surrogate over both advantage signs. FlowRL keeps only positive advantages (its divergence fix); that
    form is `--algo.positive-advantages-only` (the `fpo:flowrl` column of the cpu-gym suite): the published
    method is the default, so the paper's FPO column is not weakened by one implementation's choice."""
    base = gym(env or "HalfCheetah-v5")
    return specialise(
        Args,
        base,
        policy=PolicyArgs(
            num_steps=10,
            width=256,
            depth=3,
            activation="silu",
            time_embedding="fourier",
            time_embed_dim=16,
            output_scale=0.25,
            sigma_schedule="constant",
            sigma_max=0.0,
            squash="clip",
        ),
        critic=CriticArgs(width=256, depth=3, activation="elu"),
        optim=OptimArgs(actor_lr=1e-4, critic_lr=1e-3, max_grad_norm=1.0, value_coef=1.0),
        algo=FpoArgs(num_samples=8, clip=0.05, additive_noise=0.1, clip_iterates=True),
    )


def cpu_preset(env: str | None) -> Args:
    """Small and fast for InvertedPendulum-v5 on a 2-core CPU (the playground sampler and loss)."""
    return with_fields(
        Args(
            env=env or "InvertedPendulum-v5",
            total_steps=150_000,
            preset="cpu",
            algo=FpoArgs(time_reversed=True),
        ),
        rollout=dataclasses.asdict(RolloutArgs(num_envs=16, unroll_length=64, num_minibatches=4, epochs=8)),
        policy={"squash": "tanh"},
    )


PRESETS = {"cpu": cpu_preset, "playground": playground_preset, "gym": gym_preset}


train, main = loop_entry_points(Fpo, Args, PRESETS, __doc__)

if __name__ == "__main__":
    main()
