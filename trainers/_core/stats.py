"""Training-episode statistics from rollouts (undiscounted, unscaled returns of finished episodes)."""

import numpy as np


class EpisodeStats:
    """Running per-env return and length; reports the episodes that finished in the last rollout."""

    def __init__(self, num_envs: int):
        self.totals = np.zeros(num_envs)
        self.lengths = np.zeros(num_envs, np.int64)
        self._finished: list[tuple[float, int]] = []

    def update(self, rewards: np.ndarray, dones: np.ndarray, num_unrolls: int) -> None:
        """Consume a rollout laid out [num_unrolls * B, T] (sequences of consecutive unrolls)."""
        num_envs = self.totals.shape[0]

        def per_env_time(x):  # [U * B, T] -> [B, U * T] in time order
            return x.reshape(num_unrolls, num_envs, -1).transpose(1, 0, 2).reshape(num_envs, -1)

        rewards, dones = per_env_time(rewards), per_env_time(dones)
        self._finished = []
        for t in range(rewards.shape[1]):
            self.totals += rewards[:, t]
            self.lengths += 1
            for i in np.flatnonzero(dones[:, t]):
                self._finished.append((float(self.totals[i]), int(self.lengths[i])))
            self.totals[dones[:, t]] = 0.0
            self.lengths[dones[:, t]] = 0

    def summary(self) -> dict:
        if not self._finished:
            return {"train/episodes": 0}
        returns, lengths = zip(*self._finished, strict=True)
        return {
            "train/episodes": len(returns),
            "train/episode_return": float(np.mean(returns)),
            "train/episode_length": float(np.mean(lengths)),
        }

    def arrays(self) -> dict:
        return {"totals": self.totals, "lengths": self.lengths}

    def load(self, arrays: dict) -> None:
        self.totals, self.lengths = np.array(arrays["totals"]), np.array(arrays["lengths"])
