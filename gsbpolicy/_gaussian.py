"""A Gaussian MLP actor (the PPO baselines' policy) and its safetensors + JSON policy folder.

Two parameterisations, as in the references:
- `std="state"` (Brax / FPO playground PPO): the last layer outputs (mean, s) and std = softplus(s) + min_std.
- `std="param"` (SB3 / FlowRL PPO): a state-independent log std vector, clipped to [-20, 2].

Bounding: `squash="tanh"` samples u ~ N(mean, std) and sends low + (tanh(u) + 1) (high - low) / 2 to the env
(Brax's NormalTanhDistribution; likelihoods are of the pre-tanh u, whose log-det cancels in PPO ratios);
`squash="clip"` samples the env action itself and clips it to the bounds (SB3, FlowRL).
"""

import dataclasses
from pathlib import Path
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp

from ._io import PolicyFormatError, Weights, load_into, policy_tensors, write_policy_files
from ._networks import ACTIVATIONS
from ._normalizer import RunningNorm

FORMAT = "gaussian_mlp"
"""The `format` entry of a Gaussian policy's config.json."""
FORMAT_VERSION = 1
LOG_STD_RANGE = (-20.0, 2.0)


@dataclasses.dataclass(frozen=True)
class GaussianSpec:
    """Everything needed to rebuild a `GaussianActor` (saved as config.json)."""

    obs_dim: int
    act_dim: int
    action_low: tuple[float, ...]
    action_high: tuple[float, ...]
    width: int = 64
    depth: int = 2
    activation: str = "tanh"
    std: Literal["state", "param"] = "param"
    squash: Literal["tanh", "clip"] = "clip"
    init_log_std: float = 0.0
    min_std: float = 1e-3
    env_id: str = ""

    def __post_init__(self):
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {self.activation!r}; choose from {sorted(ACTIVATIONS)}")
        if self.std not in ("state", "param") or self.squash not in ("tanh", "clip"):
            raise ValueError(
                f"std must be state|param and squash tanh|clip, got {self.std!r}, {self.squash!r}"
            )
        if len(self.action_low) != self.act_dim or len(self.action_high) != self.act_dim:
            raise ValueError(f"action bounds must have act_dim = {self.act_dim} entries")
        if min(self.obs_dim, self.act_dim, self.width) < 1 or self.depth < 0:
            raise ValueError(f"need obs_dim, act_dim, width >= 1 and depth >= 0: {self}")


class GaussianActor(eqx.Module):
    """pi(u | s) = N(mean(s), std(s)^2) on normalized observations; works on one observation."""

    mlp: eqx.nn.MLP
    log_std: jax.Array | None
    normalizer: RunningNorm
    spec: GaussianSpec = eqx.field(static=True)

    def __init__(self, spec: GaussianSpec, *, key):
        out = 2 * spec.act_dim if spec.std == "state" else spec.act_dim
        self.mlp = eqx.nn.MLP(
            spec.obs_dim, out, spec.width, spec.depth, ACTIVATIONS[spec.activation], key=key
        )
        self.log_std = jnp.full(spec.act_dim, spec.init_log_std) if spec.std == "param" else None
        self.normalizer = RunningNorm.init(spec.obs_dim)
        self.spec = spec

    def distribution(self, obs):
        """(mean, std) of the pre-squash Gaussian for one raw observation."""
        out = self.mlp(self.normalizer(obs))
        if self.spec.std == "state":
            mean, s = jnp.split(out, 2)
            return mean, jax.nn.softplus(s) + self.spec.min_std
        return out, jnp.exp(jnp.clip(self.log_std, *LOG_STD_RANGE))

    def log_prob(self, obs, u):
        """log N(u; mean, std^2) summed over action dims, constants included (pre-squash)."""
        mean, std = self.distribution(obs)
        z = (u - mean) / std
        return jnp.sum(-0.5 * z**2 - jnp.log(std) - 0.5 * jnp.log(2 * jnp.pi))

    def sample(self, obs, key):
        """A pre-squash sample u = mean + std * z for one observation, z drawn from `key`."""
        mean, std = self.distribution(obs)
        return mean + std * jax.random.normal(key, mean.shape)

    def entropy(self, obs, key):
        """Gaussian entropy, plus for tanh the log-det of the squash at one sample (Brax's estimate)."""
        _, std = self.distribution(obs)
        entropy = jnp.sum(0.5 + 0.5 * jnp.log(2 * jnp.pi) + jnp.log(std))
        if self.spec.squash == "tanh":
            entropy = entropy + tanh_log_det(self.sample(obs, key))
        return entropy

    def to_env(self, u):
        """The env action of a pre-squash sample: tanh-squashed and rescaled, or clipped, into the bounds."""
        low, high = jnp.asarray(self.spec.action_low), jnp.asarray(self.spec.action_high)
        if self.spec.squash == "tanh":
            return low + (jnp.tanh(u) + 1.0) * 0.5 * (high - low)
        return jnp.clip(u, low, high)

    def act(self, obs):
        """Deterministic env action: the mean through the squash."""
        return self.to_env(self.distribution(obs)[0])

    def act_stochastic(self, obs, noise):
        """Env action of the sample mean + std * noise, for standard normal `noise` [act_dim] (`sample`
        with explicit noise)."""
        mean, std = self.distribution(obs)
        return self.to_env(mean + std * noise)

    def noise_shape(self) -> tuple[int, ...]:
        """Shape of the noise one stochastic action consumes."""
        return (self.spec.act_dim,)

    def with_normalizer(self, normalizer: RunningNorm) -> "GaussianActor":
        """The same actor with other observation statistics."""
        return eqx.tree_at(lambda a: a.normalizer, self, normalizer)


def tanh_log_det(u):
    """sum log |d tanh(u)/du| = sum log(1 - tanh(u)^2), computed stably as 2 (log 2 - u - softplus(-2u))."""
    return jnp.sum(2.0 * (jnp.log(2.0) - u - jax.nn.softplus(-2.0 * u)))


def save_gaussian(actor: GaussianActor, directory) -> Path:
    """Write config.json + model.safetensors (tensors keyed by `jax.tree_util.keystr` of their pytree path,
    e.g. `.mlp.layers[0].weight`, as the first Gaussian folders were; normalizer included)."""
    tensors = policy_tensors(actor, key_style="keystr")
    metadata = {"format": FORMAT, "format_version": str(FORMAT_VERSION)}
    config = {"format": FORMAT, "format_version": FORMAT_VERSION, "spec": dataclasses.asdict(actor.spec)}
    return write_policy_files(directory, tensors, metadata, config)


def load_gaussian(config: dict, config_path: Path, weights: Weights) -> GaussianActor:
    """The actor described by a Gaussian config.json (already parsed) with `weights`."""
    version = config.get("format_version")
    if version != FORMAT_VERSION:
        raise PolicyFormatError(
            f"{config_path} is a {FORMAT} policy of format_version {version!r}; this gsbpolicy reads "
            f"version {FORMAT_VERSION}"
        )
    spec = config.get("spec")
    try:
        if not isinstance(spec, dict):
            raise TypeError(f"'spec' must be an object, got {spec!r}")
        bounds = {name: tuple(spec[name]) for name in ("action_low", "action_high") if name in spec}
        spec = GaussianSpec(**{**spec, **bounds})
    except (TypeError, ValueError) as err:
        raise PolicyFormatError(f"{config_path}: invalid Gaussian policy spec: {err}") from err
    skeleton = eqx.filter_eval_shape(GaussianActor, spec, key=jax.random.key(0))
    return load_into(skeleton, weights, key_style="keystr")
