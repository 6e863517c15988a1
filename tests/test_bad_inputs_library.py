"""Every bad input a user can hand the library, one table row each, with its exact outcome.

A row does the user's mistake (`edit`, e.g. hand-editing config.json) and then the call that must refuse it
(`attempt`). Each row asserts the exception's exact type, a one-line message that names the problem, and
that the attempt wrote nothing and lost nothing: every file under the test's folder (policy folder, save
targets) and every repo on the fake Hub are exactly as they were before the attempt.
"""

import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path

import equinox as eqx
import gymnasium
import numpy as np
import pytest
import safetensors.numpy
from fake_hub import FakeHub, point_client_at
from faulty_env import FaultyEnv
from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError, RepositoryNotFoundError

from gsbpolicy import GSBPolicy, PolicyFormatError, evaluate, load_policy
from gsbpolicy._hub_requests import HubRequestError
from gsbpolicy.gym import EnvOutputError

pytestmark = pytest.mark.strict_promotion


@dataclasses.dataclass
class World:
    """What a row can touch: a saved policy folder, a loaded policy, a scratch folder and a fake Hub."""

    root: Path
    folder: Path
    policy: GSBPolicy
    overflowing: Callable[[], GSBPolicy]
    hub: FakeHub
    monkeypatch: pytest.MonkeyPatch

    def hub_fault(self, fault: str) -> None:
        """The fake Hub meets every request with `fault`; the client waits 0.3 s for an answer."""
        self.hub.fault = fault
        self.monkeypatch.setenv("GSBPOLICY_HUB_TIMEOUT", "0.3")

    def edit_spec(self, **changes) -> None:
        self.edit_config(spec={**json.loads((self.folder / "config.json").read_text())["spec"], **changes})

    def edit_config(self, **changes) -> None:
        config = {**json.loads((self.folder / "config.json").read_text()), **changes}
        (self.folder / "config.json").write_text(json.dumps(config))

    def snapshot(self) -> tuple[dict[str, bytes | None], set]:
        files = {
            str(path.relative_to(self.root)): None if path.is_dir() else path.read_bytes()
            for path in sorted(self.root.rglob("*"))
            if "hf-cache" not in path.parts
        }
        return files, set(self.hub.repos)


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    attempt: Callable[[World], object]
    error: type[Exception]
    message: str
    """A regex that must match the (one-line) message."""
    edit: Callable[[World], None] = lambda world: None


def _nan_weights(world: World) -> GSBPolicy:
    weight = world.policy.policy.drift_net.mlp.layers[1].weight
    return GSBPolicy(
        eqx.tree_at(lambda p: p.drift_net.mlp.layers[1].weight, world.policy.policy, weight * np.nan)
    )


def _write_nan_weights(world: World) -> None:
    weights = world.folder / "model.safetensors"
    with safetensors.safe_open(weights, "numpy") as file:
        metadata = file.metadata()
    tensors = safetensors.numpy.load_file(weights)
    tensors["normalizer.mean"] = np.full_like(tensors["normalizer.mean"], np.inf)
    safetensors.numpy.save_file(tensors, weights, metadata)


def _notes(world: World) -> Path:
    return world.root / "notes" / "README.md"


def _write_notes(world: World) -> None:
    _notes(world).parent.mkdir()
    _notes(world).write_text("card")


def _link_outside(world: World) -> None:
    """A policy folder holding a symlink to a file outside it (a secret the link must not publish)."""
    (world.root / "secret.txt").write_text("token")
    (world.folder / "results.json").symlink_to(world.root / "secret.txt")


def _push(extra: Callable[[World], dict]) -> Callable[[World], object]:
    return lambda world: world.policy.push_to_hub("org/policy", extra_files=extra(world))


def _load(world: World) -> object:
    return GSBPolicy.from_pretrained(world.folder)


OBS = np.zeros(4, np.float32)
NOISE = np.zeros((7, 2), np.float32)  # tiny_spec: num_steps 6, act_dim 2

CASES = [
    # --- acting: observations and noise
    Case(
        "nan observation",
        lambda w: w.policy.predict(np.array([0.0, np.nan, 0.0, 0.0])),
        ValueError,
        r"^observation contains NaN or inf at index \[\[1\]\]$",
    ),
    Case(
        "inf observation in a batch",
        lambda w: w.policy.act(np.array([[0.0, 0.0, np.inf, 0.0]])),
        ValueError,
        r"^observation contains NaN or inf at index \[\[0, 2\]\]$",
    ),
    Case(
        "float64 observation beyond float32",
        lambda w: w.policy.act(np.array([0.0, 1e300, 0.0, 0.0])),
        ValueError,
        r"observation at index \[\[1\]\] is too large for float32",
    ),
    Case(
        "wrong observation shape",
        lambda w: w.policy.predict(np.zeros(5)),
        ValueError,
        r"observation shape \(5,\) does not match \(4,\) or \(batch, 4\)",
    ),
    Case(
        "three-dimensional observation",
        lambda w: w.policy.act(np.zeros((2, 3, 4))),
        ValueError,
        r"^observation shape \(2, 3, 4\) does not match \(4,\) or \(batch, 4\)$",
    ),
    Case(
        "complex observation",
        lambda w: w.policy.predict(np.zeros(4, complex)),
        ValueError,
        r"^observation dtype must be a real number type, got complex128$",
    ),
    Case(
        "string observation",
        lambda w: w.policy.predict(np.array(["1", "2", "3", "4"])),
        ValueError,
        r"observation dtype must be a real number type, got <U1",
    ),
    Case(
        "(obs, info) pair from env.reset",
        lambda w: w.policy.predict((OBS, {})),
        ValueError,
        r"you probably passed the \(obs, info\) pair returned by env\.reset\(\)",
    ),
    Case(
        "nan noise to act",
        lambda w: w.policy.act(OBS, np.where(np.eye(7, 2), np.nan, NOISE)),
        ValueError,
        r"^noise contains NaN or inf at index \[\[0, 0\], \[1, 1\]\]$",
    ),
    Case(
        "inf noise to sample",
        lambda w: w.policy.sample(OBS[None], np.full((1, 7, 2), -np.inf)),
        ValueError,
        r"^noise contains NaN or inf at index",
    ),
    Case(
        "wrong noise shape",
        lambda w: w.policy.act(OBS, np.zeros((6, 2))),
        ValueError,
        r"noise shape \(6, 2\) does not match \(7, 2\)",
    ),
    Case(
        "nan path to log_prob",
        lambda w: w.policy.log_prob(OBS[None], np.full((1, 7, 2), np.nan)),
        ValueError,
        r"^path contains NaN or inf",
    ),
    Case(
        "one observation to the batched sample",
        lambda w: w.policy.sample(OBS, NOISE),
        ValueError,
        r"is one observation; pass a batch \[B, obs_dim\]",
    ),
    Case(
        "weights that overflow to a nan action",
        lambda w: w.overflowing().act(OBS),
        FloatingPointError,
        r"the policy produced a NaN action for a finite observation",
    ),
    # --- saving
    Case(
        "non-finite weights saved to a new folder",
        lambda w: _nan_weights(w).save_pretrained(w.root / "new"),
        ValueError,
        r"refusing to save non-finite weights: tensor 'drift_net\.mlp\.layers\.1\.weight' has "
        r"256 NaN/inf of 256 values",
    ),
    Case(
        "non-finite weights saved over a good policy",
        lambda w: _nan_weights(w).save_pretrained(w.folder),
        ValueError,
        r"refusing to save non-finite weights: tensor 'drift_net\.mlp\.layers\.1\.weight'",
    ),
    # --- loading a folder edited or damaged by hand
    Case(
        "config.json width edited (a shape change)",
        _load,
        PolicyFormatError,
        r"does not match the spec .*model\.safetensors was saved with \(width: saved 16, config 32\); "
        r"config\.json was edited after saving\. .*save_pretrained\(\)",
        edit=lambda w: w.edit_spec(width=32),
    ),
    Case(
        "config.json sigma_max and output_scale edited (same shapes)",
        _load,
        PolicyFormatError,
        r"\(output_scale: saved 0\.25, config 1\.0; sigma_max: saved 1\.5, config 2\.0\)",
        edit=lambda w: w.edit_spec(sigma_max=2.0, output_scale=1.0),
    ),
    Case(
        "config.json env_id edited",
        _load,
        PolicyFormatError,
        r"\(env_id: saved 'Tiny-v0', config 'Other-v0'\)",
        edit=lambda w: w.edit_spec(env_id="Other-v0"),
    ),
    Case(
        "string where an int belongs",
        _load,
        PolicyFormatError,
        r"config\.json: invalid policy spec: PolicySpec\.width must be an int, got '16'$",
        edit=lambda w: w.edit_spec(width="16"),
    ),
    Case(
        "string where a float belongs",
        _load,
        PolicyFormatError,
        r"PolicySpec\.sigma_max must be a finite number, got '1\.5'$",
        edit=lambda w: w.edit_spec(sigma_max="1.5"),
    ),
    Case(
        "true where an int belongs",
        _load,
        PolicyFormatError,
        r"PolicySpec\.depth must be an int, got True$",
        edit=lambda w: w.edit_spec(depth=True),
    ),
    Case(
        "NaN sigma in config.json",
        _load,
        PolicyFormatError,
        r"PolicySpec\.sigma_min must be a finite number, got nan$",
        edit=lambda w: w.edit_spec(sigma_min=float("nan")),
    ),
    Case(
        "string in the action bounds",
        _load,
        PolicyFormatError,
        r"PolicySpec\.action_low must be a list of finite numbers or null, got \['-1', -2\.0\]$",
        edit=lambda w: w.edit_spec(action_low=["-1", -2.0]),
    ),
    Case(
        "zero observation clip",
        _load,
        PolicyFormatError,
        r"PolicySpec\.obs_clip must be > 0, got 0$",
        edit=lambda w: w.edit_spec(obs_clip=0),
    ),
    Case(
        "misspelt spec key",
        _load,
        PolicyFormatError,
        r"unknown PolicySpec keys \['widht'\]",
        edit=lambda w: w.edit_spec(widht=16),
    ),
    Case(
        "unknown (newer) format_version",
        _load,
        PolicyFormatError,
        r"has format_version 2; this gsbpolicy reads version 1 \(upgrade gsbpolicy to load it\)$",
        edit=lambda w: w.edit_config(format_version=2),
    ),
    Case(
        "format_version as a string",
        _load,
        PolicyFormatError,
        r"format_version must be an int, got '1'$",
        edit=lambda w: w.edit_config(format_version="1"),
    ),
    Case(
        "config.json that is not JSON",
        _load,
        PolicyFormatError,
        r"is not valid JSON .*; the file is corrupted$",
        edit=lambda w: (w.folder / "config.json").write_text('{"spec": {'),
    ),
    Case(
        "truncated weights",
        _load,
        PolicyFormatError,
        r"model\.safetensors is corrupted or truncated",
        edit=lambda w: (w.folder / "model.safetensors").write_bytes(
            (w.folder / "model.safetensors").read_bytes()[:-9]
        ),
    ),
    Case(
        "weights that are not safetensors",
        _load,
        PolicyFormatError,
        r"model\.safetensors is corrupted or truncated",
        edit=lambda w: (w.folder / "model.safetensors").write_bytes(b"\x00" * 8 + b"garbage"),
    ),
    Case(
        "missing config.json",
        _load,
        FileNotFoundError,
        r"^policy config not found: .*config\.json$",
        edit=lambda w: (w.folder / "config.json").unlink(),
    ),
    Case(
        "missing weights",
        _load,
        FileNotFoundError,
        r"^policy weights not found: .*model\.safetensors$",
        edit=lambda w: (w.folder / "model.safetensors").unlink(),
    ),
    Case(
        "non-finite weights in the file",
        _load,
        PolicyFormatError,
        r"tensor 'normalizer\.mean' holds NaN or inf; the weights are unusable$",
        edit=_write_nan_weights,
    ),
    Case(
        "load_policy on a missing folder",
        lambda w: load_policy(w.root / "nowhere"),
        FileNotFoundError,
        r"^policy folder not found: .*nowhere$",
    ),
    Case(
        "missing local folder",
        lambda w: GSBPolicy.from_pretrained("./no-such-policy"),
        FileNotFoundError,
        r"^policy folder not found: \./no-such-policy$",
    ),
    # --- publishing and the Hub
    Case(
        "extra_files name leaving the repo",
        _push(lambda w: {"../escape.md": _notes(w)}),
        ValueError,
        r"extra_files name '\.\./escape\.md' must be a relative path inside the repo",
        edit=_write_notes,
    ),
    Case(
        "absolute extra_files name",
        _push(lambda w: {"/etc/motd": _notes(w)}),
        ValueError,
        r"extra_files name '/etc/motd' must be a relative path inside the repo",
        edit=_write_notes,
    ),
    Case(
        "extra_files replacing the weights",
        _push(lambda w: {"model.safetensors": _notes(w)}),
        ValueError,
        r"would replace the policy's own model\.safetensors",
        edit=_write_notes,
    ),
    Case(
        "extra_files symlink pointing outside its folder",
        _push(lambda w: {"results.json": w.folder / "results.json"}),
        ValueError,
        r"extra_files\['results\.json'\]: .*results\.json is a symlink to .*secret\.txt, outside ",
        edit=_link_outside,
    ),
    Case(
        "missing extra_files source",
        _push(lambda w: {"README.md": w.root / "nope.md"}),
        FileNotFoundError,
        r"extra_files\['README\.md'\]: no such file .*nope\.md$",
    ),
    Case(
        "invalid repo id to push",
        lambda w: w.policy.push_to_hub("org/na me"),
        HFValidationError,
        r"Repo id must use alphanumeric chars.*'org/na me'",
    ),
    Case(
        "invalid repo id to load",
        lambda w: GSBPolicy.from_pretrained("org/-name-"),
        HFValidationError,
        r"Repo id must use alphanumeric chars.*'org/-name-'",
    ),
    Case(
        "Hub repo that does not exist",
        lambda w: GSBPolicy.from_pretrained("org/missing"),
        RepositoryNotFoundError,
        r"^Hub policy 'org/missing': config\.json not found \(a missing, private",
    ),
    Case(
        "offline, repo never downloaded",
        lambda w: GSBPolicy.from_pretrained("org/never-downloaded"),
        LocalEntryNotFoundError,
        r"^Hub policy 'org/never-downloaded': config\.json is not in the local cache "
        r"and offline mode is on; download it once online$",
        edit=lambda w: _go_offline(),
    ),
]


def _faulty(fault: str) -> FaultyEnv:
    """The faulty env with the tiny policy's spaces (four observations, two actions in [-1, 1] x [-2, 3])."""
    return FaultyEnv(fault, at=3, act_low=(-1.0, -2.0), act_high=(1.0, 3.0))


class TwoActions(gymnasium.Env):
    """Four observations and two actions, as the tiny policy has, but actions in [-1, 1] on both axes."""

    observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (4,), np.float32)
    action_space = gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32)


HUB = r"the Hub at http://127\.0\.0\.1:\d+"
NETWORK_CASES = [
    Case(
        f"{what}: a Hub that {fault_text}",
        attempt,
        HubRequestError,
        rf"^{prefix}{HUB} {answer}",
        edit=lambda w, fault=fault: w.hub_fault(fault),
    )
    for what, attempt, prefix, request in [
        ("load", lambda w: GSBPolicy.from_pretrained("org/policy"),
         r"Hub policy 'org/policy': config\.json is not in the local cache, and ", "HEAD /org/policy/resolve/main/config\.json"),
        ("push", lambda w: w.policy.push_to_hub("org/policy"), r"push to 'org/policy': ", "POST /api/repos/create"),
    ]
    for fault, fault_text, answer in [
        ("hang", "never answers", rf"did not answer {request} within 0\.3 s \(set GSBPOLICY_HUB_TIMEOUT to wait longer\)$"),
        ("error", "answers 500", rf"answered {request} with 500 Internal Server Error"),
        ("garbage", "answers an HTML page",
         rf"answered {request} with 200 OK (but without the file metadata a Hugging Face Hub sends|\(text/html\), "
         r"which is not a Hub answer)"),
    ]
]  # fmt: skip
CASES += NETWORK_CASES
CASES += [
    Case(
        "empty string as the policy",
        lambda w: GSBPolicy.from_pretrained(""),
        ValueError,
        r"^expected a policy folder or a Hub repo id ORG/NAME, got an empty string$",
    ),
    Case(
        "a Hub URL as the policy",
        lambda w: GSBPolicy.from_pretrained("https://huggingface.co/org/policy"),
        ValueError,
        r"got the URL 'https://huggingface\.co/org/policy': pass the repo id \('org/policy'\) or a local folder$",
    ),
    Case(
        "a Hub URL to push to",
        lambda w: w.policy.push_to_hub("https://huggingface.co/org/policy/tree/main"),
        ValueError,
        r"^expected a Hub repo id ORG/NAME, got the URL .*: pass the repo id \('org/policy'\)",
    ),
    Case(
        "a timeout of 0 s",
        lambda w: GSBPolicy.from_pretrained("org/policy", timeout=0),
        ValueError,
        r"^timeout must be a number of seconds > 0, got 0$",
    ),
    Case(
        "GSBPOLICY_HUB_TIMEOUT that is not a number",
        lambda w: GSBPolicy.from_pretrained("org/policy"),
        ValueError,
        r"^GSBPOLICY_HUB_TIMEOUT='soon' is not a number of seconds$",
        edit=lambda w: w.monkeypatch.setenv("GSBPOLICY_HUB_TIMEOUT", "soon"),
    ),
    Case(
        "a file where the policy folder belongs",
        lambda w: GSBPolicy.from_pretrained(w.folder / "config.json"),
        ValueError,
        r"config\.json is a file; expected a policy folder \(config\.json \+ model\.safetensors\) or a Hub repo id",
    ),
    Case(
        "config.json nested too deeply to parse",
        _load,
        PolicyFormatError,
        r"config\.json is nested too deeply to be a file this tool wrote; the file is corrupted$",
        edit=lambda w: (w.folder / "config.json").write_text("[" * 100_000 + "]" * 100_000),
    ),
    Case(
        "config.json that is not UTF-8",
        _load,
        PolicyFormatError,
        r"config\.json is not UTF-8 text \(byte 1\); the file is corrupted$",
        edit=lambda w: (w.folder / "config.json").write_bytes(b"{\xff}"),
    ),
    Case(
        "evaluate on an env with other observations",
        lambda w: evaluate(w.policy, "Pendulum-v1", n_episodes=1),
        ValueError,
        r"^the policy takes observations of shape \(4,\), Pendulum-v1 gives \(3,\)$",
    ),
    Case(
        "evaluate on an env with other action bounds",
        lambda w: evaluate(w.policy, TwoActions(), n_episodes=1),
        ValueError,
        r"^the policy's action bounds \[\[-1\.0, -2\.0\], \[1\.0, 3\.0\]\] are not the env's "
        r"\[\[-1\.0, -1\.0\], \[1\.0, 1\.0\]\]$",
    ),
    Case(
        "deterministic given as the string 'False'",
        lambda w: w.policy.predict(OBS, deterministic="False"),
        TypeError,
        r"^deterministic must be True or False, got 'False' \(str\)$",
    ),
    Case(
        "evaluate with deterministic given as 0",
        lambda w: evaluate(w.policy, TwoActions(), n_episodes=1, deterministic=0),
        TypeError,
        r"^deterministic must be True or False, got 0 \(int\)$",
    ),
    Case(
        "from_pretrained on a training run folder",
        lambda w: GSBPolicy.from_pretrained(w.root),
        FileNotFoundError,
        r"^\S+ is a training run folder, not a policy folder: use \S+/policy$",
    ),
    Case(
        "load_policy on a training run folder",
        lambda w: load_policy(w.root),
        FileNotFoundError,
        r"is a training run folder, not a policy folder: use \S+/policy$",
    ),
    *[
        Case(
            f"evaluate on an env that {does}",
            lambda w, fault=fault: evaluate(w.policy, _faulty(fault), n_episodes=1),
            EnvOutputError,
            message,
        )
        for does, fault, message in [
            (
                "returns a NaN observation",
                "nan observation",
                r"^the env FaultyEnv returned observation\[2\] = nan at env step 3: not finite; ",
            ),
            (
                "returns an infinite reward",
                "inf reward",
                r"^the env FaultyEnv returned reward = inf at env step 3: not",
            ),
            (
                "returns an observation beyond float32",
                "huge observation",
                r"^the env FaultyEnv returned observation\[1\] = 1e\+300 at env step 3: too large for float32",
            ),
            (
                "resets to the wrong shape",
                "reset shape",
                r"^the env FaultyEnv returned an observation of shape \(5,\) from reset; its observation_space has "
                r"shape \(4,\)$",
            ),
            (
                "steps to the wrong shape",
                "step shape",
                r"^the env FaultyEnv returned an observation of shape \(3,\) at env step 3; its observation_space",
            ),
        ]
    ],
    Case(
        "evaluate on a vector env whose sub-env returns a NaN observation",
        lambda w: evaluate(
            w.policy, gymnasium.vector.SyncVectorEnv([lambda: _faulty("nan observation")] * 2), n_episodes=2
        ),
        EnvOutputError,
        r"^the env FaultyEnv returned observation\[0, 2\] = nan at env step 3: not finite",
    ),
    Case(
        "evaluate on an env whose action bounds have low > high",
        lambda w: evaluate(w.policy, _faulty("swapped bounds"), n_episodes=1),
        ValueError,
        r"^the env FaultyEnv's action_space has low > high at index \[0\] \(low 1\.0, high -1\.0\)",
    ),
    Case(
        "evaluate on the id train() gave a class of a training script's __main__",
        lambda w: evaluate(GSBPolicy.from_pretrained(w.folder), "custom/Ghost-v0", n_episodes=1),
        ValueError,
        r"^custom/Ghost-v0 is the class Ghost of the script that trained the policy \(__main__:Ghost\), which no "
        r"other process can import: pass the env itself \(evaluate\(policy, Ghost\(\)\)\), or move Ghost into a "
        r"module and train again$",
        edit=lambda w: (w.folder / "results.json").write_text(
            json.dumps({"env_id": "custom/Ghost-v0", "env_entry_point": "__main__:Ghost"})
        ),
    ),
    Case(
        "evaluate on a custom/ id nothing records",
        lambda w: evaluate(w.policy, "custom/Nowhere-v0", n_episodes=1),
        ValueError,
        r"^custom/Nowhere-v0 was registered by train\(\) in the process that trained the policy, and this one "
        r"does not know it: pass the env itself, .*gymnasium\.register\('custom/Nowhere-v0', entry_point=",
    ),
    Case(
        "evaluate with no episodes",
        lambda w: evaluate(w.policy, TwoActions(), n_episodes=0),
        ValueError,
        r"^n_episodes must be an integer >= 1, got 0$",
    ),
]


def _go_offline() -> None:
    from huggingface_hub import constants

    constants.HF_HUB_OFFLINE = True  # restored by the monkeypatch of point_client_at


@pytest.fixture(scope="module")
def gsb_policy(tiny_policy):
    return GSBPolicy(tiny_policy)


@pytest.fixture(scope="module")
def overflowing(tiny_policy):
    # Finite but huge first-layer weights: the network overflows to inf - inf = NaN inside the sampler.
    weight = tiny_policy.drift_net.mlp.layers[0].weight * 1e37
    policy = eqx.tree_at(lambda p: p.drift_net.mlp.layers[0].weight, tiny_policy, weight)
    return lambda: GSBPolicy(policy)


@pytest.fixture
def world(tmp_path, monkeypatch, gsb_policy, overflowing):
    with FakeHub() as hub:
        point_client_at(monkeypatch, hub.endpoint, cache_dir=tmp_path / "hf-cache")
        folder = gsb_policy.save_pretrained(tmp_path / "policy")
        yield World(tmp_path, folder, gsb_policy, overflowing, hub, monkeypatch)


def test_the_table_is_large_enough():
    assert len(CASES) >= 15 and len({case.name for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_bad_input_is_refused_by_name_and_changes_nothing(world, case):
    case.edit(world)
    before = world.snapshot()
    with pytest.raises(Exception) as excinfo:
        case.attempt(world)
    err = excinfo.value
    assert type(err) is case.error, f"{type(err).__name__}: {err}"
    message = str(err)
    assert "\n" not in message, message
    assert re.search(case.message, message), message
    assert world.snapshot() == before, "the refused call wrote, deleted or uploaded something"
