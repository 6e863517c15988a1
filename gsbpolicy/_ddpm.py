"""DPPO's DDPM policy as a Gaussian Markov chain in the shared Euler-Maruyama convention.

A DDPM with K steps denoises x_K ~ N(0, I) to x_0 through x_{k-1} ~ N(mu_k, s_k^2). Any Gaussian chain
a^(n+1) ~ N(m_n(a^(n)), s_n^2 I) is exactly the Euler-Maruyama step of `_sde` with drift
(m_n - a^(n)) / dt and diffusion coefficient s_n / sqrt(dt), so a DDPM policy is a `FlowPolicy` whose
drift is computed from the network's noise prediction: generation step n is DDPM step k = K - 1 - n
(a^(0) = x_K, a^(N) = x_0). The schedule and posterior follow irom-princeton/dppo (`cosine_beta_schedule`
with s = 0.008, x0_hat clipped to [-1, 1] (`denoised_clip_value`), posterior variance clipped at 1e-20
before its square root, std floored at the minimum std for sampling and likelihood alike).
"""

import functools

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from ._schedules import AbstractSigmaSchedule
from ._types import Action, Scalar

X0_CLIP = 1.0
"""|x0_hat| bound of the posterior mean (DPPO's `denoised_clip_value`)."""


def cosine_betas(num_steps: int, s: float = 0.008) -> np.ndarray:
    """beta_k, k = 0..K-1, of DPPO's `cosine_beta_schedule` (Nichol & Dhariwal's cosine schedule)."""
    steps = num_steps + 1
    x = np.linspace(0, steps, steps)
    alphas_cumprod = np.cos(((x / steps) + s) / (1 + s) * np.pi * 0.5) ** 2
    alphas_cumprod = alphas_cumprod / alphas_cumprod[0]
    return np.clip(1 - alphas_cumprod[1:] / alphas_cumprod[:-1], 0, 0.999)


@functools.cache
def step_tables(num_steps: int) -> dict[str, tuple[float, ...]]:
    """Per generation step n (DDPM k = K - 1 - n): x0_hat and posterior-mean coefficients and std."""
    betas = cosine_betas(num_steps)
    alphas = 1.0 - betas
    cumprod = np.cumprod(alphas)
    cumprod_prev = np.concatenate([[1.0], cumprod[:-1]])
    variance = betas * (1.0 - cumprod_prev) / (1.0 - cumprod)
    tables = {
        "x0_from_x": np.sqrt(1.0 / cumprod),
        "x0_from_eps": np.sqrt(1.0 / cumprod - 1.0),
        "mean_from_x0": betas * np.sqrt(cumprod_prev) / (1.0 - cumprod),
        "mean_from_x": (1.0 - cumprod_prev) * np.sqrt(alphas) / (1.0 - cumprod),
        "std": np.exp(0.5 * np.log(np.maximum(variance, 1e-20))),
    }
    return {name: tuple(float(v) for v in table[::-1]) for name, table in tables.items()}


def _step_index(t: Scalar, num_steps: int):
    return jnp.clip(jnp.round(t * num_steps).astype(jnp.int32), 0, num_steps - 1)


def drift(eps_hat: Action, a: Action, t: Scalar, num_steps: int) -> Action:
    """(mu - a) / dt for the posterior mean mu of DDPM step k = K - 1 - round(t K) given eps_hat."""
    n = _step_index(t, num_steps)
    coef = {name: jnp.asarray(table, a.dtype)[n] for name, table in step_tables(num_steps).items()}
    x0_hat = jnp.clip(coef["x0_from_x"] * a - coef["x0_from_eps"] * eps_hat, -X0_CLIP, X0_CLIP)
    mean = coef["mean_from_x0"] * x0_hat + coef["mean_from_x"] * a
    return (mean - a) * num_steps


class DDPMSigma(AbstractSigmaSchedule):
    """sigma(t_n) = max(std_k, min_std) / sqrt(dt): the DDPM posterior std as a diffusion coefficient."""

    num_steps: int = eqx.field(static=True)
    min_std: float = eqx.field(static=True)

    def __call__(self, t):
        std = jnp.maximum(jnp.asarray(step_tables(self.num_steps)["std"], jnp.float32), self.min_std)
        return std[_step_index(t, self.num_steps)] * jnp.sqrt(float(self.num_steps))
