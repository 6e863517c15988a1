"""`GSBPolicy`: the user-facing policy object (predict, from_pretrained, save_pretrained, push_to_hub).

It is a plain class holding a policy module of any kind (a `FlowPolicy`, a `GaussianActor` or a
`GenPOFlow`): an Equinox module is a frozen dataclass and cannot inherit huggingface_hub's
`ModelHubMixin` (its `__new__` assigns an attribute). `predict` follows Stable-Baselines3's contract, so
SB3's `evaluate_policy` scores a `GSBPolicy` unchanged. Talking to the Hub is `gsbpolicy.hub`'s job.
"""

import os
from pathlib import Path

import equinox as eqx
import jax
import numpy as np

from export.runtime import check_deterministic, check_noise, check_observation

from ._kinds import load_files, load_policy, policy_kind, save_policy
from ._policy import FlowPolicy, numpy_noise
from .hub import download_policy_files, local_policy_folder, upload_policy


class GSBPolicy:
    """A trained policy ready to act: numpy in, numpy out, actions inside the env's bounds.

    Args:
        policy: the policy module: a `FlowPolicy` (GSB-MDPO, DPPO, FPO), a `GaussianActor` (Gaussian PPO,
            SB3 PPO) or a `GenPOFlow` (GenPO).
        seed: seed of the host-side noise generator used by stochastic (`deterministic=False`) calls.
    """

    def __init__(self, policy, *, seed: int = 0):
        self.kind = policy_kind(policy)
        """`flow`, `gaussian` or `genpo`."""
        self.name_or_path: Path | str | None = None
        """The folder or Hub repo id `from_pretrained` loaded it from (None for a policy made in this process)."""
        self.policy = policy
        self._params, static = eqx.partition(policy, eqx.is_array)
        self._rng = np.random.default_rng(seed)
        # One jit per policy, closing over the static half: a call then only flattens the small array
        # pytree (hashing a static Module argument on every call would cost more than the network).
        # Single observations get their own unbatched function, the fastest path for control loops.
        act = lambda p, o: eqx.combine(p, static).act(o)  # noqa: E731
        act_stochastic = lambda p, o, n: eqx.combine(p, static).act_stochastic(o, n)  # noqa: E731
        self._act_single = jax.jit(act)
        self._act_batch = jax.jit(jax.vmap(act, in_axes=(None, 0)))
        self._act_stochastic_single = jax.jit(act_stochastic)
        self._act_stochastic_batch = jax.jit(jax.vmap(act_stochastic, in_axes=(None, 0, 0)))

    # ----------------------------------------------------------------- description
    @property
    def spec(self):
        """The policy's architecture, sampler and action-space description (a `PolicySpec` for flow and
        GenPO policies, a `GaussianSpec` for Gaussian ones)."""
        return self.policy.spec

    @property
    def noise_shape(self) -> tuple[int, ...]:
        """Shape of the noise one stochastic action consumes: [N+1, act_dim] for a flow policy (row 0 is
        a^(0)), [act_dim] for a Gaussian one, [2 * act_dim] (the prior sample x_0) for GenPO."""
        return self.policy.noise_shape()

    @property
    def observation_space(self):
        """A gymnasium `Box` of the observation shape (unbounded)."""
        import gymnasium

        return gymnasium.spaces.Box(-np.inf, np.inf, (self.spec.obs_dim,), np.float32)

    @property
    def action_space(self):
        """A gymnasium `Box` with the policy's action bounds."""
        import gymnasium

        spec = self.spec
        if spec.action_low is None:  # a flow policy with squash "none" and no bounds
            return gymnasium.spaces.Box(-np.inf, np.inf, (spec.act_dim,), np.float32)
        low, high = np.asarray(spec.action_low, np.float32), np.asarray(spec.action_high, np.float32)
        return gymnasium.spaces.Box(low, high, dtype=np.float32)

    def set_seed(self, seed: int) -> None:
        """Reseed the noise generator of stochastic calls."""
        self._rng = np.random.default_rng(seed)

    def __repr__(self) -> str:
        s = self.spec
        steps = "" if self.kind == "gaussian" else f", num_steps={s.num_steps}"
        return (
            f"GSBPolicy(kind={self.kind!r}, env_id={s.env_id!r}, obs_dim={s.obs_dim}, act_dim={s.act_dim}"
            f"{steps}, mlp={s.depth}x{s.width} {s.activation})"
        )

    # ----------------------------------------------------------------- acting
    def _check_obs(self, obs) -> tuple[np.ndarray, bool]:
        """Validate an observation (single [obs_dim] or batch [B, obs_dim]); returns it as float32."""
        return check_observation(obs, self.spec.obs_dim)

    def _check_noise(self, noise, batch_shape: tuple[int, ...], name: str = "noise") -> np.ndarray:
        return check_noise(noise, (*batch_shape, *self.noise_shape), name)

    def _run(self, obs: np.ndarray, single: bool, noise: np.ndarray | None) -> np.ndarray:
        if noise is None:
            fn = self._act_single if single else self._act_batch
            action = np.asarray(fn(self._params, obs))
        else:
            fn = self._act_stochastic_single if single else self._act_stochastic_batch
            action = np.asarray(fn(self._params, obs, noise))
        # Inputs and weights are finite, so only an overflow inside the network gets here; an env must
        # never be stepped with NaN (the bounds are already enforced by `FlowPolicy.to_env`).
        if not np.isfinite(action).all():
            raise FloatingPointError("the policy produced a NaN action for a finite observation (overflow)")
        return action

    def act(self, obs, noise: np.ndarray | None = None) -> np.ndarray:
        """Env action(s) for a single observation or a batch; deterministic ODE unless `noise` is given.

        `noise` has shape `noise_shape` (single) or [B, *noise_shape] (batch). Each batch size is
        compiled once and cached. Observations and noise must be finite (ValueError otherwise); actions are
        always inside the action bounds, and a NaN action (only possible through an overflow in the
        network) raises FloatingPointError instead of reaching the env.
        """
        obs, single = self._check_obs(obs)
        if noise is not None:
            noise = self._check_noise(noise, obs.shape[:-1])
        return self._run(obs, single, noise)

    def predict(self, observation, state=None, episode_start=None, deterministic: bool = True):
        """SB3-style prediction: `(action, state)`, with actions in the env's bounds (checks as in `act`).

        Args:
            observation: one observation [obs_dim] or a batch [B, obs_dim].
            state: recurrent state; returned unchanged (the policy is not recurrent).
            episode_start: ignored (kept for SB3 compatibility).
            deterministic: the deterministic policy if True (a flow's ODE from a^(0) = 0, a Gaussian's
                mean, GenPO's flow from x_0 = 0), else a sample with noise from this object's generator.
        """
        obs, single = self._check_obs(observation)
        noise = None
        if not check_deterministic(deterministic):
            noise = numpy_noise(self._rng, self.noise_shape, 1 if single else obs.shape[0])
            noise = noise[0] if single else noise
        return self._run(obs, single, noise), state

    # ----------------------------------------------------------------- research access
    def _check_batch(self, obs, rows, name: str) -> tuple[np.ndarray, np.ndarray]:
        if not isinstance(self.policy, FlowPolicy):
            raise TypeError(
                f"paths and their log-densities belong to flow policies; this is a {self.kind} policy"
            )
        obs, single = self._check_obs(obs)
        if single:
            raise ValueError(f"observation shape {obs.shape} is one observation; pass a batch [B, obs_dim]")
        return obs, self._check_noise(rows, obs.shape[:1], name)

    def sample(self, obs, noise):
        """Batched `FlowPolicy.sample`: paths, step log-densities and drifts for obs [B, obs_dim]."""
        return jax.vmap(self.policy.sample)(*self._check_batch(obs, noise, "noise"))

    def log_prob(self, obs, path):
        """Batched path log-density log P(a^(0:N) | s) for obs [B, obs_dim] and paths [B, N+1, act_dim]."""
        return jax.vmap(self.policy.log_prob)(*self._check_batch(obs, path, "path"))

    # ----------------------------------------------------------------- persistence
    def save_pretrained(self, save_directory: str | os.PathLike) -> Path:
        """Write `config.json` and `model.safetensors` into `save_directory`."""
        return save_policy(self.policy, save_directory)

    @classmethod
    def from_pretrained(
        cls,
        repo_id_or_path: str | os.PathLike,
        revision: str | None = None,
        *,
        cache_dir: str | os.PathLike | None = None,
        force_download: bool = False,
        local_files_only: bool = False,
        token: str | bool | None = None,
        seed: int = 0,
        timeout: float | None = None,
    ) -> "GSBPolicy":
        """Load a policy of any kind (flow, Gaussian, GenPO: its config.json says which) from a local
        policy folder or a Hugging Face Hub repo id.

        Hub files go through huggingface_hub's cache, so `HF_HUB_OFFLINE=1` and `local_files_only=True`
        load a previously downloaded revision without any network access, and a cached revision is used when
        the Hub cannot be reached. `timeout`: seconds to wait for each Hub answer (default
        $GSBPOLICY_HUB_TIMEOUT, else huggingface_hub's 10 s); a Hub that does not answer in time, answers
        with an error or answers something else is a `HubRequestError` naming it and its answer.
        """
        name = os.fspath(repo_id_or_path)
        folder = local_policy_folder(name)
        if folder is not None:
            policy = cls(load_policy(folder), seed=seed)
            policy.name_or_path = folder  # where its results.json is (the env it was trained on)
            return policy
        options = {
            "revision": revision,
            "cache_dir": cache_dir,
            "force_download": force_download,
            "local_files_only": local_files_only,
            "token": token,
        }
        policy = cls(load_files(*download_policy_files(name, options, timeout)), seed=seed)
        policy.name_or_path = name
        return policy

    def push_to_hub(
        self,
        repo_id: str,
        *,
        private: bool | None = None,
        token: str | None = None,
        commit_message: str = "Upload gsbpolicy policy",
        revision: str | None = None,
        create_pr: bool = False,
        extra_files: dict[str, str | os.PathLike] | None = None,
        timeout: float | None = None,
    ):
        """Create the repo if needed and upload the policy (plus `extra_files`, {name in repo: local path})
        in one commit. Returns huggingface_hub's `CommitInfo`. `timeout` as in `from_pretrained`."""
        options = {"commit_message": commit_message, "revision": revision, "create_pr": create_pr}
        return upload_policy(
            self.save_pretrained,
            repo_id,
            extra_files or {},
            private=private,
            token=token,
            timeout=timeout,
            **options,
        )
