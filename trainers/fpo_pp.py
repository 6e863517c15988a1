"""FPO++: flow policy gradients for robot control (Yi, Choi et al. 2026, arXiv 2602.02481), a reference column.

FPO++ keeps FPO's conditional flow-matching (CFM) surrogate of the likelihood ratio (trainers/fpo.py: N_mc pairs
(eps_i, t_i) drawn and stored at rollout with their losses under the rollout policy) and changes three things:

(a) a per-sample ratio, one per (eps_i, t_i) draw instead of one per action (the paper's eq. 10), on the
    velocity form of the CFM loss (eq. 8; FPO++'s code divides the sum over the d action dimensions by sqrt(d)):

        rho_i = exp(l_i^old - l_i^new),    l_i = ||f(x_i, t_i, s) - (a - eps_i)||^2 / sqrt(d),
        x_i = (1 - t_i) eps_i + t_i a;

(b) the ASPO trust region (eqs. 11-13): PPO's clipped surrogate where the advantage is non-negative, SPO's
    quadratic penalty where it is negative, averaged over the batch and the draws,

        psi(rho, A) = min(rho A, clip(rho, 1 +- eps) A)           A >= 0
        psi(rho, A) = rho A - |A| / (2 eps) (rho - 1)^2           A < 0
        L = -mean_{b, i} psi(rho_i, A_b);

    for a negative advantage PPO leaves a ratio above 1 + eps unclipped (a gradient that grows with the ratio),
    while SPO's objective peaks at rho = 1 - eps and pulls the ratio back to it from either side;
(c) zero-noise evaluation, the flow integrated from a^(0) = 0: the shared deterministic policy of every flow
    column here, so nothing to add.

FPO++'s code also bounds the quantities it exponentiates, and so does this file (`FppArgs`): both CFM losses
at 20, the current one at 20 again where A < 0, the log-ratio at 10 from above with a straight-through gradient
(the bounded value forward, the identity's gradient backward), advantages at +-100; its t_i are drawn as
0.005 + 0.99 (1 - u)^(1/beta), u ~ U[0, 1) (uniform on [0.005, 0.995] with its beta = 1). The time convention
is FPO's and this package's (t = 0 noise, t = 1 action, as in FlowRL); with `time_reversed` the network is fed
1 - t as in FPO's Playground trainer, which changes no formula above.

Departures from FPO++'s code (FlowRL's reimplementation after its June 2026 refactor, which follows the authors'
code): the evaluated, saved and published policy is the trained actor, not an exponential moving average of it
(decay 0.95 after 500 warm-up updates; the shared loop keeps no second actor); the optimizers are the shared
Adam (betas 0.9, 0.999, no weight decay) instead of AdamW with weight decay 1e-4; advantages are standardised
per minibatch (the shared core) instead of once per rollout. The presets say which values are whose.
Run `python -m trainers.fpo_pp --help`.
"""

import dataclasses
from typing import Literal

import jax
import jax.numpy as jnp

from gsbpolicy import FlowPolicy
from gsbpolicy._internal import sample_noise

from . import fpo
from ._core.api import loop_entry_points
from ._core.clipped_ratio import clipped_surrogate, ratio_metrics
from ._core.config import CriticArgs, OptimArgs, PolicyArgs, require
from .fpo import CfmExtras
from .presets import gym, specialise

T_LOW, T_SPAN = 0.005, 0.99
"""FPO++'s draws of t_i lie in [0.005, 0.995]: the loss is kept off both ends of the flow."""


@dataclasses.dataclass(frozen=True)
class FppArgs:
    """FPO++'s objective (its code's defaults) and the sampler options it shares with FPO (off by default)."""

    num_samples: int = 16
    """N_mc: (eps, t) pairs per transition, drawn and stored at rollout; each gets its own ratio."""
    clip: float = 0.05
    """eps of the trust region: PPO's clip half-width for A >= 0, SPO's penalty weight |A| / (2 eps) for A < 0."""
    trust_region: Literal["aspo", "ppo", "spo"] = "aspo"
    """ASPO (PPO for A >= 0, SPO for A < 0; FPO++), or PPO's or SPO's surrogate for every sample (ablations)."""
    loss_reduction: Literal["mean", "sum", "sqrt"] = "sqrt"
    """How a draw's squared velocity error is reduced over the d action dimensions: mean, sum, or sum / sqrt(d)."""
    time_beta: float = 1.0
    """beta of the draws t = 0.005 + 0.99 (1 - u)^(1/beta), u ~ U[0, 1): 1 is uniform, above 1 favours t near
    the action."""
    loss_clamp: float | None = 20.0
    """Upper bound of the stored and the current CFM loss of each draw (None: unbounded)."""
    negative_advantage_loss_clamp: float | None = 20.0
    """Upper bound of the current CFM loss where A < 0, so that pushing an action away saturates (None: off)."""
    log_ratio_clamp: float | None = 10.0
    """Upper bound of each log-ratio, with a straight-through gradient (None: unbounded)."""
    advantage_clamp: float | None = 100.0
    """Advantages (after standardisation) are clipped to +- this (None: not clipped)."""
    additive_noise: float = 0.0
    """Std of Gaussian noise added to the sampled action at rollout (FPO++'s action perturbation); the noisy action
    is what the env receives (after the squash) and what the CFM loss fits."""
    action_clip: float | None = None
    """Clip the (noisy) pre-squash action to +- this before it is stored and sent (FPO++'s action clip)."""
    time_reversed: bool = False
    """Feed the network 1 - t, the FPO reference's time (sets `PolicySpec.time_reversed`)."""
    clip_iterates: bool = False
    """Clip every Euler iterate to [-1, 1] (FlowRL's `clip_sampler`; sets `PolicySpec.clip_iterates`)."""

    def validate(self) -> None:
        require(self.num_samples >= 1, "algo.num_samples", ">= 1", self.num_samples)
        require(self.clip > 0, "algo.clip", "> 0 (the half-width of the trust region)", self.clip)
        require(self.time_beta > 0, "algo.time_beta", "> 0", self.time_beta)
        bounds = ("loss_clamp", "negative_advantage_loss_clamp", "log_ratio_clamp", "advantage_clamp")
        for name in (*bounds, "action_clip"):
            value = getattr(self, name)
            require(value is None or value > 0, f"algo.{name}", "> 0 (or None: off)", value)
        require(
            self.additive_noise >= 0,
            "algo.additive_noise",
            ">= 0 (a standard deviation)",
            self.additive_noise,
        )


@dataclasses.dataclass(frozen=True)
class Args(fpo.Args):
    """FPO's configuration (its noise-free flow policy) with FPO++'s algorithm group."""

    algo: FppArgs = FppArgs()


def velocity_losses(actor: FlowPolicy, obs, action, eps, t, reduction: str):
    """l_i = reduce_dims (f(x_i, t_i) - (a - eps_i))^2 at x_i = (1 - t_i) eps_i + t_i a (eq. 8, FPO++'s "u" output
    mode): one observation, its action and its N_mc draws."""
    x_t = (1.0 - t[:, None]) * eps + t[:, None] * action[None, :]
    drift = jax.vmap(actor.drift, in_axes=(None, 0, 0))(obs, x_t, t)
    squared = jnp.sum((drift - (action[None, :] - eps)) ** 2, axis=-1)
    dims = action.shape[-1]
    return squared / {"mean": dims, "sum": 1.0, "sqrt": dims**0.5}[reduction]


def clamp_straight_through(x, high: float):
    """min(x, high) forward, the identity's gradient backward: a draw past the bound keeps its gradient, scaled by
    the bounded ratio."""
    return x + jax.lax.stop_gradient(jnp.minimum(x, high) - x)


def trust_region_objective(ratio, advantages, clip: float, mode: str):
    """psi(rho, A) per sample: PPO's clipped surrogate (eq. 1), SPO's penalised one (eq. 11) or ASPO (eq. 12)."""
    ppo = clipped_surrogate(ratio, advantages, clip)
    spo = ratio * advantages - jnp.abs(advantages) / (2.0 * clip) * (ratio - 1.0) ** 2
    if mode == "ppo":
        return ppo
    if mode == "spo":
        return spo
    return jnp.where(advantages >= 0, ppo, spo)


class FpoPlusPlus(fpo.Fpo):
    """FPO's actor (its flow policy and sampler options) with FPO++'s draws, ratio and trust region."""

    name = "fpo_pp"
    args: FppArgs

    def _losses(self, actor: FlowPolicy, obs, action, eps, t):
        """l_i for a batch [B, N_mc]."""
        losses = jax.vmap(velocity_losses, in_axes=(None, 0, 0, 0, 0, None))
        return losses(actor, obs, action, eps, t, self.args.loss_reduction)

    def act(self, actor: FlowPolicy, obs, key):
        spec, a = actor.spec, self.args
        batch = obs.shape[0]
        k_noise, k_add, k_eps, k_t = jax.random.split(key, 4)
        action = jax.vmap(actor.sample_final)(obs, sample_noise(k_noise, spec, (batch,)))
        if a.additive_noise > 0:
            action = action + a.additive_noise * jax.random.normal(k_add, action.shape)
        if a.action_clip is not None:
            action = jnp.clip(action, -a.action_clip, a.action_clip)
        eps = jax.random.normal(k_eps, (batch, a.num_samples, spec.act_dim))
        u = jax.random.uniform(k_t, (batch, a.num_samples))
        t = T_LOW + T_SPAN * (1.0 - u) ** (1.0 / a.time_beta)
        old = self._losses(actor, obs, action, eps, t)
        return jax.vmap(actor.to_env)(action), CfmExtras(action, eps, t, old)

    def actor_loss(self, actor: FlowPolicy, obs, extras: CfmExtras, advantages, key):
        a = self.args
        if a.advantage_clamp is not None:
            advantages = jnp.clip(advantages, -a.advantage_clamp, a.advantage_clamp)
        old = extras.cfm_losses  # [B, N_mc]
        new = self._losses(actor, obs, extras.action, extras.eps, extras.t)
        if a.loss_clamp is not None:
            old, new = jnp.minimum(old, a.loss_clamp), jnp.minimum(new, a.loss_clamp)
        if a.negative_advantage_loss_clamp is not None:
            bounded = jnp.minimum(new, a.negative_advantage_loss_clamp)
            new = jnp.where(advantages[:, None] < 0, bounded, new)
        log_ratio = old - new  # one per draw (eq. 10), not averaged before the exponential
        if a.log_ratio_clamp is not None:
            log_ratio = clamp_straight_through(log_ratio, a.log_ratio_clamp)
        ratio = jnp.exp(log_ratio)
        loss = -jnp.mean(trust_region_objective(ratio, advantages[:, None], a.clip, a.trust_region))
        metrics = {
            "cfm_loss": jnp.mean(new),
            **ratio_metrics(ratio, log_ratio, a.clip),
            "adv_mean": jnp.mean(advantages),
        }
        return loss, metrics


def playground_preset(env: str | None) -> Args:
    """Table 1's FPO column (`trainers.fpo.playground_preset`, the official FPO Playground settings: networks,
    learning rates, value coefficient, 10 noise-free steps with the reference's reversed time, tanh at the env,
    N_mc = 8, eps = 0.05) with FPO++'s objective (`FppArgs`' defaults) in place of FPO's. FPO++ publishes no
    Playground setting; this isolates its changes against the `fpo` column."""
    column = fpo.playground_preset(env)
    a = column.algo
    return specialise(
        Args, column, algo=FppArgs(num_samples=a.num_samples, clip=a.clip, time_reversed=a.time_reversed)
    )


def gym_preset(env: str | None) -> Args:
    """Table 2's shared rows (`trainers.presets.gym`: 1024 envs x 24 steps, 4 x 6144, 4 epochs, gamma 0.99, 40M
    steps) with FlowRL's FPO++ column for IsaacLab (the setting the paper's Gym columns start from). From its
    fpopp config: 64 noise-free Euler steps of a 3 x 256 velocity net with learnable Fourier time features (16) and
    no output scale, 16 draws per action, eps = 0.05, learning rates 1e-4 (actor) and 1e-3 (critic, ELU 3 x 256),
    gradient norm 1. From its June 2026 refactor, which follows FPO++'s own code: value coefficient 1, the action
    clipped to +-2 instead of every iterate to +-1, ELU in the velocity net and action noise N(0, 0.02^2) (its
    earlier config: SiLU and 0.1), and `FppArgs`' loss defaults. The clip squash then maps the +-2 action into
    the bounds."""
    base = gym(env or "HalfCheetah-v5")
    return specialise(
        Args,
        base,
        policy=PolicyArgs(
            num_steps=64,
            width=256,
            depth=3,
            activation="elu",
            time_embedding="fourier",
            time_embed_dim=16,
            output_scale=1.0,
            sigma_schedule="constant",
            sigma_max=0.0,
            squash="clip",
        ),
        critic=CriticArgs(width=256, depth=3, activation="elu"),
        optim=OptimArgs(actor_lr=1e-4, critic_lr=1e-3, max_grad_norm=1.0, value_coef=1.0),
        algo=FppArgs(num_samples=16, clip=0.05, additive_noise=0.02, action_clip=2.0),
    )


def cpu_preset(env: str | None) -> Args:
    """FPO's small InvertedPendulum-v5 run (`trainers.fpo.cpu_preset`) with FPO++'s objective."""
    column = fpo.cpu_preset(env)
    return specialise(Args, column, algo=FppArgs(time_reversed=column.algo.time_reversed))


PRESETS = {"cpu": cpu_preset, "playground": playground_preset, "gym": gym_preset}


train, main = loop_entry_points(FpoPlusPlus, Args, PRESETS, __doc__)

if __name__ == "__main__":
    main()
