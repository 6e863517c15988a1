"""Stable-Baselines3 glue for trainers.ppo (imports torch): building the PPO model, exporting its policy as a
`GaussianActor`, and its training state as safetensors-ready arrays (no zip, no pickle).

SB3's MlpPolicy actor is `mlp_extractor.policy_net` (Linear, activation, ...) then `action_net` (Linear) and a
state-independent `log_std`; `GaussianActor(std="param", squash="clip")` is the same function, and SB3's
VecNormalize uses the same normalization as `RunningNorm` ((obs - mean) / sqrt(var + 1e-8), clipped to 10).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.running_mean_std import RunningMeanStd

from gsbpolicy import GaussianActor
from gsbpolicy._internal import GaussianSpec, RunningNorm

TORCH_ACTIVATIONS = {"tanh": torch.nn.Tanh, "elu": torch.nn.ELU, "silu": torch.nn.SiLU, "relu": torch.nn.ReLU}
ADAM_STATE = ("step", "exp_avg", "exp_avg_sq")


class GroupRatesPPO(PPO):
    """SB3 PPO that keeps per-group learning rates (trainers.ppo drives its `learn()` loop one turn at a time)."""

    def _update_learning_rate(self, optimizers) -> None:
        """The actor and critic parameter groups keep their own constant rates (SB3 would set one for both)."""


def make_ppo(args, env) -> GroupRatesPPO:
    """SB3 PPO for trainers.ppo's `Args` on `env`, with separate actor and critic learning rates."""
    rollout, optim, a = args.rollout, args.optim, args.algo
    model = GroupRatesPPO(
        "MlpPolicy",
        env,
        learning_rate=optim.actor_lr,
        n_steps=rollout.unroll_length * rollout.unrolls_per_iteration,
        batch_size=rollout.steps_per_iteration // rollout.num_minibatches,
        n_epochs=rollout.epochs,
        gamma=rollout.gamma,
        gae_lambda=rollout.gae_lambda,
        clip_range=a.clip,
        normalize_advantage=rollout.normalize_advantages,
        ent_coef=a.entropy_coef,
        vf_coef=optim.value_coef,
        max_grad_norm=optim.max_grad_norm or float("inf"),
        seed=args.seed,
        device="cpu",
        policy_kwargs={
            "net_arch": {"pi": [a.width] * a.depth, "vf": [args.critic.width] * args.critic.depth},
            "activation_fn": TORCH_ACTIVATIONS[a.activation],
            "log_std_init": a.init_log_std,
            "ortho_init": a.ortho_init,
        },
    )
    _split_learning_rates(model, optim.actor_lr, optim.critic_lr)
    return model


def _split_learning_rates(model: PPO, actor_lr: float, critic_lr: float) -> None:
    """Replace SB3's single Adam by one with an actor and a critic parameter group (SB3's eps 1e-5)."""
    policy = model.policy
    actor = [*policy.mlp_extractor.policy_net.parameters(), *policy.action_net.parameters(), policy.log_std]
    critic = [*policy.mlp_extractor.value_net.parameters(), *policy.value_net.parameters()]
    if len(actor) + len(critic) != len(list(policy.parameters())):
        raise RuntimeError("unexpected SB3 policy layout: a parameter is neither actor nor critic")
    groups = [{"params": actor, "lr": actor_lr}, {"params": critic, "lr": critic_lr}]
    policy.optimizer = torch.optim.Adam(groups, eps=1e-5)


def to_gaussian_actor(
    model: PPO, obs_rms: RunningMeanStd, width: int, depth: int, activation: str, env_id: str
) -> GaussianActor:
    """The SB3 policy (`width` x `depth` actor) and VecNormalize statistics as a `GaussianActor` with the
    same outputs."""
    space = model.action_space
    spec = GaussianSpec(
        obs_dim=model.observation_space.shape[0],
        act_dim=space.shape[0],
        action_low=tuple(space.low.tolist()),
        action_high=tuple(space.high.tolist()),
        width=width,
        depth=depth,
        activation=activation,
        std="param",
        squash="clip",
        env_id=env_id,
    )
    state = {k: jnp.asarray(v.detach().numpy()) for k, v in model.policy.state_dict().items()}
    names = [f"mlp_extractor.policy_net.{2 * i}" for i in range(spec.depth)] + ["action_net"]
    norm = RunningNorm(*(jnp.asarray(x, jnp.float32) for x in (obs_rms.mean, obs_rms.var, obs_rms.count)))
    actor = GaussianActor(spec, key=jax.random.key(0))
    actor = eqx.tree_at(
        lambda m: [x.weight for x in m.mlp.layers], actor, [state[f"{n}.weight"] for n in names]
    )
    actor = eqx.tree_at(lambda m: [x.bias for x in m.mlp.layers], actor, [state[f"{n}.bias"] for n in names])
    return eqx.tree_at(lambda m: m.log_std, actor, state["log_std"]).with_normalizer(norm)


def _params(model: PPO) -> list[torch.nn.Parameter]:
    return [p for group in model.policy.optimizer.param_groups for p in group["params"]]


def _rms_tree(rms: RunningMeanStd) -> dict:
    return {"mean": rms.mean, "var": rms.var, "count": np.asarray(rms.count, np.float64)}


def _load_rms(rms: RunningMeanStd, tree: dict) -> None:
    rms.mean, rms.var, rms.count = (
        np.asarray(tree["mean"]),
        np.asarray(tree["var"]),
        float(np.asarray(tree["count"])),
    )


def training_state(model: PPO, obs_rms: RunningMeanStd, ret_rms: RunningMeanStd | None = None) -> dict:
    """Policy weights, Adam moments and observation statistics (and, with VecNormalize's reward
    normalisation, its return statistics) as numpy trees (for `save_checkpoint`)."""
    optimizer = model.policy.optimizer
    adam = {}
    for i, p in enumerate(_params(model)):
        state = optimizer.state.get(p, {})  # empty before the first update
        zeros = {"step": np.zeros((), np.float32), "exp_avg": np.zeros(p.shape, np.float32)}
        zeros["exp_avg_sq"] = zeros["exp_avg"]
        adam |= {f"{i}.{k}": state[k].numpy() if k in state else zeros[k] for k in ADAM_STATE}
    policy = {k: v.detach().numpy() for k, v in model.policy.state_dict().items()}
    trees = {"policy": policy, "adam": adam, "obs_rms": _rms_tree(obs_rms)}
    return trees if ret_rms is None else {**trees, "ret_rms": _rms_tree(ret_rms)}


def load_training_state(
    model: PPO, obs_rms: RunningMeanStd, trees: dict, ret_rms: RunningMeanStd | None = None
) -> None:
    """Inverse of `training_state`."""
    model.policy.load_state_dict({k: torch.as_tensor(np.asarray(v)) for k, v in trees["policy"].items()})
    optimizer = model.policy.optimizer
    adam = trees["adam"]
    state = {
        i: {k: torch.as_tensor(np.asarray(adam[f"{i}.{k}"])) for k in ADAM_STATE}
        for i in range(len(_params(model)))
    }
    optimizer.load_state_dict({"state": state, "param_groups": optimizer.state_dict()["param_groups"]})
    _load_rms(obs_rms, trees["obs_rms"])
    if ret_rms is not None:
        _load_rms(ret_rms, trees["ret_rms"])
