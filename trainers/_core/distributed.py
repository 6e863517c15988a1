"""Data parallelism on JAX's own machinery: one `Mesh` axis "data", `NamedSharding`s and `jax.jit`.

The Playground path keeps the batch axis of everything that has one (env states, observations, rollout
sequences, minibatches) split over the mesh's devices and everything else (parameters, optimizer state,
keys, counters) replicated. Under `jit` XLA's SPMD partitioner then runs each device on its share of the
envs and turns every mean over the global batch (losses, advantage statistics, the normalizer update)
into a local sum plus an all-reduce: gradients are averaged by the compiler's collectives. One device is
the same code on a 1-device mesh.

Several processes (one per node or per GPU) join through `jax.distributed.initialize`; the mesh then
spans the devices of all of them, every process runs the same program, and process 0 alone writes files.
"""

import os
from collections.abc import Sequence

import equinox as eqx
import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

AXIS = "data"
"""The mesh axis the batch is split over."""

_CLUSTER_VARIABLES = ("JAX_COORDINATOR_ADDRESS", "SLURM_STEP_NUM_TASKS", "OMPI_COMM_WORLD_SIZE")


def cluster_detected() -> bool:
    """Whether this process was started as one of several by a launcher `jax.distributed` understands.

    `JAX_COORDINATOR_ADDRESS` is set by hand (with JAX_NUM_PROCESSES and JAX_PROCESS_ID); Slurm's `srun`
    and Open MPI's `mpirun` set their task counts. A single task (plain `python` inside `sbatch`) is not
    a cluster run: initializing would wait for peers that never come.
    """
    if os.environ.get("JAX_COORDINATOR_ADDRESS"):
        return True
    return any(int(os.environ.get(name, "1")) > 1 for name in _CLUSTER_VARIABLES[1:])


def initialize(requested: bool) -> None:
    """Join the other processes of a multi-process run (`--distributed`, or a detected cluster launch).

    Must run before anything starts the XLA backend (any computation, `jax.devices()`...), which is why the
    trainer calls it first. `jax.distributed.initialize()` reads the coordinator address, process count and
    process id from Slurm or Open MPI; a hand-made launch sets JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES
    and JAX_PROCESS_ID (the last two are read here: JAX reads only the first). Under a launcher JAX gives
    each process the one GPU of its local rank; JAX_LOCAL_DEVICE_IDS=0,1,... gives one process several.
    """
    if not (requested or cluster_detected()) or jax.distributed.is_initialized():
        return
    # Called after the backend started (a computation already ran in this process), JAX itself refuses
    # with a RuntimeError that says so: training must then start from a fresh process.
    count, index = os.environ.get("JAX_NUM_PROCESSES"), os.environ.get("JAX_PROCESS_ID")
    jax.distributed.initialize(
        num_processes=None if count is None else int(count), process_id=None if index is None else int(index)
    )


def is_main_process() -> bool:
    """Process 0 writes logs, checkpoints and the policy folder; the others only compute."""
    return jax.process_index() == 0


def make_mesh(devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A 1-D mesh over `devices` (default: every device of every process)."""
    devices = jax.devices() if devices is None else list(devices)
    return Mesh(np.asarray(devices), (AXIS,))


def batch_sharding(mesh: Mesh) -> NamedSharding:
    """Leading (batch) axis split over the mesh, the other axes whole."""
    return NamedSharding(mesh, PartitionSpec(AXIS))


def replicated(mesh: Mesh) -> NamedSharding:
    """A whole copy on every device."""
    return NamedSharding(mesh, PartitionSpec())


def check_divisible(what: str, size: int, mesh: Mesh) -> None:
    """A batch split over the mesh needs a whole number of entries per device."""
    devices = mesh.devices.size
    if size % devices:
        raise ValueError(
            f"{what} = {size} is not divisible by the {devices} devices of the mesh; choose sizes that are "
            f"multiples of {devices} (or run on fewer devices)"
        )


def _for(x, sharding: NamedSharding) -> NamedSharding:
    # XLA gives empty arrays (MJX keeps some [B, 0] fields) a replicated layout whatever it is asked; asking
    # for that layout from the start keeps a jitted function's outputs laid out like its inputs, and so
    # avoids a second compile on the next call.
    return sharding if x.size else replicated(sharding.mesh)


def constrain(tree, sharding: NamedSharding):
    """`with_sharding_constraint` on every array leaf (use inside jit); other leaves pass through."""

    def leaf(x):
        return jax.lax.with_sharding_constraint(x, _for(x, sharding)) if eqx.is_array(x) else x

    return jax.tree.map(leaf, tree)


def put(tree, sharding: NamedSharding):
    """Place host or device arrays on the mesh with `sharding`, from any process.

    Every process holds the whole value (the same initialisation, or the same checkpoint) and hands over
    the pieces its own devices need; this is also how a checkpoint written with one device count is laid
    out on another. PRNG key arrays travel as their raw key data.
    """

    def leaf(x):
        if not eqx.is_array(x):
            return x
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            return jax.random.wrap_key_data(leaf(jax.random.key_data(x)), impl=jax.random.key_impl(x))
        value = np.asarray(x)
        return jax.make_array_from_callback(value.shape, _for(value, sharding), lambda index: value[index])

    return jax.tree.map(leaf, tree)


def to_host(x) -> np.ndarray:
    """The whole value of a (possibly multi-process) array as numpy; a collective: every process calls it."""
    if isinstance(x, jax.Array) and not (x.is_fully_addressable or x.is_fully_replicated):
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(x)
