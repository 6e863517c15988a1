"""GSB-MDPO: Generalized Schrodinger Bridge Mirror Descent Policy Optimization (the paper, Section 4).

Mirror descent over path measures: the flow policy's whole generation path a^(0:N) is the "action".
At rollout the old policy's path, step log-densities log p_k and drifts f_k are stored (Algorithm 1,
line 3); the update recomputes them under the current parameters on the stored paths and minimises

    L = -E[ r~ * (A - lambda * C_eta) ]                                                   (eq. 20)
    r~ = exp(clip(sum_n clip(log p_theta - log p_k, +-c_step), +-c_path))                 (eq. 19)
    C_eta = sum_n dt / (2 sigma(t_n)^2) * || f_theta - (1 - eta) f_k ||^2                 (eqs. 17-18)

plus the shared critic MSE. Run `python -m trainers.gsb_mdpo --help`.
"""

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from gsbpolicy import FlowPolicy
from gsbpolicy._internal import sample_noise

from ._core.algorithm import AbstractAlgorithm
from ._core.api import loop_entry_points
from ._core.config import CriticArgs, OptimArgs, PolicyArgs, RolloutArgs, TrainArgs, require
from .presets import gym, playground, specialise, with_fields


@dataclasses.dataclass(frozen=True)
class GsbMdpoArgs:
    """GSB-MDPO coefficients (paper Section 4; Tables 1-2)."""

    kl_coef: float = 0.08
    """lambda: weight of the path-KL drift cost C_eta inside the effective advantage (eq. 20)."""
    ref_mix: float = 0.02
    """eta: mix of the zero-drift reference into the anchor f_eta = (1 - eta) f_k (eqs. 17-18)."""
    step_clip: float = 0.1
    """c_step: clip of each generation step's log-ratio (eq. 19)."""
    path_clip: float = 0.4
    """c_path: clip of the summed path log-ratio (eq. 19)."""

    def validate(self) -> None:
        # lambda >= 0: a negative KL weight would reward moving away from the old policy (0 is the ablation);
        # eta mixes two drifts (eq. 17); the clips are half-widths of intervals (eq. 19).
        require(self.kl_coef >= 0, "algo.kl_coef", ">= 0", self.kl_coef)
        require(0 <= self.ref_mix <= 1, "algo.ref_mix", "in [0, 1]", self.ref_mix)
        require(self.step_clip > 0, "algo.step_clip", "> 0", self.step_clip)
        require(self.path_clip > 0, "algo.path_clip", "> 0", self.path_clip)


@dataclasses.dataclass(frozen=True)
class Args(TrainArgs):
    algo: GsbMdpoArgs = GsbMdpoArgs()


class PathExtras(NamedTuple):
    """What the rollout stores per transition (Algorithm 1, line 3)."""

    path: jax.Array
    """a^(0:N) [N+1, act_dim]."""
    log_probs: jax.Array
    """log p_k(a^(n+1) | a^(n), s) [N]."""
    drifts: jax.Array
    """f_k(a^(n), t_n, s) [N, act_dim]."""


class GsbMdpo(AbstractAlgorithm):
    name = "gsb_mdpo"
    args: GsbMdpoArgs

    def act(self, actor: FlowPolicy, obs, key):
        sample = jax.vmap(actor.sample)(obs, sample_noise(key, actor.spec, obs.shape[:1]))
        return jax.vmap(actor.to_env)(sample.path[:, -1]), PathExtras(*sample)

    def actor_loss(self, actor: FlowPolicy, obs, extras: PathExtras, advantages, key):
        a = self.args
        log_probs, drifts = jax.vmap(actor.log_probs_and_drifts)(obs, extras.path)
        step_log_ratio = log_probs - extras.log_probs  # Delta l_n, [B, N]
        clipped_steps = jnp.clip(step_log_ratio, -a.step_clip, a.step_clip)
        path_log_ratio = jnp.sum(clipped_steps, axis=-1)
        ratio = jnp.exp(jnp.clip(path_log_ratio, -a.path_clip, a.path_clip))  # r~, eq. 19
        # C_eta (eq. 18) with the zero reference drift, so f_eta = (1 - eta) f_k (eq. 17). Its gradient
        # flows even where the ratio is clipped: clipping only freezes the importance weight.
        dt = 1.0 / actor.spec.num_steps
        weights = dt / (2.0 * actor.sigmas() ** 2)
        anchor = (1.0 - a.ref_mix) * extras.drifts
        cost = jnp.sum(weights[None, :] * jnp.sum((drifts - anchor) ** 2, axis=-1), axis=-1)
        loss = -jnp.mean(ratio * (advantages - a.kl_coef * cost))  # eq. 20
        raw_log_ratio = jnp.sum(step_log_ratio, axis=-1)
        metrics = {
            # The share of generation steps (sample x step) whose log-ratio is clipped, and the share of
            # rollout samples with at least one clipped step: what the paper's App. C.2 counts.
            "step_clip_frac": jnp.mean(jnp.abs(step_log_ratio) > a.step_clip),
            "sample_clip_frac": jnp.mean(jnp.any(jnp.abs(step_log_ratio) > a.step_clip, axis=-1)),
            "path_clip_frac": jnp.mean(jnp.abs(path_log_ratio) > a.path_clip),
            "drift_cost": jnp.mean(cost),
            "ratio_mean": jnp.mean(ratio),
            "ratio_max": jnp.max(ratio),
            # Path KL(P_k || P_theta) two ways, both averaged over the old paths (samples of P_k): the drift
            # energy (eq. 15 with eta = 0) and the k3 estimator E[(r - 1) - log r] of the unclipped ratio.
            "path_kl_drift": jnp.mean(
                jnp.sum(weights[None, :] * jnp.sum((drifts - extras.drifts) ** 2, -1), -1)
            ),
            "path_kl_k3": jnp.mean(jnp.expm1(raw_log_ratio) - raw_log_ratio),
            "adv_mean": jnp.mean(advantages),
            "adv_std": jnp.std(advantages),
        }
        return loss, metrics


def playground_preset(env: str | None) -> Args:
    """Table 1, GSB-MDPO column, exactly."""
    base = playground(env or "CartpoleSwingup")
    return specialise(
        Args,
        base,
        policy=PolicyArgs(
            num_steps=8,
            width=32,
            depth=4,
            activation="silu",
            time_embedding="sinusoidal",
            time_embed_dim=8,
            output_scale=0.25,
            sigma_schedule="exponential",
            sigma_max=3.0,
            sigma_min=1.0,
            squash="tanh",
        ),
        critic=CriticArgs(width=256, depth=5, activation="silu"),
        optim=OptimArgs(actor_lr=1e-3, critic_lr=1e-3, value_coef=0.1, max_grad_norm=None),
        algo=GsbMdpoArgs(kl_coef=0.8, ref_mix=0.0, step_clip=0.1, path_clip=0.3),
    )


def gym_preset(env: str | None) -> Args:
    """Table 2, GSB-MDPO column, exactly (time embedding: FlowRL's learnable Fourier features)."""
    base = gym(env or "HalfCheetah-v5")
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
            sigma_schedule="linear",
            sigma_max=3.0,
            sigma_min=0.3,
            squash="clip",
        ),
        critic=CriticArgs(width=256, depth=3, activation="elu"),
        optim=OptimArgs(
            actor_lr=7.5e-4, critic_lr=1e-3, actor_cosine_decay=True, max_grad_norm=1.0, value_coef=1.0
        ),
        algo=GsbMdpoArgs(kl_coef=0.08, ref_mix=0.02, step_clip=0.1, path_clip=0.4),
    )


CPU_POLICY = PolicyArgs(sigma_schedule="exponential", sigma_max=3.0, sigma_min=1.0, squash="tanh")
"""The default sampler: Table 1's (sigma 3 -> 1, tanh). Untrained, it acts with a std of 0.82 of the action
bound and 42% of actions beyond 0.95 of it (sigma 1 -> 0.5: 0.69 and 15%); on MountainCarContinuous, where
only a committed push ever reaches the goal, the wider start found it in 3 of 3 seeds, the narrower in 1 of 3
(docs/own-env.md)."""


def cpu_preset(env: str | None) -> Args:
    """The default for any env, small and fast on a 2-core CPU (learns InvertedPendulum-v5 in about 2 minutes).

    Chosen by measurement on six small envs unlike InvertedPendulum (docs/own-env.md has the numbers): rewards
    divided by the running std of the discounted return, so the critic sees unit-scale targets whatever the
    task's reward units; the paper's learning rates (1e-3, Table 1); gradient norms clipped at 0.5 (SB3's
    default), which keeps a normalised critic's early updates from throwing the actor off; 32 envs x 32 steps in
    8 minibatches, twice the updates per env step of 16 x 64 in 4; Table 1's sampler (`CPU_POLICY`) and Table 1's
    path-KL coefficient 0.8 (eq. 20's proximal term, ten times Table 2's 0.08): with unit-scale advantages and the
    wide sampler, the weaker term let an early, noisy update commit the policy to a push it never unlearnt (a puck
    pinned to a wall in 4 of 6 seeds; 0 of 6 at 0.8). Reference mixing (eta = 0.02) and the clips stay Table 2's.
    Not the paper's (in neither Table 1 nor Table 2): the small geometry (32 envs x 32 steps, 8 minibatches,
    8 epochs) and networks (2 x 64 actor and critic), the reward normalisation, the gradient clip at 0.5, the
    value-loss weight 0.5 (SB3's) and the noise hold. The noise hold: each env's sampling noise is held for 4 steps in rollouts (`rollout.noise_hold`, as gSDE
    holds its noise), exploration in committed runs of actions: with fresh noise every step MountainCar's goal
    was kept in 3 of 6 seeds (the sampled policy shrank its spread to save action cost before it reached the goal
    often enough), with held noise in 6 of 6, and the puck learns better too. The hold ends after the first 50k env
    steps (`rollout.noise_hold_steps`): after that fresh noise refines the small, precise forces a task like the
    double integrator wants (-9.5 with the hold throughout, -4.0 with it ending at 50k), and a run of up to 50k
    steps holds throughout.
    """
    return with_fields(
        Args(env=env or "InvertedPendulum-v5", total_steps=150_000, preset="cpu", policy=CPU_POLICY),
        rollout=dataclasses.asdict(
            RolloutArgs(
                num_envs=32,
                unroll_length=32,
                num_minibatches=8,
                epochs=8,
                normalize_rewards=True,
                noise_hold=4,
                noise_hold_steps=50_000,
            )
        ),
        optim=dataclasses.asdict(OptimArgs(actor_lr=1e-3, critic_lr=1e-3, max_grad_norm=0.5)),
        algo=dataclasses.asdict(GsbMdpoArgs(kl_coef=0.8)),
    )


PRESETS = {"cpu": cpu_preset, "playground": playground_preset, "gym": gym_preset}


train, main = loop_entry_points(GsbMdpo, Args, PRESETS, __doc__)

if __name__ == "__main__":
    main()
