"""Time embeddings and the drift network f_theta(a, t, s) = output_scale * MLP([s, a, emb(t)])."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._types import Action, Key, Obs, Scalar

ACTIVATIONS = {
    "silu": jax.nn.silu,
    "elu": jax.nn.elu,
    "relu": jax.nn.relu,
    "tanh": jnp.tanh,
    "gelu": jax.nn.gelu,
    "mish": jax.nn.mish,
}


class SinusoidalEmbedding(eqx.Module):
    """Fixed features [cos(2^k t), sin(2^k t)], k = 0..dim/2-1 (the FPO reference's embedding)."""

    dim: int = eqx.field(static=True)

    def __call__(self, t: Scalar) -> Float[Array, " dim"]:
        freqs = 2.0 ** jnp.arange(self.dim // 2, dtype=jnp.float32)
        return jnp.concatenate([jnp.cos(freqs * t), jnp.sin(freqs * t)])


class FourierEmbedding(eqx.Module):
    """Learnable Fourier features [cos(2 pi t w), sin(2 pi t w)] followed by a dim->dim->dim mish MLP.

    This is FlowRL's time embedding (kernel initialised from N(0, 0.2^2)), used by its Gym configs.
    """

    freqs: Float[Array, " half"]
    mlp: eqx.nn.MLP

    def __init__(self, dim: int, *, key: Key):
        k_freq, k_mlp = jax.random.split(key)
        self.freqs = 0.2 * jax.random.normal(k_freq, (dim // 2,))
        self.mlp = eqx.nn.MLP(dim, dim, dim, depth=1, activation=jax.nn.mish, key=k_mlp)

    def __call__(self, t: Scalar) -> Float[Array, " dim"]:
        angle = 2 * jnp.pi * t * self.freqs
        return self.mlp(jnp.concatenate([jnp.cos(angle), jnp.sin(angle)]))


class DriftMLP(eqx.Module):
    """f_theta(a, t, s) = output_scale * MLP([s_normalized, a, emb(t)]) for a single sample."""

    embedding: SinusoidalEmbedding | FourierEmbedding
    mlp: eqx.nn.MLP
    output_scale: float = eqx.field(static=True)

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        width: int,
        depth: int,
        activation: str,
        time_embedding: str,
        time_embed_dim: int,
        output_scale: float,
        *,
        key: Key,
    ):
        k_emb, k_mlp = jax.random.split(key)
        if time_embedding == "fourier":
            self.embedding = FourierEmbedding(time_embed_dim, key=k_emb)
        else:
            self.embedding = SinusoidalEmbedding(time_embed_dim)
        in_size = obs_dim + act_dim + time_embed_dim
        self.mlp = eqx.nn.MLP(in_size, act_dim, width, depth, activation=ACTIVATIONS[activation], key=k_mlp)
        self.output_scale = output_scale

    def __call__(self, obs_normalized: Obs, action: Action, t: Scalar) -> Action:
        features = jnp.concatenate([obs_normalized, action, self.embedding(t)])
        return self.output_scale * self.mlp(features)
