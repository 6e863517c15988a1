"""Fitting a flow policy to target actions by discrete Brownian-bridge matching on the sampler's own step
variances (the toy analysis's old policy, and behaviour cloning from demonstrations).

Along Gaussian random walks with the sampler's step variances s_n = sigma(t_n)^2 dt, from a^(0) ~ N(0, I)
pinned at a target x1, the drift is regressed on the bridge's mean increment s_n (x1 - a_n) / ((nu_N - nu_n)
dt), nu_n = sum_{m<n} s_m. The Markov chain with that drift has (up to the last step's noise) the targets
as its a^(N) marginal. A noise-free sampler (sigma = 0, FPO's) is the limit of equal variances: straight
paths from a^(0) to x1, i.e. conditional flow matching.
"""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from gsbpolicy import FlowPolicy


def _step_variances(policy: FlowPolicy) -> jax.Array:
    """s_n; equal ones where every sigma is 0 (the bridge's limit shape: its targets do not depend on the
    variances' scale, only on their ratios)."""
    step_var = policy.sigmas() ** 2 / policy.spec.num_steps
    return jnp.where(jnp.all(step_var == 0), jnp.ones_like(step_var), step_var)


def bridge_matching_loss(policy: FlowPolicy, obs, x0, x1, steps, z):
    """The regression loss on a batch: observations [B, obs_dim], prior draws x0 [B, act_dim], targets
    x1 [B, act_dim] (pre-squash actions a^(N)), step indices n [B] in 0..N-1 and standard normal draws z
    [B, act_dim] for the bridge's spread."""
    num_steps = policy.spec.num_steps
    dt = 1.0 / num_steps
    step_var = _step_variances(policy)
    nu = jnp.concatenate([jnp.zeros(1), jnp.cumsum(step_var)])  # nu_0..nu_N
    noisy = jnp.any(policy.sigmas() > 0)
    w = (nu[steps] / nu[-1])[:, None]
    bridge_std = jnp.where(noisy, jnp.sqrt(nu[steps] * (nu[-1] - nu[steps]) / nu[-1]), 0.0)[:, None]
    an = x0 + w * (x1 - x0) + bridge_std * z
    remaining = (nu[-1] - nu[steps])[:, None]
    target = step_var[steps][:, None] * (x1 - an) / (remaining * dt)
    pred = jax.vmap(policy.drift)(obs, an, steps / num_steps)
    # Weighted by the remaining variance so the near-deterministic last steps do not dominate.
    return jnp.mean(jnp.sum((pred - target) ** 2, -1) * remaining[:, 0])


def _trainable(policy: FlowPolicy):
    """Every inexact array except the observation statistics (fixed by the caller, never fitted)."""
    mask = jax.tree.map(eqx.is_inexact_array, policy)
    return eqx.tree_at(lambda p: p.normalizer, mask, replace_fn=lambda n: jax.tree.map(lambda _: False, n))


def fit(
    policy: FlowPolicy,
    loss: Callable[[FlowPolicy, object, jax.Array], jax.Array],
    data,
    num_steps: int,
    key,
    lr: float = 1e-3,
    chunk: int = 1000,
    on_chunk: Callable[[int, float], None] | None = None,
) -> FlowPolicy:
    """`num_steps` Adam steps on `loss(policy, data, key)` (a fresh key per step), run as jitted scans of
    `chunk` steps; `on_chunk(steps done, last loss)` after each. `data` (a pytree of arrays, e.g. a dataset)
    is an argument of the jitted scan rather than a constant baked into it. The observation normaliser is
    left as it is."""
    optimizer = optax.adam(lr)
    params, static = eqx.partition(policy, _trainable(policy))
    opt_state = optimizer.init(params)

    def step(carry, key, data):
        params, opt_state = carry
        value, grads = jax.value_and_grad(lambda p: loss(eqx.combine(p, static), data, key))(params)
        updates, opt_state = optimizer.update(grads, opt_state)
        return (eqx.apply_updates(params, updates), opt_state), value

    @eqx.filter_jit
    def steps(params, opt_state, keys, data):  # a chunk of steps per call: one dispatch, and a progress line
        (params, opt_state), values = jax.lax.scan(lambda c, k: step(c, k, data), (params, opt_state), keys)
        return params, opt_state, values[-1]

    keys = jax.random.split(key, num_steps)
    for start in range(0, num_steps, chunk):
        params, opt_state, value = steps(params, opt_state, keys[start : start + chunk], data)
        if on_chunk is not None:
            on_chunk(min(start + chunk, num_steps), float(value))
    return eqx.combine(params, static)
