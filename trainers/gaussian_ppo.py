"""Gaussian PPO in the shared pipeline: the same envs, rollouts, GAE, critic, evaluation and run folder as
GSB-MDPO, with a Gaussian MLP actor (gsbpolicy.GaussianActor) and PPO's clipped surrogate

    L = -E[ min(r A, clip(r, 1 - eps, 1 + eps) A) ] - c_ent * H,   r = pi(u | s) / pi_old(u | s)

on the stored pre-squash sample u. It is the like-for-like compute baseline; `trainers.lab.perf.compare_ppo` checks it
against Stable-Baselines3 PPO. Run `python -m trainers.gaussian_ppo --help`.

The flow-policy group `--policy.*` of the shared config is not used by this trainer; the actor is set by
`--algo.*`.
"""

import dataclasses
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp

from gsbpolicy import GaussianActor
from gsbpolicy._internal import GaussianSpec

from ._core.algorithm import AbstractAlgorithm
from ._core.api import loop_entry_points
from ._core.clipped_ratio import clipped_surrogate, ratio_metrics
from ._core.config import CriticArgs, OptimArgs, RolloutArgs, TrainArgs, require
from .presets import gym, playground, specialise, with_fields


@dataclasses.dataclass(frozen=True)
class GaussianPpoArgs:
    """PPO coefficients and the Gaussian actor's architecture (Brax PPO's and SB3's conventions)."""

    clip: float = 0.2
    """PPO clip epsilon on the likelihood ratio."""
    entropy_coef: float = 0.0
    """Weight of the entropy bonus (Tables 1-2: 0)."""
    width: int = 64
    """Actor MLP width."""
    depth: int = 2
    """Actor MLP hidden layers."""
    activation: Literal["silu", "elu", "relu", "tanh", "gelu", "mish"] = "tanh"
    """Actor MLP activation."""
    std: Literal["state", "param"] = "param"
    """"state": std = softplus(s) + min_std from the last layer (Brax/FPO); "param": a state-independent
    log std (SB3/FlowRL)."""
    squash: Literal["tanh", "clip"] = "clip"
    """Map from the Gaussian sample to the action bounds: tanh (Brax/FPO) or clip (SB3/FlowRL)."""
    init_log_std: float = 0.0
    """Initial log std for std="param" (0: std 1, as SB3 and FlowRL)."""
    min_std: float = 1e-3
    """Floor added to the softplus std for std="state" (Brax)."""

    def validate(self) -> None:
        require(self.clip > 0, "algo.clip", "> 0 (the half-width of PPO's ratio interval)", self.clip)
        require(self.entropy_coef >= 0, "algo.entropy_coef", ">= 0 (a bonus)", self.entropy_coef)
        require(self.depth >= 0, "algo.depth", ">= 0", self.depth)
        require(self.min_std > 0, "algo.min_std", "> 0", self.min_std)


@dataclasses.dataclass(frozen=True)
class Args(TrainArgs):
    algo: GaussianPpoArgs = GaussianPpoArgs()


class GaussianExtras(NamedTuple):
    """What the rollout stores per transition."""

    sample: jax.Array
    """The pre-squash Gaussian sample u [act_dim]."""
    log_prob: jax.Array
    """log pi_old(u | s) []."""


class GaussianPpo(AbstractAlgorithm):
    name = "gaussian_ppo"
    args: GaussianPpoArgs

    def make_actor(self, spec, args, *, key) -> GaussianActor:
        a = self.args
        gaussian = GaussianSpec(
            obs_dim=spec.obs_dim,
            act_dim=spec.act_dim,
            action_low=spec.action_low,
            action_high=spec.action_high,
            width=a.width,
            depth=a.depth,
            activation=a.activation,
            std=a.std,
            squash=a.squash,
            init_log_std=a.init_log_std,
            min_std=a.min_std,
            env_id=spec.env_id,
        )
        return GaussianActor(gaussian, key=key)

    def act(self, actor: GaussianActor, obs, key):
        sample = jax.vmap(actor.sample)(obs, jax.random.split(key, obs.shape[0]))
        log_prob = jax.vmap(actor.log_prob)(obs, sample)
        return jax.vmap(actor.to_env)(sample), GaussianExtras(sample, log_prob)

    def actor_loss(self, actor: GaussianActor, obs, extras: GaussianExtras, advantages, key):
        eps = self.args.clip
        log_ratio = jax.vmap(actor.log_prob)(obs, extras.sample) - extras.log_prob
        ratio = jnp.exp(log_ratio)
        surrogate = clipped_surrogate(ratio, advantages, eps)
        entropy = jnp.mean(jax.vmap(actor.entropy)(obs, jax.random.split(key, obs.shape[0])))
        loss = -jnp.mean(surrogate) - self.args.entropy_coef * entropy
        std = jax.vmap(lambda o: actor.distribution(o)[1])(obs)
        metrics = {
            **ratio_metrics(ratio, log_ratio, eps),
            "entropy": entropy,
            "std_mean": jnp.mean(std),
            "adv_mean": jnp.mean(advantages),
            "adv_std": jnp.std(advantages),
        }
        return loss, metrics


def playground_preset(env: str | None) -> Args:
    """Table 1, PPO column, with the FPO reference's PPO actor: 4x32 SiLU with a state-dependent softplus
    std, tanh at the env; 5x256 SiLU critic; lr 3e-4 / 3e-4, clip 0.1, value coef 0.25, entropy 0.
    Deviation: observation statistics move after the epochs (the shared core), Brax/FPO move them before."""
    base = playground(env or "CartpoleSwingup")
    return specialise(
        Args,
        base,
        critic=CriticArgs(width=256, depth=5, activation="silu"),
        optim=OptimArgs(actor_lr=3e-4, critic_lr=3e-4, value_coef=0.25, max_grad_norm=None),
        algo=GaussianPpoArgs(
            clip=0.1, entropy_coef=0.0, width=32, depth=4, activation="silu", std="state", squash="tanh"
        ),
    )


def gym_preset(env: str | None) -> Args:
    """Table 2, PPO column: ELU 3x256 actor and critic, state-independent log std, clip 0.2, actor lr 1e-4,
    critic lr 1e-3, gradient clip 1.0, entropy 0. Deviations from FlowRL's PPO: no clipped value loss and
    no adaptive-KL learning rate (Table 2 lists neither); value coef 1.0 (rsl_rl's default)."""
    base = gym(env or "HalfCheetah-v5")
    return specialise(
        Args,
        base,
        critic=CriticArgs(width=256, depth=3, activation="elu"),
        optim=OptimArgs(actor_lr=1e-4, critic_lr=1e-3, max_grad_norm=1.0, value_coef=1.0),
        algo=GaussianPpoArgs(
            clip=0.2, entropy_coef=0.0, width=256, depth=3, activation="elu", std="param", squash="clip"
        ),
    )


def cpu_preset(env: str | None) -> Args:
    """Small and fast (learns InvertedPendulum-v5 in a couple of minutes on 2 cores); the geometry of
    `trainers.ppo`'s cpu preset (SB3's default 2x64 tanh networks), so the two can be compared."""
    return with_fields(
        Args(env=env or "InvertedPendulum-v5", total_steps=100_000, preset="cpu"),
        # Minibatches are whole sequences here but shuffled transitions in SB3: 32 short sequences per
        # iteration keep each minibatch from being a few envs' correlated trajectories.
        rollout=dataclasses.asdict(RolloutArgs(num_envs=32, unroll_length=32, num_minibatches=4, epochs=10)),
        critic={"width": 64, "depth": 2, "activation": "tanh"},
        optim={"actor_lr": 3e-4, "critic_lr": 3e-4, "max_grad_norm": None, "value_coef": 0.5},
        eval={"num_evals": 10},
    )


PRESETS = {"cpu": cpu_preset, "playground": playground_preset, "gym": gym_preset}


train, main = loop_entry_points(GaussianPpo, Args, PRESETS, __doc__)

if __name__ == "__main__":
    main()
