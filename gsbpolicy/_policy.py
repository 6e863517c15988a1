"""`FlowPolicy`: the deployable flow-matching policy (an Equinox module working on one observation)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from . import _ddpm, _sde
from ._networks import DriftMLP
from ._normalizer import RunningNorm
from ._schedules import AbstractSigmaSchedule, make_schedule, time_grid
from ._spec import PolicySpec
from ._types import Action, Drifts, Key, Noise, Obs, Path, Scalar, StepValues


class FlowPolicy(eqx.Module):
    """A state-conditioned SDE policy da = f_theta(a, t, s) dt + sigma(t) dW (paper eq. 4).

    Works on a single observation; batch with `jax.vmap`. Build with `make_policy(spec, key=...)`.
    Likelihoods are always of the pre-squash path; `to_env` maps a^(N) into the action bounds.
    """

    spec: PolicySpec = eqx.field(static=True)
    normalizer: RunningNorm
    drift_net: DriftMLP
    schedule: AbstractSigmaSchedule

    def drift(self, obs: Obs, action: Action, t: Scalar) -> Action:
        """f_theta(a, t, s) for a raw (unnormalized) observation."""
        return self._drift_fn(obs)(action, t)

    def _drift_fn(self, obs: Obs):
        # Normalize once per path, not once per generation step.
        obs_normalized = self.normalizer(obs)
        spec = self.spec

        def drift(a, t):
            output = self.drift_net(obs_normalized, a, 1.0 - t if spec.time_reversed else t)
            return _ddpm.drift(output, a, t, spec.num_steps) if spec.parameterization == "ddpm" else output

        return drift

    def sample(self, obs: Obs, noise: Noise) -> _sde.PathSample:
        """Euler-Maruyama path, step log-densities and drifts for the given noise [N+1, act_dim]."""
        spec = self.spec
        return _sde.sample_sde(self._drift_fn(obs), self.schedule, spec.num_steps, noise, spec.clip_iterates)

    def sample_ode(self, obs: Obs, a0: Action | None = None) -> Path:
        """Deterministic Euler path from `a0` (default 0: the deterministic policy)."""
        a0 = jnp.zeros(self.spec.act_dim) if a0 is None else a0
        return _sde.sample_ode(self._drift_fn(obs), self.spec.num_steps, a0, self.spec.clip_iterates)

    def sample_final(self, obs: Obs, noise: Noise) -> Action:
        """The pre-squash a^(N) of `sample` for the same noise, without the path or log-densities."""
        spec = self.spec
        return _sde.final_action_sde(
            self._drift_fn(obs), self.schedule, spec.num_steps, noise, spec.clip_iterates
        )

    def log_probs_and_drifts(self, obs: Obs, path: Path) -> tuple[StepValues, Drifts]:
        """Per-step log p_theta(a^(n+1) | a^(n), s) and f_theta(a^(n), t_n, s) on a stored path."""
        return _sde.path_log_probs_and_drifts(self._drift_fn(obs), self.schedule, path)

    def log_prob(self, obs: Obs, path: Path) -> Scalar:
        """log P_theta(a^(0:N) | s) (paper eq. 8), prior term included."""
        step_log_probs, _ = self.log_probs_and_drifts(obs, path)
        return _sde.prior_log_prob(path[0]) + jnp.sum(step_log_probs)

    def sigmas(self) -> StepValues:
        """sigma(t_n) for n = 0..N-1."""
        return self.schedule(time_grid(self.spec.num_steps)[:-1])

    def to_env(self, action: Action) -> Action:
        """Squash a^(N) to [-1, 1] (`tanh` or `clip`) and rescale to the action bounds; `none` is identity
        (clipped to the bounds if the spec has them)."""
        spec = self.spec
        if spec.action_low is None:  # squash "none" without bounds: the action space is unbounded
            return action
        low = jnp.asarray(spec.action_low, action.dtype)
        high = jnp.asarray(spec.action_high, action.dtype)
        if spec.squash != "none":
            unit = jnp.tanh(action) if spec.squash == "tanh" else jnp.clip(action, -1.0, 1.0)
            action = low + 0.5 * (unit + 1.0) * (high - low)
        # The rescale can round one ulp past a bound (low + (high - low) != high in float32).
        return jnp.clip(action, low, high)

    def act(self, obs: Obs) -> Action:
        """Deterministic env action: ODE from a^(0) = 0, squashed and rescaled."""
        spec = self.spec
        a0 = jnp.zeros(spec.act_dim)
        return self.to_env(_sde.final_action_ode(self._drift_fn(obs), spec.num_steps, a0, spec.clip_iterates))

    def act_stochastic(self, obs: Obs, noise: Noise) -> Action:
        """Stochastic env action for the given noise [N+1, act_dim]."""
        return self.to_env(self.sample_final(obs, noise))

    def noise_shape(self) -> tuple[int, int]:
        """Shape [N+1, act_dim] of the noise one stochastic action consumes."""
        return noise_shape(self.spec)

    def with_normalizer(self, normalizer: RunningNorm) -> "FlowPolicy":
        """A copy with other observation statistics."""
        return eqx.tree_at(lambda p: p.normalizer, self, normalizer)


def make_policy(spec: PolicySpec, *, key: Key) -> FlowPolicy:
    """The only constructor of `FlowPolicy`: a freshly initialised policy for `spec`."""
    drift = DriftMLP(
        spec.obs_dim,
        spec.act_dim,
        spec.width,
        spec.depth,
        spec.activation,
        spec.time_embedding,
        spec.time_embed_dim,
        spec.output_scale,
        key=key,
    )
    normalizer = RunningNorm.init(spec.obs_dim, spec.obs_clip, spec.obs_eps)
    if spec.parameterization == "ddpm":
        schedule = _ddpm.DDPMSigma(spec.num_steps, spec.sigma_min)
    else:
        schedule = make_schedule(spec.sigma_schedule, spec.sigma_max, spec.sigma_min)
    return FlowPolicy(spec, normalizer, drift, schedule)


def noise_shape(spec: PolicySpec) -> tuple[int, int]:
    """Shape [N+1, act_dim] of the noise one stochastic sample consumes."""
    return (spec.num_steps + 1, spec.act_dim)


def sample_noise(key: Key, spec: PolicySpec, batch_shape: tuple[int, ...] = ()) -> Noise:
    """Standard normal noise for `batch_shape` samples (the key-based wrapper over array noise)."""
    return jax.random.normal(key, (*batch_shape, *noise_shape(spec)))


def numpy_noise(rng: np.random.Generator, shape: tuple[int, ...], batch: int) -> np.ndarray:
    """Host-side noise for `batch` samples of one-sample `shape`, float32 (what GSBPolicy and the ONNX
    runtime feed)."""
    return rng.standard_normal((batch, *shape), dtype=np.float32)
