"""GenPO's invertible coupled flow (Ding et al. 2025; FlowRL `flowrl/flow/genpo.py`).

The policy acts in a doubled ("dummy") action space x = (z, y) in R^{2d} with prior x_0 ~ N(0, I_2d). One
velocity network v(h, s, t) : R^d -> R^d is shared by both halves. Generation step n (t = n/N, D = 1/N):

    z' = z + D v(y, t)            (additive coupling S_z)
    y' = y + D v(z', t)           (additive coupling S_y)
    z+ = p z' + (1 - p) y'        (mix M_z)
    y+ = p y' + (1 - p) z+        (mix M_y, with the *new* z, as both references do)

Every piece is invertible in closed form (unmix y, unmix z, undo S_y, undo S_z), so `inverse` is exact.

Log-determinant of the whole map, derived instead of computed. With each block d x d:
    J(S_z) = [[I, D dv/dy], [0, I]]      unit upper triangular       det = 1
    J(S_y) = [[I, 0], [D dv/dz', I]]     unit lower triangular       det = 1
    J(M_z) = [[pI, (1-p)I], [0, I]]      upper triangular            det = p^d
    J(M_y) = [[I, 0], [(1-p)I, pI]]      lower triangular            det = p^d
so each step scales volume by exactly p^{2d} whatever the network, the state, the observation or t, and by
the chain rule log|det dx_N/dx_0| = 2 d N log p: a constant. (Mixing y with the *old* z' instead would give
det [[p, 1-p], [1-p, p]]^d = (2p - 1)^d, also constant; the references use the new z.) Hence

    log pi(x_N | s) = log N(f_s^{-1}(x_N); 0, I_2d) - 2 d N log p,

exact and O(1) for the determinant, where the references build the full 2d x 2d Jacobian with `jacrev` and
`slogdet` per sample (2d reverse passes through 2N network calls, differentiated again in the loss; the
likely cause of GenPO's 65 GB in the paper's Table 3). The tests check it against slogdet(jacfwd) of the
N-step map. A consequence: the policy entropy H = d (1 + log 2 pi) + 2 d N log p is a constant too.

The env action is the first half z (pre-refactor FlowRL b85a88a, the version the paper cites; the official
repository and FlowRL HEAD use (z + y)/2), squashed into the bounds by `FlowPolicy.to_env`'s rule.
"""

from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp

from ._io import PolicyFormatError, Weights, load_into, policy_tensors, write_policy_files
from ._networks import DriftMLP
from ._normalizer import RunningNorm
from ._policy import FlowPolicy
from ._schedules import time_grid
from ._sde import prior_log_prob
from ._spec import PolicySpec
from ._types import Key, Obs, Scalar

FORMAT = "gsbpolicy-genpo"
"""The `format` entry of a GenPO policy's config.json."""


class GenPOFlow(eqx.Module):
    """The GenPO actor for one observation (batch with `jax.vmap`); x arrays are [2 * act_dim].

    `spec` supplies the network, steps, squash and bounds (its sigma fields are unused: the only noise is
    the prior); `mix` is p. Build with `make_genpo`.
    """

    spec: PolicySpec = eqx.field(static=True)
    mix: float = eqx.field(static=True)
    normalizer: RunningNorm
    velocity: DriftMLP

    def _velocity_fn(self, obs: Obs):
        obs_normalized = self.normalizer(obs)  # once per sample, not once per network call
        return lambda half, t: self.velocity(obs_normalized, half, t)

    def _times(self):
        return time_grid(self.spec.num_steps)[:-1]  # t_n, n = 0..N-1

    def forward(self, obs: Obs, x0):
        """x_N = f_s(x_0)."""
        v, p, dt, d = self._velocity_fn(obs), self.mix, 1.0 / self.spec.num_steps, self.spec.act_dim

        def step(carry, t):
            z, y = carry
            z = z + dt * v(y, t)
            y = y + dt * v(z, t)
            z = p * z + (1 - p) * y
            return (z, p * y + (1 - p) * z), None

        (z, y), _ = jax.lax.scan(step, (x0[:d], x0[d:]), self._times())
        return jnp.concatenate([z, y])

    def inverse(self, obs: Obs, x1):
        """x_0 = f_s^{-1}(x_N), undoing the steps in reverse order."""
        v, p, dt, d = self._velocity_fn(obs), self.mix, 1.0 / self.spec.num_steps, self.spec.act_dim

        def step(carry, t):
            z, y = carry
            y = (y - (1 - p) * z) / p
            z = (z - (1 - p) * y) / p
            y = y - dt * v(z, t)
            return (z - dt * v(y, t), y), None

        (z, y), _ = jax.lax.scan(step, (x1[:d], x1[d:]), self._times()[::-1])
        return jnp.concatenate([z, y])

    def log_det(self) -> Scalar:
        """log|det df_s/dx_0| = 2 d N log p (see the module docstring)."""
        return 2 * self.spec.act_dim * self.spec.num_steps * jnp.log(jnp.asarray(self.mix, jnp.float32))

    def log_prob(self, obs: Obs, x1) -> Scalar:
        """Exact log pi(x_N | s) by change of variables through the inverse."""
        return prior_log_prob(self.inverse(obs, x1)) - self.log_det()

    def to_env(self, x1):
        """Env action from the pair: the first half z, squashed and rescaled like a `FlowPolicy` action."""
        return FlowPolicy.to_env(self, x1[: self.spec.act_dim])

    def act(self, obs: Obs):
        """Deterministic env action: the flow from x_0 = 0 (FlowRL's deterministic evaluation)."""
        return self.to_env(self.forward(obs, jnp.zeros(2 * self.spec.act_dim)))

    def act_stochastic(self, obs: Obs, noise):
        """Env action of the flow from x_0 = `noise`, standard normal [2 * act_dim]."""
        return self.to_env(self.forward(obs, noise))

    def noise_shape(self) -> tuple[int, ...]:
        """Shape of the noise one stochastic action consumes: the prior sample x_0."""
        return (2 * self.spec.act_dim,)


def make_genpo(spec: PolicySpec, mix: float, *, key: Key) -> GenPOFlow:
    """A freshly initialised GenPO actor: v(h, s, t) = output_scale * MLP([s_normalized, h, emb(t)])."""
    if not 0 < mix <= 1:
        raise ValueError(f"the flow mix parameter p must be in (0, 1], got {mix}")
    velocity = DriftMLP(
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
    return GenPOFlow(spec, mix, RunningNorm.init(spec.obs_dim, spec.obs_clip, spec.obs_eps), velocity)


def save_genpo(actor: GenPOFlow, directory) -> Path:
    """config.json ({"format", "mix", "genpo_spec"}) + model.safetensors keyed by pytree path; no pickle."""
    tensors = policy_tensors(actor)
    config = {"format": FORMAT, "mix": actor.mix, "genpo_spec": actor.spec.to_dict()}
    return write_policy_files(directory, tensors, {"format": FORMAT}, config)


def load_genpo(config: dict, config_path: Path, weights: Weights) -> GenPOFlow:
    """The actor described by a GenPO config.json (already parsed) with `weights`."""
    try:
        spec = PolicySpec.from_dict(config["genpo_spec"])
        skeleton = eqx.filter_eval_shape(make_genpo, spec, config["mix"], key=jax.random.key(0))
    except KeyError as err:
        raise PolicyFormatError(f"{config_path} lacks {err} required by a GenPO policy") from err
    except (TypeError, ValueError) as err:
        raise PolicyFormatError(f"{config_path}: invalid GenPO policy config: {err}") from err
    return load_into(skeleton, weights)
