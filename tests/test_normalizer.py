"""The observation normalizer: Welford merge against numpy, frozen for gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gsbpolicy._normalizer import RunningNorm

pytestmark = pytest.mark.strict_promotion


@settings(max_examples=25, deadline=None)
@given(sizes=st.lists(st.integers(1, 40), min_size=1, max_size=5), seed=st.integers(0, 1000))
def test_merge_matches_statistics_of_concatenated_batches(sizes, seed):
    rng = np.random.default_rng(seed)
    batches = [rng.normal(rng.uniform(-5, 5), rng.uniform(0.1, 4), (n, 3)).astype(np.float32) for n in sizes]
    norm = RunningNorm.init(3)
    for batch in batches:
        norm = norm.update(jnp.asarray(batch))
    everything = np.concatenate(batches).astype(np.float64)
    np.testing.assert_allclose(norm.mean, everything.mean(0), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(norm.var, everything.var(0), rtol=1e-3, atol=1e-4)
    assert float(norm.count) == len(everything)


def test_normalizes_clips_and_stops_gradients():
    norm = RunningNorm(jnp.array([1.0, -2.0]), jnp.array([4.0, 0.25]), jnp.array(10.0), clip=5.0)
    np.testing.assert_allclose(norm(jnp.array([3.0, -1.0])), [1.0, 2.0], rtol=1e-6)
    np.testing.assert_allclose(norm(jnp.array([1e6, -1e6])), [5.0, -5.0])
    grads = jax.grad(lambda n: jnp.sum(n(jnp.array([3.0, -1.0]))))(norm)
    np.testing.assert_array_equal(grads.mean, 0.0)
    np.testing.assert_array_equal(grads.var, 0.0)
