"""DPPO: policy gradient through the denoising MDP (Ren et al. 2024; the official DPPO code's PPODiffusion).

Each generation step a^(n) -> a^(n+1) is a Gaussian action with its own PPO-clipped ratio. The rollout
stores the whole chain a^(0:N) and the step log-densities; the update recomputes them under the current
policy on the stored chains and minimises

    rho_n = exp(lp_n^new - lp_n^old),    L = -mean_{batch, n} min(rho_n A_n, clip(rho_n, 1 +- eps) A_n),
    A_n = gamma_denoise^(N-1-n) A      (the final step gets A),

plus the shared critic MSE. Both presets are Gaussian Markov chains, which gsbpolicy writes as
Euler-Maruyama steps (a chain N(m_n, s_n^2) has drift (m_n - a^(n)) / dt and sigma_n = s_n / sqrt(dt)):

  * playground = the FPO reference's `loss_mode="denoising_mdp"`: its flow net and 10-step Euler chain
    x <- x + dt v_hat + sigma xi with a constant per-step std sigma = 0.05 (not sigma sqrt(dt)), i.e. our
    constant schedule sigma_max = 0.05 / sqrt(1/10). Its log-density sums over action dims; it divides by
    sigma + 1e-6 and drops -d log sigma (they cancel in ratios), ours uses sigma exactly: the ratios
    differ by a factor (sigma / (sigma + 1e-6))^2 = 1 - 4e-5 on the quadratic term. Time runs the other
    way there; see trainers/fpo.py for the exact mapping (`time_reversed`).
  * gym = Table 2's DDPM policy (`PolicySpec.parameterization="ddpm"`, see gsbpolicy/_ddpm.py): an
    eps-prediction net on DPPO's cosine schedule, x0_hat clipped to [-1, 1], posterior std floored at
    0.1 when sampling AND in the likelihood (the official repo; FlowRL samples with an unfloored sqrt(beta)
    and floors only the likelihood, so its "ratio" is not one of sampling densities and is != 1 at the
    old parameters). Log-probs are averaged over action dims and clamped to [-5, 2] (official): with std
    0.1 a summed log-density is about 1.4 per dim, so FlowRL's sum with the same [-5, 2] clamp saturates
    (zero gradient) from 2 action dims on. The clamp acts on each action dimension's log-density before the
    average, as in official DPPO (`log_prob_clamp_per_dim`): a dimension far out of the old step's range
    stops contributing gradient on its own, where a clamp of the average would cut all dimensions at once
    or none (that form is `--algo.no-log-prob-clamp-per-dim`, the `dppo:clamp-mean` column of cpu-gym). gamma_denoise = 0.99 (FlowRL and DPPO's fine-tuning configs;
    DPPO's from-scratch configs use 1). Step noise draws clamped to +-3 (DPPO's `randn_clip_value`).
Deviation from official DPPO (>= v0.6): minibatches are drawn over env steps with all N steps each (the
shared core's sequences, as in FlowRL and the FPO reference), not over (env step x denoising step) pairs,
and the per-step clip is the constant of Tables 1-2, not DPPO's exponential clip schedule.
Run `python -m trainers.dppo --help`.
"""

import dataclasses
import math
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp

from gsbpolicy import FlowPolicy, PolicySpec, make_policy
from gsbpolicy._internal import sample_noise

from ._core.algorithm import AbstractAlgorithm
from ._core.api import loop_entry_points
from ._core.clipped_ratio import clipped_surrogate, ratio_metrics
from ._core.config import CriticArgs, OptimArgs, PolicyArgs, RolloutArgs, TrainArgs, require
from .presets import gym, playground, specialise, with_fields

REFERENCE_STEP_STD = 0.05
"""The FPO reference's per-step std in denoising-MDP mode (GoRL's "DPPO paper optimum")."""


def reference_sigma(num_steps: int, step_std: float = REFERENCE_STEP_STD) -> float:
    """The diffusion coefficient whose Euler-Maruyama step std sigma sqrt(1/N) is `step_std`."""
    return step_std / math.sqrt(1.0 / num_steps)


@dataclasses.dataclass(frozen=True)
class DppoArgs:
    """DPPO coefficients and likelihood options (Tables 1-2, DPPO column)."""

    clip: float = 0.2
    """PPO clip epsilon of every step's ratio."""
    log_prob_reduction: Literal["sum", "mean"] = "sum"
    """How a step's log-density combines action dims: `sum` (the density) or `mean` (official DPPO)."""
    log_prob_clamp: tuple[float, float] | None = None
    """Clamp step log-probs (old and new) to [low, high] before the ratio; None: no clamp."""
    log_prob_clamp_per_dim: bool = False
    """Clamp each action dimension's step log-density, then reduce (official DPPO); else reduce, then clamp."""
    denoise_gamma: float = 1.0
    """gamma_denoise: step n's advantage is multiplied by gamma_denoise^(N-1-n)."""
    noise_clip: float | None = None
    """Clamp each step's standard normal draw to +-this (DPPO's `randn_clip_value`); None: no clamp."""
    time_reversed: bool = False
    """Feed the network 1 - t (the FPO reference's time; sets `PolicySpec.time_reversed`)."""
    ddpm: bool = False
    """DDPM eps-prediction on the cosine schedule (sets `PolicySpec.parameterization="ddpm"`; the
    per-step std floor is `policy.sigma_min`)."""

    def validate(self) -> None:
        require(self.clip > 0, "algo.clip", "> 0 (the half-width of PPO's ratio interval)", self.clip)
        require(0 < self.denoise_gamma <= 1, "algo.denoise_gamma", "in (0, 1]", self.denoise_gamma)
        require(
            self.noise_clip is None or self.noise_clip > 0,
            "algo.noise_clip",
            "> 0 (or None)",
            self.noise_clip,
        )
        clamp = self.log_prob_clamp
        require(
            clamp is None or clamp[0] < clamp[1], "algo.log_prob_clamp", "LOW HIGH with LOW < HIGH", clamp
        )


@dataclasses.dataclass(frozen=True)
class Args(TrainArgs):
    policy: PolicyArgs = PolicyArgs(num_steps=10, sigma_schedule="constant", sigma_max=reference_sigma(10))
    algo: DppoArgs = DppoArgs()


class ChainExtras(NamedTuple):
    """What the rollout stores per transition."""

    path: jax.Array
    """The chain a^(0:N) [N+1, act_dim]."""
    log_probs: jax.Array
    """log p(a^(n+1) | a^(n), s) under the rollout policy: [N] summed over dims, or [N, act_dim] per
    dimension with `log_prob_clamp_per_dim`."""


def per_dim_log_probs(actor: FlowPolicy, path, drifts):
    """log N(a^(n+1)_i; a^(n)_i + dt f_i, sigma(t_n)^2 dt) per step n and action dimension i [N, act_dim]:
    the terms whose sum over i is the step log-density (drifts f(a^(n), t_n) as sampled or recomputed)."""
    dt = 1.0 / actor.spec.num_steps
    std = (actor.sigmas() * jnp.sqrt(dt))[:, None]
    z = (path[1:] - path[:-1] - dt * drifts) / std
    return -0.5 * z**2 - jnp.log(std) - 0.5 * jnp.log(2 * jnp.pi)


class Dppo(AbstractAlgorithm):
    name = "dppo"
    args: DppoArgs

    def make_actor(self, spec: PolicySpec, args: TrainArgs, *, key) -> FlowPolicy:
        a = self.args
        parameterization = "ddpm" if a.ddpm else "velocity"
        spec = dataclasses.replace(spec, time_reversed=a.time_reversed, parameterization=parameterization)
        if not a.ddpm and spec.sigma_schedule == "constant" and spec.sigma_max == 0:
            raise ValueError("DPPO needs Gaussian generation steps: policy.sigma_max must be > 0")
        return make_policy(spec, key=key)

    def act(self, actor: FlowPolicy, obs, key):
        noise = sample_noise(key, actor.spec, obs.shape[:1])
        if self.args.noise_clip is not None:  # the step draws only; a^(0) stays N(0, I) as in DPPO
            c = self.args.noise_clip
            noise = noise.at[:, 1:].set(jnp.clip(noise[:, 1:], -c, c))
        sample = jax.vmap(actor.sample)(obs, noise)
        log_probs = sample.log_probs
        if self.args.log_prob_clamp_per_dim:
            log_probs = jax.vmap(per_dim_log_probs, in_axes=(None, 0, 0))(actor, sample.path, sample.drifts)
        return jax.vmap(actor.to_env)(sample.path[:, -1]), ChainExtras(sample.path, log_probs)

    def step_log_probs(self, log_probs, act_dim: int):
        """Step log-probs [..., N] as the ratio uses them: reduced over dims (sum, or mean if asked) and
        clamped, the clamp per dimension before the reduction for per-dimension input [..., N, act_dim]."""
        a = self.args
        if a.log_prob_clamp_per_dim:
            if a.log_prob_clamp is not None:
                log_probs = jnp.clip(log_probs, *a.log_prob_clamp)
            return jnp.sum(log_probs, axis=-1) / (act_dim if a.log_prob_reduction == "mean" else 1)
        if a.log_prob_reduction == "mean":
            log_probs = log_probs / act_dim
        if a.log_prob_clamp is not None:
            log_probs = jnp.clip(log_probs, *a.log_prob_clamp)
        return log_probs

    def actor_loss(self, actor: FlowPolicy, obs, extras: ChainExtras, advantages, key):
        a, spec = self.args, actor.spec
        new, drifts = jax.vmap(actor.log_probs_and_drifts)(obs, extras.path)
        if a.log_prob_clamp_per_dim:
            new = jax.vmap(per_dim_log_probs, in_axes=(None, 0, 0))(actor, extras.path, drifts)
        log_ratio = self.step_log_probs(new, spec.act_dim) - self.step_log_probs(
            extras.log_probs, spec.act_dim
        )
        ratio = jnp.exp(log_ratio)  # [B, N]
        discount = a.denoise_gamma ** jnp.arange(spec.num_steps - 1, -1, -1, dtype=ratio.dtype)
        step_adv = advantages[:, None] * discount[None, :]
        loss = -jnp.mean(clipped_surrogate(ratio, step_adv, a.clip))
        metrics = {
            **ratio_metrics(ratio, log_ratio, a.clip),
            "step_log_prob": jnp.mean(self.step_log_probs(new, spec.act_dim)),
            "adv_mean": jnp.mean(advantages),
        }
        return loss, metrics


def playground_preset(env: str | None) -> Args:
    """Table 1, DPPO column = the FPO reference's denoising-MDP mode with GoRL's sigma 0.05, clip 0.2."""
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
            sigma_max=reference_sigma(10),
            squash="tanh",
        ),
        critic=CriticArgs(width=256, depth=5, activation="silu"),
        optim=OptimArgs(actor_lr=3e-4, critic_lr=3e-4, value_coef=0.25, max_grad_norm=None),
        algo=DppoArgs(clip=0.2, time_reversed=True),
    )


def gym_preset(env: str | None) -> Args:
    """Table 2, DPPO column: cosine DDPM, min std 0.1, time embedding 32, no output scale (eps-prediction);
    step log-densities clamped to [-5, 2] per action dimension, then averaged (official DPPO's order)."""
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
            time_embed_dim=32,
            output_scale=1.0,
            sigma_min=0.1,
            squash="clip",
        ),
        critic=CriticArgs(width=256, depth=3, activation="elu"),
        optim=OptimArgs(actor_lr=1e-3, critic_lr=1e-3, max_grad_norm=1.0, value_coef=1.0),
        algo=DppoArgs(
            clip=0.2,
            log_prob_reduction="mean",
            log_prob_clamp=(-5.0, 2.0),
            log_prob_clamp_per_dim=True,
            denoise_gamma=0.99,
            noise_clip=3.0,
            time_reversed=True,
            ddpm=True,
        ),
    )


def cpu_preset(env: str | None) -> Args:
    """Small and fast for InvertedPendulum-v5 on a 2-core CPU: the playground chain and loss, with a
    per-step std of 0.1 and learning rates 1e-3 (with 0.05 and 3e-4 it reached only 90 after 60k steps)."""
    return with_fields(
        Args(
            env=env or "InvertedPendulum-v5",
            total_steps=150_000,
            preset="cpu",
            algo=DppoArgs(time_reversed=True),
        ),
        rollout=dataclasses.asdict(RolloutArgs(num_envs=16, unroll_length=64, num_minibatches=4, epochs=8)),
        policy={"squash": "tanh", "sigma_max": reference_sigma(10, 0.1)},
        optim={"actor_lr": 1e-3, "critic_lr": 1e-3},
    )


PRESETS = {"cpu": cpu_preset, "playground": playground_preset, "gym": gym_preset}


train, main = loop_entry_points(Dppo, Args, PRESETS, __doc__)

if __name__ == "__main__":
    main()
