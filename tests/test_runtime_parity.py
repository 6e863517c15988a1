"""The robot runtime (`export.runtime.OnnxPolicy`, numpy and onnxruntime only) and `GSBPolicy` refuse the same
inputs with the same exception and the same words, and neither ever returns a non-finite action.

The runtime may import nothing of gsbpolicy (it is published alone beside policy.onnx), so the one copy of the
input checks lives in it and `GSBPolicy` imports them from there; this table shows the two refuse alike.
"""

from pathlib import Path

import equinox as eqx
import numpy as np
import pytest

from export import onnx as onnx_export
from export.runtime import OnnxPolicy
from gsbpolicy import GSBPolicy

OBS = np.zeros(4, np.float32)


def _noise(value: float, batch: tuple[int, ...] = ()) -> np.ndarray:
    noise = np.zeros((*batch, 7, 2), np.float32)
    noise[..., 3, 1] = value
    return noise


CALLS = {
    "NaN observation": lambda p: p.predict(np.array([0.0, np.nan, 0.0, 0.0])),
    "inf observation in a batch": lambda p: p.predict(np.array([[0.0] * 4, [0.0, 0.0, 0.0, np.inf]])),
    "finite float64 observation beyond float32": lambda p: p.predict(np.array([0.0, 1e300, 0.0, 0.0])),
    "negative float64 beyond float32 in a batch": lambda p: p.act(np.array([[0.0, 0.0, -1e39, 0.0]])),
    "observation one too long": lambda p: p.predict(np.zeros(5, np.float32)),
    "three-dimensional observation": lambda p: p.act(np.zeros((2, 3, 4), np.float32)),
    "empty observation": lambda p: p.predict(np.zeros(0, np.float32)),
    "string observation": lambda p: p.predict(np.array(["1", "2", "3", "4"])),
    "complex observation": lambda p: p.predict(np.zeros(4, np.complex64)),
    "bool observation": lambda p: p.predict(np.zeros(4, bool)),
    "object observation": lambda p: p.predict(np.array([0.0, None, 0.0, 0.0], dtype=object)),
    "(obs, info) from env.reset()": lambda p: p.predict((OBS, {})),
    "NaN noise": lambda p: p.act(OBS, _noise(np.nan)),
    "inf noise in a batch": lambda p: p.act(np.zeros((2, 4), np.float32), _noise(-np.inf, (2,))),
    "float64 noise beyond float32": lambda p: p.act(OBS, _noise(1e300).astype(np.float64) * 1e300),
    "wrong noise shape": lambda p: p.act(OBS, np.zeros((6, 2), np.float32)),
    "noise for a batch of another size": lambda p: p.act(np.zeros((3, 4), np.float32), np.zeros((2, 7, 2))),
    "deterministic given as the string 'False'": lambda p: p.predict(OBS, deterministic="False"),
}


@pytest.fixture(scope="module")
def runtimes(tiny_policy, tmp_path_factory):
    path = tmp_path_factory.mktemp("parity") / "sde.onnx"
    onnx_export.export(tiny_policy, path, "sde")
    return GSBPolicy(tiny_policy), OnnxPolicy(path)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_both_runtimes_refuse_alike(name, runtimes):
    outcomes = []
    for policy in runtimes:
        with pytest.raises(Exception) as raised:
            CALLS[name](policy)
        outcomes.append((type(raised.value), str(raised.value)))
    assert outcomes[0] == outcomes[1]
    assert "\n" not in outcomes[0][1]


def test_the_float32_overflow_names_the_size_not_nan(runtimes):
    for policy in runtimes:
        with pytest.raises(ValueError, match=r"^observation at index \[\[1\]\] is too large for float32"):
            policy.predict(np.array([0.0, 1e300, 0.0, 0.0]))


@pytest.fixture(scope="module")
def overflowing(tiny_policy, tmp_path_factory):
    """Finite weights so large that the network overflows (inf - inf = NaN) inside the sampler: the exporter
    refuses to write such a graph (its verification compares NaN), so it is traced and saved directly."""
    weight = tiny_policy.drift_net.mlp.layers[0].weight * 1e37
    policy = eqx.tree_at(lambda p: p.drift_net.mlp.layers[0].weight, tiny_policy, weight)
    path = tmp_path_factory.mktemp("overflow") / "ode.onnx"
    model = onnx_export.trace(policy, "ode")
    path.write_bytes(model.SerializeToString())
    return GSBPolicy(policy), OnnxPolicy(path)


@pytest.mark.parametrize("batch", [False, True], ids=["single", "batch"])
def test_an_overflowing_network_raises_in_both_never_a_nan_action(overflowing, batch):
    obs = np.ones((3, 4), np.float32) if batch else np.ones(4, np.float32)
    outcomes = []
    for policy in overflowing:
        with pytest.raises(FloatingPointError) as raised:
            policy.predict(obs)
        outcomes.append(str(raised.value))
    # GSBPolicy sees its weights are finite; the ONNX runtime cannot read them, so it names both causes.
    assert outcomes[0] == "the policy produced a NaN action for a finite observation (overflow)"
    assert outcomes[1].endswith("holds a NaN or inf weight (the file is damaged: export the policy again) or "
                                "weights so large the network overflows")  # fmt: skip


def test_the_library_has_no_copy_of_the_runtimes_input_checks():
    """One check, not two copies: the refusals' words are written only in export/runtime.py."""
    library = Path(__file__).resolve().parents[1] / "gsbpolicy"
    words = ("observation is a tuple", "does not match ({", "contains NaN or inf", "must be True or False")
    copies = [f"{p.name}: {w}" for p in library.glob("*.py") for w in words if w in p.read_text()]
    assert not copies, copies
