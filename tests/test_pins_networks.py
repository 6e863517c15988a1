"""Pins for the drift network and its time embeddings (gsbpolicy/_networks.py): each constant, each operand and
each constructor argument in its own closed-form check, with the networks built in the test (the session
fixtures build them too, but a mutation run must see which test reads which line)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsbpolicy._networks import ACTIVATIONS, DriftMLP, FourierEmbedding, SinusoidalEmbedding

KEY = jax.random.key(3)


@pytest.mark.parametrize("t", [0.0, 0.3, 0.9])
def test_sinusoidal_embedding_is_cos_then_sin_of_powers_of_two(t):
    k = np.arange(4, dtype=np.float64)
    expected = np.concatenate([np.cos(2.0**k * t), np.sin(2.0**k * t)])
    np.testing.assert_allclose(SinusoidalEmbedding(8)(jnp.float32(t)), expected, atol=1e-6)


def test_sinusoidal_embedding_has_dim_entries():
    assert SinusoidalEmbedding(6)(jnp.float32(0.5)).shape == (6,)


def test_fourier_embedding_draws_its_frequencies_from_n_0_02_with_the_first_subkey():
    embedding = FourierEmbedding(6, key=KEY)
    k_freq, k_mlp = jax.random.split(KEY)
    np.testing.assert_array_equal(embedding.freqs, 0.2 * jax.random.normal(k_freq, (3,)))
    reference = eqx.nn.MLP(6, 6, 6, depth=1, activation=jax.nn.mish, key=k_mlp)
    for ours, theirs in zip(jax.tree.leaves(embedding.mlp), jax.tree.leaves(reference), strict=True):
        np.testing.assert_array_equal(ours, theirs)
    mlp = embedding.mlp
    assert (mlp.in_size, mlp.out_size, mlp.width_size, mlp.depth, mlp.activation) == (6, 6, 6, 1, jax.nn.mish)


def test_fourier_embedding_is_its_mlp_of_cos_then_sin_of_two_pi_t_w():
    embedding = FourierEmbedding(6, key=KEY)
    t = 0.37
    angle = 2 * np.pi * t * np.asarray(embedding.freqs, np.float64)
    features = jnp.asarray(np.concatenate([np.cos(angle), np.sin(angle)]), jnp.float32)
    np.testing.assert_allclose(embedding(jnp.float32(t)), embedding.mlp(features), atol=1e-5)


@pytest.mark.parametrize("kind", ["sinusoidal", "fourier"])
def test_drift_is_output_scale_times_the_mlp_of_obs_action_and_time_features(kind):
    drift = DriftMLP(3, 2, width=5, depth=2, activation="tanh", time_embedding=kind, time_embed_dim=4,
                     output_scale=0.25, key=KEY)  # fmt: skip
    k_emb, k_mlp = jax.random.split(KEY)
    assert isinstance(drift.embedding, FourierEmbedding if kind == "fourier" else SinusoidalEmbedding)
    if kind == "fourier":
        np.testing.assert_array_equal(drift.embedding.freqs, FourierEmbedding(4, key=k_emb).freqs)
    reference = eqx.nn.MLP(3 + 2 + 4, 2, 5, 2, activation=jnp.tanh, key=k_mlp)
    for ours, theirs in zip(jax.tree.leaves(drift.mlp), jax.tree.leaves(reference), strict=True):
        np.testing.assert_array_equal(ours, theirs)
    assert (drift.mlp.in_size, drift.mlp.out_size, drift.mlp.width_size, drift.mlp.depth) == (9, 2, 5, 2)
    assert drift.mlp.activation is ACTIVATIONS["tanh"] and drift.output_scale == 0.25
    obs, action, t = jnp.array([0.1, -0.2, 0.3]), jnp.array([0.5, -0.5]), jnp.float32(0.4)
    features = jnp.concatenate([obs, action, drift.embedding(t)])
    np.testing.assert_allclose(drift(obs, action, t), 0.25 * drift.mlp(features), rtol=1e-6)


def test_each_activation_name_is_that_function():
    x = jnp.linspace(-2.0, 2.0, 9)
    expected = {"silu": x / (1 + jnp.exp(-x)), "elu": jnp.where(x > 0, x, jnp.expm1(x)), "relu": jnp.maximum(x, 0),
                "tanh": jnp.tanh(x), "gelu": jax.nn.gelu(x), "mish": x * jnp.tanh(jnp.log1p(jnp.exp(x)))}  # fmt: skip
    assert set(ACTIVATIONS) == set(expected)
    for name, value in expected.items():
        np.testing.assert_allclose(ACTIVATIONS[name](x), value, atol=1e-6, err_msg=name)
