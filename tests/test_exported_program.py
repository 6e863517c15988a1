"""Stored traced programs (`trainers._core.exported_program`): a second process loads what the first traced
and computes the same; anything that changes the program changes its key; a damaged file is traced again;
a remembered value (an observation size) is read back under the same key.
The Playground path end to end (cache on, off, and a resumed run loading the stored iteration) is in
test_trainer.py."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from trainers._core.exported_program import ExportedFunction, remembered


class Carry(eqx.Module):
    x: jax.Array
    key: jax.Array
    scale: float = eqx.field(static=True)


def step(carry: Carry, y, double: bool):
    key, sub = jax.random.split(carry.key)
    x = carry.x * carry.scale + y + jax.random.normal(sub, carry.x.shape)
    x = 2 * x if double else x
    return (Carry(x, key, carry.scale),), {"sum": x.sum(), "parts": (x.min(), x.max())}


reference = eqx.filter_jit(step)


def wrapped(folder, config="cfg", fn=step):
    return ExportedFunction(fn, num_carry=1, name="toy", config=config, folder=folder, env_source=None)


@pytest.fixture
def carry():
    return Carry(jnp.arange(3.0), jax.random.key(0), 0.5)


def test_a_second_process_loads_the_program_and_computes_the_same(tmp_path, carry):
    first = wrapped(tmp_path)
    (out,), extras = first(carry, jnp.ones(3), False)
    assert first.loaded == [False] and len(list(tmp_path.glob("toy-*.jaxexport"))) == 1
    expected = reference(
        carry, jnp.ones(3), False
    )  # as `eqx.filter_jit` compiles it (eager may round otherwise)
    np.testing.assert_array_equal(out.x, expected[0][0].x)
    assert out.scale == 0.5 and jax.random.key_impl(out.key) == jax.random.key_impl(carry.key)
    np.testing.assert_array_equal(jax.random.key_data(out.key), jax.random.key_data(expected[0][0].key))
    assert set(extras) == {"sum", "parts"} and len(extras["parts"]) == 2

    again = wrapped(tmp_path)  # a new process: nothing traced yet
    (out2,), extras2 = again(carry, jnp.ones(3), False)
    assert again.loaded == [True]
    np.testing.assert_array_equal(out2.x, out.x)
    np.testing.assert_array_equal(extras2["sum"], extras["sum"])
    (chained,), _ = again(out2, jnp.ones(3), False)  # the carry goes straight back in
    assert again.loaded == [True]
    np.testing.assert_array_equal(chained.x, reference(out, jnp.ones(3), False)[0][0].x)


def test_what_changes_the_program_changes_its_key(tmp_path, carry):
    fn = wrapped(tmp_path)
    fn(carry, jnp.ones(3), False)
    fn(carry, jnp.ones(3), True)  # a static argument
    fn(Carry(jnp.arange(4.0), carry.key, 0.5), jnp.ones(4), False)  # a shape
    fn(Carry(carry.x, carry.key, 2.0), jnp.ones(3), False)  # a static field of a carried module
    wrapped(tmp_path, config="other")(carry, jnp.ones(3), False)  # the run's configuration
    assert len(list(tmp_path.glob("toy-*.jaxexport"))) == 5
    (doubled,), _ = wrapped(tmp_path)(carry, jnp.ones(3), True)
    np.testing.assert_array_equal(doubled.x, reference(carry, jnp.ones(3), True)[0][0].x)


def test_a_damaged_file_is_traced_again(tmp_path, carry, capsys):
    (out,), _ = wrapped(tmp_path)(carry, jnp.ones(3), False)
    (path,) = tmp_path.glob("toy-*.jaxexport")
    path.write_bytes(b"not a program")
    fn = wrapped(tmp_path)
    (again,), _ = fn(carry, jnp.ones(3), False)
    assert fn.loaded == [False] and "could not be read" in capsys.readouterr().out
    np.testing.assert_array_equal(again.x, out.x)
    assert path.stat().st_size > 100  # written again, whole


def test_a_carry_that_changes_structure_is_refused(tmp_path, carry):
    def changes_a_static_field(carry, y, double):
        return (Carry(carry.x + y, carry.key, 1.0),), {}

    with pytest.raises(TypeError, match="toy: a carried argument came back with another structure"):
        wrapped(tmp_path, fn=changes_a_static_field)(carry, jnp.ones(3), False)


def test_a_folder_that_cannot_be_written_only_costs_the_next_start_a_trace(tmp_path, carry, capsys):
    (tmp_path / "exported").write_text("a file where the folder should be")
    fn = wrapped(tmp_path / "exported")
    (out,), _ = fn(carry, jnp.ones(3), False)
    assert "could not be written" in capsys.readouterr().out and fn.loaded == [False]
    np.testing.assert_array_equal(out.x, reference(carry, jnp.ones(3), False)[0][0].x)


def test_a_remembered_value_is_computed_once_per_key_and_again_when_damaged_or_unwritable(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        return 7

    material = {"env": "Toy", "config": {"impl": "jax"}}
    assert remembered(tmp_path, "observation-size", material, Carry, compute) == 7
    assert remembered(tmp_path, "observation-size", material, Carry, compute) == 7  # read, not computed
    assert len(calls) == 1
    assert remembered(tmp_path, "observation-size", {**material, "env": "Other"}, Carry, compute) == 7
    assert len(calls) == 2  # another env, another key
    for path in tmp_path.glob("observation-size-*.json"):
        path.write_text('{"truncated')
    assert remembered(tmp_path, "observation-size", material, Carry, compute) == 7 and len(calls) == 3
    assert remembered(None, "observation-size", material, Carry, compute) == 7 and len(calls) == 4
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    assert remembered(blocked, "observation-size", material, Carry, compute) == 7 and len(calls) == 5
