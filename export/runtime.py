"""`OnnxPolicy`: run an exported policy with numpy and onnxruntime only (no JAX), e.g. on a robot.

    from export.runtime import OnnxPolicy

    policy = OnnxPolicy("policy.onnx")
    action, _ = policy.predict(obs)  # the deterministic policy, actions inside the env's bounds

`predict` has `GSBPolicy.predict`'s Stable-Baselines3 signature, so `gsbpolicy.evaluate` and SB3's
`evaluate_policy` score an `OnnxPolicy` unchanged. It runs every policy kind `export.onnx` writes (flow,
Gaussian, GenPO); dimensions, noise shape and mode are read from the ONNX metadata.

The metadata's robot contract (docs/robot.md, "The contract") is read, checked and exposed: `obs_names`,
`obs_units`, `obs_low`/`obs_high` (inf where unbounded), `act_names`, `act_units`, `action_low`/`action_high`,
`control_dt`, `sampler` and `provenance`. Observations are checked against it: a dict keyed by `obs_names`
is accepted, and an entry outside the env's observation bounds is refused. A file exported before the contract
existed still loads, with a one-line notice (logged as a warning on the `onnx_policy` logger).

`python -m hub_cards.publish` also uploads this file, byte for byte, as `onnx_policy.py` next to
`policy.onnx`, so a robot needs only those two files, numpy and onnxruntime. It must therefore stay
standalone: import nothing but the standard library, numpy and onnxruntime, never this package (a test
runs the model card's snippet with it in a process where importing jax, gsbpolicy or export fails). Its
input checks (`check_observation`, `check_noise`, `check_finite`, `check_deterministic`) are therefore the
library's too: `GSBPolicy` imports them from here, and onnxruntime is imported only when a session is made.
"""

import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import onnxruntime

_REQUIRED_METADATA = ("mode", "obs_dim", "act_dim")
CONTRACT_VERSION = 1
"""The newest contract version this runtime reads (export.contract.CONTRACT_VERSION writes it)."""
_CONTRACT_JSON = (
    "obs_names",
    "obs_units",
    "obs_low",
    "obs_high",
    "act_names",
    "act_units",
    "control_dt",
    "sampler",
    "provenance",
)
_log = logging.getLogger("onnx_policy")


def _onnxruntime():
    """onnxruntime, the one dependency beyond numpy, imported when a session is made: the checks below serve
    `GSBPolicy` too, which must import without it."""
    try:
        import onnxruntime
    except ModuleNotFoundError as err:  # say how to get it
        raise ModuleNotFoundError(
            'OnnxPolicy needs onnxruntime: pip install onnxruntime (or, in a clone of gsbpolicy, pip install -c tests/constraints.txt -e ".[onnx]")',
            name=err.name,
        ) from err
    return onnxruntime


def session_options(intra_op_num_threads: int = 1) -> "onnxruntime.SessionOptions":
    """onnxruntime options used for deployment and for verification: all graph optimisations on.

    One intra-op thread is the right default for single observations: a 256-wide layer is too small
    to split, and spinning worker threads would compete with the control loop for cores.
    """
    ort = _onnxruntime()
    options = ort.SessionOptions()
    options.intra_op_num_threads = intra_op_num_threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return options


def make_session(
    model: str | os.PathLike | bytes, intra_op_num_threads: int = 1
) -> "onnxruntime.InferenceSession":
    """A CPU inference session for a model file or serialized model bytes."""
    source = model if isinstance(model, bytes) else os.fspath(model)
    return _onnxruntime().InferenceSession(
        source, session_options(intra_op_num_threads), providers=["CPUExecutionProvider"]
    )


class OnnxPolicy:
    """An exported policy: numpy in, numpy out, actions inside the env's bounds.

    Args:
        path: an ONNX file written by `export.onnx` (`ode` or `sde` mode).
        intra_op_num_threads: onnxruntime intra-op threads (1 suits single observations).
        seed: seed of the noise generator used by stochastic (`deterministic=False`) calls.
    """

    def __init__(self, path: str | os.PathLike, *, intra_op_num_threads: int = 1, seed: int = 0):
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"ONNX policy not found: {self.path}")
        try:
            self.session = make_session(self.path, intra_op_num_threads)
        except Exception as err:  # onnxruntime raises its own types (InvalidProtobuf, Fail, ...)
            message = " ".join(str(err).split())
            raise ValueError(f"{self.path} is not a loadable ONNX model ({message})") from err
        self.metadata = dict(self.session.get_modelmeta().custom_metadata_map)
        missing = [key for key in _REQUIRED_METADATA if key not in self.metadata]
        if "noise_shape" not in self.metadata and "num_steps" not in self.metadata:
            missing.append("noise_shape")
        if missing:
            raise ValueError(f"{self.path} lacks metadata {missing}; export it with `python -m export.onnx`")
        try:
            self._read_metadata()
            self._read_contract()
        except (ValueError, TypeError, RecursionError) as err:  # json's and int()'s errors are ValueErrors
            raise ValueError(
                f"{self.path} has unreadable metadata ({' '.join(str(err).split())}); export it again with "
                "`python -m export.onnx`"
            ) from None
        self._input_names = [value.name for value in self.session.get_inputs()]
        self._output_names = [value.name for value in self.session.get_outputs()]
        self._rng = np.random.default_rng(seed)

    def _read_metadata(self) -> None:
        metadata = self.metadata
        self.mode = metadata["mode"]
        if self.mode not in ("ode", "sde"):
            raise ValueError(f"mode {self.mode!r} is neither 'ode' nor 'sde'")
        self.obs_dim, self.act_dim = _count(metadata, "obs_dim"), _count(metadata, "act_dim")
        self.kind = metadata.get("kind", "flow")  # exports before other kinds existed were flows
        self.num_steps = _count(metadata, "num_steps") if "num_steps" in metadata else None
        """Generation steps N (None for a Gaussian policy, which has none)."""
        if "noise_shape" in metadata:
            self.noise_shape = tuple(
                _count({"noise_shape": n}, "noise_shape") for n in json.loads(metadata["noise_shape"])
            )
        else:  # flow exports written before the shape was recorded
            self.noise_shape = (self.num_steps + 1, self.act_dim)
        self.action_low = _bound(metadata.get("action_low"))
        self.action_high = _bound(metadata.get("action_high"))
        for bound in (self.action_low, self.action_high):
            if bound is not None and (bound.shape != (self.act_dim,) or not np.isfinite(bound).all()):
                raise ValueError(f"action bounds {bound.tolist()} are not {self.act_dim} finite numbers")

    def _read_contract(self) -> None:
        metadata = self.metadata
        self.contract = None
        """The contract fields, parsed (None for a file exported before the contract existed)."""
        self.obs_names = self.obs_units = self.act_names = self.act_units = None
        self.obs_low = self.obs_high = self.control_dt = self.sampler = self.provenance = None
        if "contract_version" not in metadata:
            _log.warning(
                "%s has no robot contract (exported before it existed): names, units, observation bounds and "
                "control period are unknown; export it again with `python -m export.onnx` to add them",
                self.path,
            )
            return
        version = int(metadata["contract_version"])
        if version > CONTRACT_VERSION:
            raise ValueError(
                f"contract version {version} is newer than this runtime's {CONTRACT_VERSION}: use the "
                "onnx_policy.py published with the file"
            )
        text_fields = ("contract_version", "obs_input", "obs_names_source", "act_names_source")
        missing = [key for key in (*_CONTRACT_JSON, *text_fields) if key not in metadata]
        if missing:
            raise ValueError(f"contract version {version} lacks the fields {missing}")
        contract = {key: json.loads(metadata[key]) for key in _CONTRACT_JSON}
        contract |= {key: metadata[key] for key in text_fields}
        for key in ("sampler", "provenance"):
            if not isinstance(contract[key], dict):
                raise ValueError(f"{key} is not a JSON object")
        for key, size in (
            ("obs_names", self.obs_dim),
            ("obs_units", self.obs_dim),
            ("act_names", self.act_dim),
            ("act_units", self.act_dim),
        ):
            value = contract[key]
            if (
                not isinstance(value, list)
                or len(value) != size
                or not all(isinstance(v, str) for v in value)
            ):
                raise ValueError(f"{key} is not a list of {size} strings")
        if len(set(contract["obs_names"])) != self.obs_dim:
            raise ValueError("obs_names are not unique")
        if contract["obs_input"] != "raw":
            raise ValueError(f"obs_input {contract['obs_input']!r} is not 'raw'")
        self.obs_low = _obs_bound(contract["obs_low"], self.obs_dim, -np.inf)
        self.obs_high = _obs_bound(contract["obs_high"], self.obs_dim, np.inf)
        dt = contract["control_dt"]
        if dt is not None and not (isinstance(dt, (int, float)) and np.isfinite(dt) and dt > 0):
            raise ValueError(f"control_dt {dt!r} is not a positive number of seconds")
        self.contract = contract
        self.obs_names, self.obs_units = contract["obs_names"], contract["obs_units"]
        self.act_names, self.act_units = contract["act_names"], contract["act_units"]
        self.control_dt, self.sampler, self.provenance = dt, contract["sampler"], contract["provenance"]

    def set_seed(self, seed: int) -> None:
        """Reseed the noise generator of stochastic calls."""
        self._rng = np.random.default_rng(seed)

    def __repr__(self) -> str:
        steps = "" if self.num_steps is None else f", num_steps={self.num_steps}"
        return (
            f"OnnxPolicy({str(self.path)!r}, kind={self.kind!r}, mode={self.mode!r}, obs_dim={self.obs_dim}, "
            f"act_dim={self.act_dim}{steps})"
        )

    def _check_obs(self, obs) -> tuple[np.ndarray, bool]:
        """`check_observation` against this file's contract: a dict keyed by `obs_names` is taken in their
        order, and an entry outside the env's observation bounds is refused (tests/test_robot_contract.py)."""
        if isinstance(obs, dict):
            obs = self._from_dict(obs)
        return check_observation(obs, self.obs_dim, self.obs_names, self.obs_low, self.obs_high)

    def _from_dict(self, obs: dict) -> np.ndarray:
        """A dict keyed by the contract's observation names as the array in the graph's order."""
        if self.obs_names is None:
            raise ValueError(
                "dict observations need a file with a robot contract (obs_names); pass one array"
            )
        missing = [name for name in self.obs_names if name not in obs]
        unknown = [name for name in obs if name not in self.obs_names]
        if missing or unknown:
            raise ValueError(
                f"observation dict does not match obs_names: missing {missing[:5]}, unknown {unknown[:5]}"
            )
        return np.stack([np.asarray(obs[name]) for name in self.obs_names], axis=-1)

    def _run(self, obs: np.ndarray, noise: np.ndarray | None) -> np.ndarray:
        feeds = {"obs": obs}
        if self.mode == "sde":
            # Zero noise is exactly the deterministic policy for every kind: a flow's a^(0) = 0 and no
            # diffusion increments, a Gaussian's mean, GenPO's x_0 = 0.
            feeds["noise"] = (
                np.zeros((obs.shape[0], *self.noise_shape), np.float32) if noise is None else noise
            )
        elif noise is not None:
            raise ValueError(
                f"{self.path} was exported in 'ode' mode (deterministic only); stochastic actions need "
                "an export with --mode sde"
            )
        action = self.session.run(self._output_names, feeds)[0]
        # Inputs are finite, so a NaN here comes from the graph itself; an env (a robot) must never be stepped
        # with NaN. A NaN or inf weight (a file damaged after export: the exporter refuses non-finite weights)
        # reaches every output, the zero observation's too; so do weights large enough to overflow whatever the
        # input, which onnxruntime alone cannot tell apart (it does not expose the weights' values).
        if not np.isfinite(action).all():
            if not np.isfinite(self._zero_action()).all():
                raise FloatingPointError(
                    f"{self.path} gives a NaN action even for a zero observation: it holds a NaN or inf weight "
                    "(the file is damaged: export the policy again) or weights so large the network overflows"
                )
            raise FloatingPointError("the policy produced a NaN action for a finite observation (overflow)")
        return action

    def _zero_action(self) -> np.ndarray:
        feeds = {"obs": np.zeros((1, self.obs_dim), np.float32)}
        if self.mode == "sde":
            feeds["noise"] = np.zeros((1, *self.noise_shape), np.float32)
        return self.session.run(self._output_names, feeds)[0]

    def act(self, obs, noise: np.ndarray | None = None) -> np.ndarray:
        """Env action(s) for a single observation or a batch; deterministic unless `noise` is given.

        `noise` (standard normal, only for `sde` exports) has shape `noise_shape` for a single
        observation or [B, *noise_shape] for a batch (a flow's [N+1, act_dim], row 0 being a^(0)).
        """
        obs, single = self._check_obs(obs)
        batch = obs[None] if single else obs
        if noise is not None:
            noise = check_noise(noise, (*obs.shape[:-1], *self.noise_shape))
            noise = noise[None] if single else noise
        action = self._run(batch, noise)
        return action[0] if single else action

    def predict(self, observation, state=None, episode_start=None, deterministic: bool = True):
        """SB3-style prediction: `(action, state)`, with actions in the env's bounds.

        Args:
            observation: one observation [obs_dim] or a batch [B, obs_dim].
            state: recurrent state; returned unchanged (the policy is not recurrent).
            episode_start: ignored (kept for SB3 compatibility).
            deterministic: the deterministic policy if True, else a sample with standard normal noise
                from this object's generator (needs an `sde` export). The draws match
                `GSBPolicy`'s, so both runtimes give the same actions for the same seed.
        """
        check_deterministic(deterministic)
        obs, single = self._check_obs(observation)
        batch = obs[None] if single else obs
        noise = None
        if not deterministic:
            if self.mode != "sde":
                raise ValueError(
                    f"deterministic=False needs an 'sde' export, but {self.path} was exported in "
                    f"'{self.mode}' mode; re-export with `python -m export.onnx POLICY --mode sde`"
                )
            noise = self._rng.standard_normal((batch.shape[0], *self.noise_shape), dtype=np.float32)
        action = self._run(batch, noise)
        return (action[0] if single else action), state


# ------------------------------------------------------------------------ the checks both runtimes share
# `GSBPolicy` (gsbpolicy/gsb_policy.py) imports these from here, since this file may import nothing of gsbpolicy:
# one check, so both runtimes reject the same inputs with the same words (tests/test_runtime_parity.py).
def check_observation(obs, obs_dim: int, names=None, low=None, high=None) -> tuple[np.ndarray, bool]:
    """Validate an observation, single [obs_dim] or a batch [B, obs_dim]; returns it as float32 and whether it
    is a single one. `names`, `low` and `high`: a robot contract's observation names and bounds (inf where
    unbounded), which only an exported file has; an entry outside the bounds is refused."""
    if isinstance(obs, tuple):
        raise ValueError(
            "observation is a tuple: you probably passed the (obs, info) pair returned by "
            "env.reset(); pass obs only"
        )
    if isinstance(obs, dict):
        raise ValueError("dict observations are not supported; flatten them to one array")
    obs = np.asarray(obs)
    if obs.dtype == object or not (
        np.issubdtype(obs.dtype, np.floating) or np.issubdtype(obs.dtype, np.integer)
    ):
        raise ValueError(f"observation dtype must be a real number type, got {obs.dtype}")
    if obs.ndim == 1 and obs.shape[0] == obs_dim:
        single = True
    elif obs.ndim == 2 and obs.shape[1] == obs_dim:
        single = False
    else:
        raise ValueError(f"observation shape {obs.shape} does not match ({obs_dim},) or (batch, {obs_dim})")
    check_finite("observation", obs)
    if low is not None:
        outside = (obs < low) | (obs > high)
        if outside.any():
            index = int(np.argwhere(outside)[0][-1])
            raise ValueError(
                f"observation {names[index]} = {np.reshape(obs, (-1, obs_dim))[:, index].tolist()[:5]} "
                f"is outside the env's bounds [{low[index]:g}, {high[index]:g}]: check its "
                "order and units against obs_names and obs_units"
            )
    if np.issubdtype(obs.dtype, np.floating) and obs.dtype.itemsize > 4:  # would turn into inf
        too_large = np.abs(obs) > np.finfo(np.float32).max
        if too_large.any():
            bad = np.argwhere(too_large)[:5].tolist()
            raise ValueError(f"observation at index {bad} is too large for float32 (|x| > 3.4e38)")
    return np.asarray(obs, np.float32), single


def check_noise(noise, shape: tuple[int, ...], name: str = "noise") -> np.ndarray:
    """`noise` (or a flow's `path`, by `name`) as float32, refused unless it has `shape` and is finite there."""
    if np.shape(noise) != shape:
        raise ValueError(f"{name} shape {np.shape(noise)} does not match {shape}")
    noise = np.asarray(noise, np.float32)
    check_finite(name, noise)
    return noise


def check_finite(name: str, array: np.ndarray) -> None:
    """A ValueError naming the first indices of `array` that are NaN or inf."""
    finite = np.isfinite(array)
    if not finite.all():
        raise ValueError(f"{name} contains NaN or inf at index {np.argwhere(~finite)[:5].tolist()}")


def check_deterministic(deterministic) -> bool:
    """`deterministic` if it is a bool; a TypeError otherwise: `"False"` (a string from a config file or a
    command line) is truthy, and would silently run the deterministic policy."""
    if not isinstance(deterministic, bool | np.bool_):
        raise TypeError(
            f"deterministic must be True or False, got {deterministic!r} ({type(deterministic).__name__})"
        )
    return bool(deterministic)


def _count(metadata: dict, key: str) -> int:
    value = int(metadata[key])
    if value < 1:
        raise ValueError(f"{key} {value} is not a positive count")
    return value


def _obs_bound(value, size: int, unbounded: float) -> np.ndarray | None:
    """An observation bound from JSON (null entries are unbounded), or None when the env gave none."""
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != size:
        raise ValueError(f"observation bound {str(value)[:80]} is not a list of {size}")
    bound = np.array([unbounded if v is None else v for v in value], np.float64)
    if np.isnan(bound).any():
        raise ValueError("an observation bound is NaN")
    return bound


def _bound(text: str | None) -> np.ndarray | None:
    value = None if text is None else json.loads(text)
    return None if value is None else np.asarray(value, np.float32)
