"""Jitted Playground functions kept on disk as traced programs (`jax.export`), so a warm start skips tracing.

JAX's persistent compilation cache (`compile_cache`) stores compiled executables, but finding one still
needs the lowered program, and so a full trace: for a Playground iteration or evaluation (the MJX physics
inside nested scans) tracing and lowering are most of what a warm start still spends. This module also
stores the traced program, serialized by `jax.export` (StableHLO bytes, no pickle), in the `exported/`
folder of the compilation cache. A later process with the same program key deserializes and calls it, and
that call's compile hits the compilation cache. The process that traced a program calls the exported program
too, so every process of a run (a fresh start, a resume after a kill) runs one and the same program.

The key is a SHA-256 over everything that can change the traced program: the function's name, the run's
configuration (its arguments, less the run folder), the shapes and dtypes of the array arguments, the other
(static) arguments and the tree structure, the source of `gsbpolicy` and `trainers`, the source file of the
env's class (so that a user's own env is keyed by its code; what that file imports is not), and the package
versions that run.json records (JAX, jaxlib, equinox, optax, MuJoCo, MJX, Playground among them). A stored
file that cannot be read is traced and written again, with a one-line notice.

The contract of a wrapped function: `fn(*args) -> (carry, extras)`, where `carry` is a tuple holding new
values of the first `num_carry` arguments, each with its argument's structure (a training state, the env
state, the observations), and `extras` is a tree of dicts, tuples and lists of arrays (metrics, returns) and
of named tuples registered with `jax.export` (`PlaygroundState`, which a reset returns). The wrapper checks
the carry's structure when it traces.
"""

import functools
import hashlib
import inspect
import json
import os
import re
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp

from gsbpolicy._files import atomic_write_text

from .runlog import package_versions

_REPOSITORY = Path(__file__).resolve().parents[2]
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


@functools.cache  # once per process: a key is worked out at every call
def _source_digest() -> str:
    """SHA-256 over the Python source of this repository's `gsbpolicy` and `trainers`."""
    digest = hashlib.sha256()
    for root in ("gsbpolicy", "trainers"):
        for path in sorted((_REPOSITORY / root).rglob("*.py")):
            digest.update(str(path.relative_to(_REPOSITORY)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


_versions = functools.cache(package_versions)  # the versions run.json records, the traced packages among them


def _file_digest(path: str | None) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else None
    except OSError:
        return None


def _static_text(value) -> str:
    """A static argument as stable text: plain values by value, functions and classes by qualified name,
    anything else by its repr without memory addresses."""
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{getattr(value, '__module__', '')}.{value.__qualname__}"
    return _ADDRESS.sub("", repr(value))


def _is_key(leaf) -> bool:
    return jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key)


def _raw(leaf):
    """Typed PRNG keys cross the program's boundary as their raw uint32 data."""
    return jax.random.key_data(leaf) if _is_key(leaf) else leaf


def _typed(raw, like):
    return jax.random.wrap_key_data(raw, impl=jax.random.key_impl(like)) if _is_key(like) else raw


def program_key(name: str, env_source: str | None, material: dict) -> str:
    """The key of a stored program (or value) `name` traced from `material` (JSON-able), together with what
    every key covers: the repository's source, the env's source file, the package versions and the backend."""
    material = {
        **material,
        "name": name,
        "source": _source_digest(),
        "env_source": _file_digest(env_source),
        "versions": _versions(),
        "backend": jax.default_backend(),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()[:32]


def remembered(folder: Path | None, name: str, material: dict, env_class: type, compute):
    """`compute()` (a JSON value that takes a trace to find, such as an env's observation size), kept in
    `folder` under the key of `material` and `env_class`'s source file, so that a warm start reads it instead of
    tracing. With `folder` None, or a file that cannot be read or written, it is computed (and stored if it can).
    """
    if folder is None:
        return compute()
    path = folder / f"{name}-{program_key(name, inspect.getsourcefile(env_class), material)}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        pass
    value = compute()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(value))
    except OSError:
        pass  # the next start computes it again
    return value


class ExportedFunction:
    """`fn` (see the module docstring) run as a stored exported program. One device only: a program
    exported for one device does not lay its arrays out over a mesh."""

    def __init__(self, fn, *, num_carry: int, name: str, config: str, folder: Path, env_source: str | None):
        self._fn, self._num_carry, self._name = fn, num_carry, name
        self._config, self._folder, self._env_source = config, folder, env_source
        self._programs: dict[str, object] = {}  # program key -> jitted call of the exported program
        self.loaded: list[bool] = []  # per program prepared in this process: read from disk (True) or traced

    def __call__(self, *args):
        dyn, static = eqx.partition(args, eqx.is_array)
        leaves, treedef = jax.tree.flatten(dyn)
        key = self._key(leaves, treedef, static)
        if key not in self._programs:
            self._programs[key] = self._prepare(key, leaves, treedef, static)
        carry_out, extras = self._programs[key](*map(_raw, leaves))
        num = len(carry_out)  # the carried arguments' leaves come first in `leaves`
        new = [_typed(out, like) for out, like in zip(carry_out, leaves[:num], strict=True)] + leaves[num:]
        carry = eqx.combine(jax.tree.unflatten(treedef, new), static)[: self._num_carry]
        return carry, extras

    def _key(self, leaves, treedef, static) -> str:
        return program_key(
            self._name,
            self._env_source,
            {
                "config": self._config,
                "avals": [f"{leaf.dtype}{list(leaf.shape)}" for leaf in leaves],
                "tree": _ADDRESS.sub("", str(treedef)),
                "static": [_static_text(v) for v in jax.tree.leaves(static)],
                "static_tree": _ADDRESS.sub("", str(jax.tree.structure(static))),
            },
        )

    def _prepare(self, key: str, leaves, treedef, static):
        path = self._folder / f"{self._name}-{key}.jaxexport"
        exported = None
        if path.exists():
            try:
                exported = jax.export.deserialize(bytearray(path.read_bytes()))
            except Exception as err:  # noqa: BLE001 -- a damaged file is traced again, never fatal
                print(f"note: {path} could not be read ({type(err).__name__}); tracing it again")
        self.loaded.append(exported is not None)
        if exported is None:
            avals = [jax.ShapeDtypeStruct(r.shape, r.dtype) for r in map(_raw, leaves)]
            exported = jax.export.export(jax.jit(self._flat(leaves, treedef, static)))(*avals)
            try:
                self._folder.mkdir(parents=True, exist_ok=True)
                partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
                partial.write_bytes(exported.serialize())
                os.replace(partial, path)  # atomic: a concurrent reader sees the whole file or none
            except OSError as err:  # the run goes on with the program in memory
                print(f"note: {path} could not be written ({err.strerror}); the next start traces it again")
        return jax.jit(exported.call)

    def _flat(self, leaves, treedef, static):
        """`fn` on raw leaves, returning the carried arguments' raw leaves and the extras."""
        fn, num_carry = self._fn, self._num_carry

        def flat(*raw):
            args = eqx.combine(jax.tree.unflatten(treedef, list(map(_typed, raw, leaves))), static)
            carry, extras = fn(*args)
            carry_dyn, carry_static = eqx.partition(tuple(carry), eqx.is_array)
            args_dyn, args_static = eqx.partition(tuple(args[:num_carry]), eqx.is_array)
            same = jax.tree.structure(carry_dyn) == jax.tree.structure(args_dyn) and all(
                a is b or a == b
                for a, b in zip(jax.tree.leaves(carry_static), jax.tree.leaves(args_static), strict=False)
            )
            if not same or len(jax.tree.leaves(carry_static)) != len(jax.tree.leaves(args_static)):
                raise TypeError(f"{self._name}: a carried argument came back with another structure")
            return tuple(map(_raw, jax.tree.leaves(carry_dyn))), extras

        return flat
