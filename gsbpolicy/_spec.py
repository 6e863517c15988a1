"""`PolicySpec`: everything needed to rebuild a `FlowPolicy` skeleton, as a frozen JSON-able dataclass."""

import dataclasses
import hashlib
import json
import math
from typing import Any, Literal

FORMAT_VERSION = 1
"""Version of the saved-policy format (config.json + model.safetensors). Bumped on any breaking change."""

Activation = Literal["silu", "elu", "relu", "tanh", "gelu", "mish"]
TimeEmbedding = Literal["sinusoidal", "fourier"]
Schedule = Literal["constant", "linear", "exponential"]
Squash = Literal["tanh", "clip", "none"]
Parameterization = Literal["velocity", "ddpm"]

_CHOICES = {
    "activation": Activation.__args__,
    "time_embedding": TimeEmbedding.__args__,
    "sigma_schedule": Schedule.__args__,
    "squash": Squash.__args__,
    "parameterization": Parameterization.__args__,
}

# Fields added after format 1 was published, with the defaults that reproduce the earlier behaviour.
# `to_dict` leaves them out while they hold these defaults, so earlier configs, their hashes and the
# files earlier gsbpolicy versions can read are all unchanged.
_LATER_DEFAULTS = {"time_reversed": False, "clip_iterates": False, "parameterization": "velocity"}


def _is_finite_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclasses.dataclass(frozen=True)
class PolicySpec:
    """Architecture, sampler and action-space description of a flow policy.

    Args:
        obs_dim: observation size.
        act_dim: action size.
        num_steps: number N of Euler(-Maruyama) generation steps on the uniform grid t_n = n/N.
        width: hidden width of the drift MLP.
        depth: number of hidden layers of the drift MLP.
        activation: hidden activation of the drift MLP.
        time_embedding: `sinusoidal` (fixed [cos(2^k t), sin(2^k t)], as in the FPO reference) or
            `fourier` (learnable Fourier features followed by a small MLP, as in FlowRL).
        time_embed_dim: size of the time embedding (even).
        output_scale: the drift is `output_scale * MLP(...)`.
        sigma_schedule: diffusion schedule between `sigma_max` (t = 0) and `sigma_min` (t = 1).
        sigma_max: diffusion coefficient at the noise end. `constant` allows 0: a deterministic Euler
            sampler from a random a^(0) (FPO), whose step log-densities are undefined.
        sigma_min: diffusion coefficient at the action end (ignored by `constant`); with
            `parameterization="ddpm"`, the floor of each step's standard deviation (DPPO's min std).
        squash: map from the generated action a^(N) to [-1, 1] before rescaling to the bounds:
            `tanh`, `clip`, or `none` (no squash and no rescale: a^(N) itself, clipped to the bounds
            when they are given, so an action never leaves the bounds a spec declares).
        action_low: lower action bounds (required unless squash is `none`).
        action_high: upper action bounds (required unless squash is `none`, given with action_low).
        obs_clip: normalized observations are clipped to [-obs_clip, obs_clip].
        obs_eps: variance floor of the observation normalizer.
        env_id: the environment the policy was trained on (metadata only).
        time_reversed: the network is fed 1 - t instead of t (the FPO reference's time, where 1 is
            noise), so that its time features match the reference exactly.
        clip_iterates: clip every sampler iterate a^(n), n >= 1, to [-1, 1] (FlowRL's `clip_sampler`);
            needs the noise-free sampler (`constant` schedule with sigma_max = 0).
        parameterization: `velocity`: the network output is the drift. `ddpm`: the network predicts
            the noise eps of a K = num_steps DDPM with DPPO's cosine schedule, and step n is the DDPM
            posterior N(mu(eps_hat, x0_hat clipped to [-1, 1]), max(std_k, sigma_min)^2) at
            k = K - 1 - n, written as the equivalent Euler-Maruyama step: drift (mu - a^(n)) / dt and
            sigma = max(std_k, sigma_min) / sqrt(dt) (`sigma_schedule` and `sigma_max` are unused).
        format_version: saved-format version; see `FORMAT_VERSION`.
    """

    obs_dim: int
    act_dim: int
    num_steps: int = 16
    width: int = 256
    depth: int = 3
    activation: Activation = "silu"
    time_embedding: TimeEmbedding = "sinusoidal"
    time_embed_dim: int = 16
    output_scale: float = 0.25
    sigma_schedule: Schedule = "linear"
    sigma_max: float = 3.0
    sigma_min: float = 0.3
    squash: Squash = "tanh"
    action_low: tuple[float, ...] | None = None
    action_high: tuple[float, ...] | None = None
    obs_clip: float = 10.0
    obs_eps: float = 1e-8
    env_id: str | None = None
    time_reversed: bool = False
    clip_iterates: bool = False
    parameterization: Parameterization = "velocity"
    format_version: int = FORMAT_VERSION

    def __post_init__(self):
        self._check_types()
        for name in ("action_low", "action_high"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, tuple(float(v) for v in value))
        for name, choices in _CHOICES.items():
            if getattr(self, name) not in choices:
                raise ValueError(f"PolicySpec.{name}={getattr(self, name)!r}; expected one of {choices}")
        for name in ("obs_dim", "act_dim", "num_steps", "width", "time_embed_dim"):
            if getattr(self, name) < 1:
                raise ValueError(f"PolicySpec.{name} must be a positive integer, got {getattr(self, name)!r}")
        for name in ("obs_clip", "obs_eps"):
            if getattr(self, name) <= 0:
                raise ValueError(f"PolicySpec.{name} must be > 0, got {getattr(self, name)!r}")
        if self.depth < 0:
            raise ValueError(f"PolicySpec.depth must be >= 0, got {self.depth}")
        if self.time_embed_dim % 2:
            raise ValueError(f"PolicySpec.time_embed_dim must be even, got {self.time_embed_dim}")
        self._check_sigmas()
        if self.format_version != FORMAT_VERSION:
            raise ValueError(
                f"unknown policy format_version {self.format_version}; this gsbpolicy reads version "
                f"{FORMAT_VERSION} (upgrade gsbpolicy to load newer policies)"
            )
        self._check_bounds()

    def _check_types(self):
        """Every field has its annotated type, so a hand-edited config.json (a string where a number
        belongs, a NaN) is named here instead of failing later in a comparison or in the maths."""
        for field in dataclasses.fields(self):
            name, value = field.name, getattr(self, field.name)
            if field.type is int:
                # bool is an int subclass: `"width": true` would silently mean width 1.
                ok, expected = isinstance(value, int) and not isinstance(value, bool), "an int"
            elif field.type is float:
                ok, expected = _is_finite_number(value), "a finite number"
            elif field.type is bool:
                ok, expected = isinstance(value, bool), "true or false"
            elif name == "env_id":
                ok, expected = value is None or isinstance(value, str), "a string or null"
            elif name in ("action_low", "action_high"):
                ok = value is None or (
                    isinstance(value, (list, tuple)) and all(_is_finite_number(v) for v in value)
                )
                expected = "a list of finite numbers or null"
            else:  # the Literal choices, checked against their values in __post_init__
                continue
            if not ok:
                raise ValueError(f"PolicySpec.{name} must be {expected}, got {value!r}")

    def _check_sigmas(self):
        ddpm = self.parameterization == "ddpm"
        uses_max = not ddpm
        uses_min = ddpm or self.sigma_schedule != "constant"
        if uses_min and not self.sigma_min > 0:
            raise ValueError(f"sigma_min must be > 0, got {self.sigma_min}")
        if uses_max and not (
            self.sigma_max > 0 or (self.sigma_schedule == "constant" and self.sigma_max == 0)
        ):
            raise ValueError(
                f"sigma_max must be > 0 (or exactly 0 with the constant schedule), got {self.sigma_max}"
            )
        if self.clip_iterates and (ddpm or self.sigma_schedule != "constant" or self.sigma_max != 0):
            raise ValueError(
                "clip_iterates needs the noise-free sampler (velocity parameterization, constant schedule, "
                "sigma_max = 0): clipped Gaussian steps have no Gaussian density"
            )

    def _check_bounds(self):
        low, high = self.action_low, self.action_high
        if self.squash == "none" and low is None and high is None:
            return
        if low is None or high is None:
            needs = "action_low with action_high" if self.squash == "none" else "action_low and action_high"
            raise ValueError(f"squash={self.squash!r} needs {needs}")
        if len(low) != self.act_dim or len(high) != self.act_dim:
            raise ValueError(
                f"action bounds have {len(low)} and {len(high)} entries; expected act_dim={self.act_dim}"
            )
        if not all(math.isfinite(x) for x in low + high) or any(
            lo >= hi for lo, hi in zip(low, high, strict=True)
        ):
            raise ValueError(f"action bounds must be finite with low < high, got low={low}, high={high}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (tuples become lists); later fields are left out at their defaults."""
        return {
            k: list(v) if isinstance(v, tuple) else v
            for k, v in dataclasses.asdict(self).items()
            if k not in _LATER_DEFAULTS or v != _LATER_DEFAULTS[k]
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PolicySpec":
        """Inverse of `to_dict`; unknown keys are an error so a mismatched config is never half-read."""
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - fields
        if unknown:
            raise ValueError(f"unknown PolicySpec keys {sorted(unknown)}; known keys are {sorted(fields)}")
        return cls(**data)

    def hash(self) -> str:
        """A short stable hash of the spec (used to tie exported files to their config)."""
        payload = json.dumps(self.to_dict(), sort_keys=True).encode()
        return hashlib.sha256(payload).hexdigest()[:16]
