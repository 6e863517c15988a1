"""Saved files mutated at random (hypothesis): config.json and model.safetensors headers of every policy kind, and
a real run's checkpoint record, tensor file header and metrics.jsonl. Each load is either exactly what was saved
or one clear error of the loader's own type, in one line: never a traceback, never a silently different result.
"""

import json
import shutil
import tempfile
from pathlib import Path

import equinox as eqx
import jax
import numpy as np
import pytest
import safetensors.numpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_stops import GYM

from gsbpolicy import GSBPolicy, PolicyFormatError, load_policy, save_policy
from gsbpolicy._coupling import make_genpo
from gsbpolicy._gaussian import GaussianActor, GaussianSpec
from hub_cards.folder import CardSource, FolderError
from trainers import gsb_mdpo
from trainers._core.checkpoint import checked_bytes, read_meta
from trainers._core.cli import parse
from trainers._core.rundir import RunFolderError, open_run_folder

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=True)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


def _paths(value, prefix=()):
    """Every path (a tuple of keys and indices) into a JSON value, the root included."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


@st.composite
def json_edits(draw, document):
    """A JSON document changed at one place: a value replaced, a key dropped or added, or the whole replaced."""
    document = json.loads(json.dumps(document))
    path = draw(st.sampled_from(list(_paths(document))))
    how = draw(st.sampled_from(["replace", "drop", "add"]))
    if not path:
        return draw(json_values)
    *head, last = path
    parent = document
    for key in head:
        parent = parent[key]
    if how == "replace":
        parent[last] = draw(json_values)
    elif how == "drop":
        del parent[last]
    elif isinstance(parent, dict):
        parent[draw(st.text(min_size=1, max_size=6))] = draw(json_values)
    else:
        parent.insert(draw(st.integers(0, len(parent))), draw(json_values))
    return document


@st.composite
def byte_edits(draw, data: bytes, start: int = 0, end: int | None = None):
    """`data` with bytes flipped, overwritten, cut off or inserted somewhere in [start, end)."""
    end = len(data) if end is None else end
    at = draw(st.integers(start, max(start, end - 1)))
    how = draw(st.sampled_from(["flip", "set", "truncate", "insert"]))
    if how == "flip":
        return data[:at] + bytes([data[at] ^ (1 << draw(st.integers(0, 7)))]) + data[at + 1 :]
    if how == "set":
        return data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1 :]
    if how == "truncate":
        return data[:at]
    return data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:]


def one_clear_line(err: BaseException) -> None:
    assert str(err) and "\n" not in str(err), repr(err)


def _arrays(module):
    return eqx.filter(module, eqx.is_array)


def _gaussian(spec):
    gspec = GaussianSpec(obs_dim=spec.obs_dim, act_dim=spec.act_dim, width=16, depth=2, action_low=spec.action_low,
                         action_high=spec.action_high, env_id=spec.env_id)  # fmt: skip
    return GaussianActor(gspec, key=jax.random.key(1))


@pytest.fixture(scope="module", params=["flow", "gaussian", "genpo"])
def saved_policy(request, tiny_policy, tiny_spec, tmp_path_factory):
    module = {"flow": lambda: tiny_policy, "gaussian": lambda: _gaussian(tiny_spec),
              "genpo": lambda: make_genpo(tiny_spec, 0.9, key=jax.random.key(2))}[request.param]()  # fmt: skip
    folder = save_policy(module, tmp_path_factory.mktemp(request.param) / "policy")
    return folder, load_policy(folder)


def _load_outcome(folder: Path, original) -> None:
    """Loading `folder` gives `original` exactly, or one clear PolicyFormatError (or FileNotFoundError)."""
    try:
        loaded = load_policy(folder)
    except (PolicyFormatError, FileNotFoundError) as err:
        one_clear_line(err)
        return
    assert loaded.spec == original.spec and eqx.tree_equal(_arrays(loaded), _arrays(original)), (
        "silently changed"
    )
    obs = np.linspace(-1, 1, original.spec.obs_dim, dtype=np.float32)
    np.testing.assert_array_equal(GSBPolicy(loaded).predict(obs)[0], GSBPolicy(original).predict(obs)[0])


def _mutated_copy(folder: Path, name: str, data: bytes) -> Path:
    copy = Path(tempfile.mkdtemp()) / folder.name
    shutil.copytree(folder, copy)
    (copy / name).write_bytes(data)
    return copy


@SETTINGS
@given(data=st.data())
def test_a_mutated_config_json_loads_exactly_or_is_refused_in_one_line(saved_policy, data):
    folder, original = saved_policy
    config = json.loads((folder / "config.json").read_text())
    if data.draw(st.booleans()):
        mutated = json.dumps(data.draw(json_edits(config))).encode()
    else:
        mutated = data.draw(byte_edits((folder / "config.json").read_bytes()))
    _load_outcome(_mutated_copy(folder, "config.json", mutated), original)


def _header_end(data: bytes) -> int:
    return 8 + int.from_bytes(data[:8], "little")


@SETTINGS
@given(data=st.data())
def test_a_mutated_safetensors_header_loads_exactly_or_is_refused_in_one_line(saved_policy, data):
    folder, original = saved_policy
    weights = (folder / "model.safetensors").read_bytes()
    end = _header_end(weights)
    if data.draw(
        st.booleans()
    ):  # a valid header of other content: metadata, dtypes, shapes or offsets edited
        header = data.draw(json_edits(json.loads(weights[8:end])))
        text = json.dumps(header).encode()
        mutated = len(text).to_bytes(8, "little") + text + weights[end:]
    else:
        mutated = data.draw(byte_edits(weights, 0, end))
    _load_outcome(_mutated_copy(folder, "model.safetensors", mutated), original)


# ------------------------------------------------------------------------------------------- a real run's files
RUN = [*GYM, "--eval.num-evals", "2"]
"""test_stops' four tiny iterations, with two evaluations: records of both kinds to mutate."""


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("fuzz") / "run"
    gsb_mdpo.main([*RUN, "--output-dir", str(run)])
    return run


def _resume_outcome(run: Path, original: Path) -> None:
    """`--resume` of `run` accepts it only if what it would continue from is what was saved: the checkpoint
    record, every tensor file, run.json and the metrics the checkpoint was written after."""
    args = parse(gsb_mdpo.Args, gsb_mdpo.PRESETS, "cpu", "", [*RUN, "--output-dir", str(run), "--resume"])
    try:
        open_run_folder(run, "gsb_mdpo", args, writer=False)
    except RunFolderError as err:
        one_clear_line(err)
        return
    meta = read_meta(run / "checkpoint")
    assert meta == read_meta(original / "checkpoint"), "silently changed"
    for name in meta["files"]:
        assert checked_bytes(run / "checkpoint" / name, meta) == (original / "checkpoint" / name).read_bytes()
    seen = meta["num_records"]
    lines = (run / "metrics.jsonl").read_bytes().splitlines(keepends=True)
    assert lines[:seen] == (original / "metrics.jsonl").read_bytes().splitlines(keepends=True)[:seen]


def _run_copy(run: Path, name: str, data: bytes) -> Path:
    copy = Path(tempfile.mkdtemp()) / "run"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("run.lock"))
    (copy / name).write_bytes(data)
    return copy


@SETTINGS
@given(data=st.data())
def test_a_mutated_checkpoint_record_resumes_exactly_or_is_refused_in_one_line(finished_run, data):
    path = finished_run / "checkpoint" / "meta.json"
    if data.draw(st.booleans()):
        mutated = json.dumps(data.draw(json_edits(json.loads(path.read_text())))).encode()
    else:
        mutated = data.draw(byte_edits(path.read_bytes()))
    _resume_outcome(_run_copy(finished_run, "checkpoint/meta.json", mutated), finished_run)


@SETTINGS
@given(data=st.data())
def test_a_mutated_checkpoint_tensor_header_resumes_exactly_or_is_refused_in_one_line(finished_run, data):
    state = (finished_run / "checkpoint" / "state.safetensors").read_bytes()
    mutated = data.draw(byte_edits(state, 0, _header_end(state)))
    _resume_outcome(_run_copy(finished_run, "checkpoint/state.safetensors", mutated), finished_run)


@st.composite
def metrics_edits(draw, data: bytes):
    lines = data.splitlines(keepends=True)
    how = draw(st.sampled_from(["drop", "repeat", "edit", "insert", "bytes"]))
    at = draw(st.integers(0, len(lines) - 1))
    if how == "drop":
        del lines[at]
    elif how == "repeat":
        lines.insert(at, lines[at])
    elif how == "edit":
        record = json.loads(lines[at])
        lines[at] = (json.dumps(draw(json_edits(record))) + "\n").encode()
    elif how == "insert":
        lines.insert(at, (json.dumps(draw(json_values)) + "\n").encode())
    else:
        return draw(byte_edits(data))
    return b"".join(lines)


@SETTINGS
@given(data=st.data())
def test_mutated_metrics_resume_and_publish_exactly_or_are_refused_in_one_line(finished_run, data):
    mutated = data.draw(metrics_edits((finished_run / "metrics.jsonl").read_bytes()))
    copy = _run_copy(finished_run, "metrics.jsonl", mutated)
    _resume_outcome(copy, finished_run)
    try:
        source = CardSource.read(copy / "policy" / "config.json", copy / "policy" / "results.json", copy / "run.json",
                                 copy / "metrics.jsonl")  # fmt: skip
    except FolderError as err:
        one_clear_line(err)
        return
    assert source.metrics == [
        json.loads(line) for line in (finished_run / "metrics.jsonl").read_text().splitlines()
    ]


def test_the_unmutated_files_load_resume_and_publish(saved_policy, finished_run):
    """The properties above fail for their mutations' sake: untouched, everything loads."""
    folder, original = saved_policy
    _load_outcome(folder, original)
    assert eqx.tree_equal(_arrays(load_policy(folder)), _arrays(original))
    args = parse(
        gsb_mdpo.Args, gsb_mdpo.PRESETS, "cpu", "", [*RUN, "--output-dir", str(finished_run), "--resume"]
    )
    open_run_folder(finished_run, "gsb_mdpo", args, writer=False)
    policy = finished_run / "policy"
    CardSource.read(policy / "config.json", policy / "results.json", finished_run / "run.json",
                    finished_run / "metrics.jsonl")  # fmt: skip
    assert safetensors.numpy.load_file(finished_run / "checkpoint" / "state.safetensors")
