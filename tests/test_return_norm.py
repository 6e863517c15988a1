"""Reward normalisation by the running std of the discounted return (`rollout.normalize_rewards`)."""

import jax.numpy as jnp
import numpy as np

from trainers._core.return_norm import ReturnNorm


def plain_returns(reward, done, num_envs, gamma, start=None):
    """VecNormalize's per-step loop over the rollout layout [U * B, T] (unroll-major)."""
    unrolls, steps = reward.shape[0] // num_envs, reward.shape[1]
    ret = np.zeros(num_envs) if start is None else np.array(start, float)
    seen = []
    for u in range(unrolls):
        for t in range(steps):
            for b in range(num_envs):
                ret[b] = gamma * ret[b] + reward[u * num_envs + b, t]
                seen.append(ret[b])
                if done[u * num_envs + b, t]:
                    ret[b] = 0.0
    return ret, np.array(seen)


def test_update_follows_each_env_across_unrolls_and_episode_ends():
    rng = np.random.default_rng(0)
    num_envs, gamma = 3, 0.9
    norm = ReturnNorm.init(num_envs)
    start, seen_all = None, []
    for _ in range(2):  # two iterations: the returns carry over, the statistics merge
        reward = rng.normal(size=(2 * num_envs, 5)).astype(np.float32)
        done = rng.random((2 * num_envs, 5)) < 0.2
        norm = norm.update(jnp.asarray(reward), jnp.asarray(done), gamma)
        start, seen = plain_returns(reward, done, num_envs, gamma, start)
        seen_all.append(seen)
    seen_all = np.concatenate(seen_all)
    np.testing.assert_allclose(norm.returns, start, atol=1e-5)
    np.testing.assert_allclose(norm.stats.mean[0], seen_all.mean(), atol=1e-5)
    np.testing.assert_allclose(norm.stats.var[0], seen_all.var(), rtol=1e-5)
    np.testing.assert_allclose(norm.reward_scale(), 1 / np.sqrt(seen_all.var() + 1e-8), rtol=1e-5)
