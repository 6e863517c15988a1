"""Several seeds of one Playground experiment in one process (`--seeds 0 1 2`), as PureJaxRL runs them.

The whole iteration (rollout scan + epochs x minibatches of updates) takes a leading seed axis on the training
state and the env state, so it is traced and compiled once and runs as one program. How the seeds share it
(`--seed-batching`): `vmap` batches them, which fills a GPU that one run of the paper geometry leaves partly
idle; `map` (`lax.map`) runs them one after another inside the program, which is what a CPU does anyway, and
keeps each seed bit-identical to the seed run alone. "auto" picks vmap on accelerators and map on CPUs.
Each seed keeps the ordinary run folder of a single-seed run (run.json, metrics.jsonl, checkpoints,
`--resume`, the policy folder), its own `RunFolder`: the group is one `Learner` whose `runs` are the seeds,
trained by the same loop as a single run (`trainers._core.lifecycle.run_training`), so nothing downstream can
tell the difference except `seed_group` in run.json and the shared timings.

What each seed computes is its single-seed run: the same initial state, keys and env resets, and the same
iteration function. Evaluations run per seed with the single-seed evaluator. `tests/test_seed_group.py`
checks a grouped seed against the same seed run alone (bit for bit with map; with vmap, XLA batches the
reductions and the results agree to float32 rounding).

Checkpoints are written in two phases for the whole group (every seed's new checkpoint is written before
any is made current), so a kill at any moment leaves the seeds at most one phase apart, and a resume rolls
the lagging seeds forward to the pending checkpoint every seed has (`align_checkpoints`).
"""

import dataclasses
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from . import distributed
from .algorithm import AbstractAlgorithm
from .checkpoint import CheckpointError, commit_checkpoint, find_checkpoint, pending_iteration, read_meta
from .config import TrainArgs, for_seed
from .envs.playground_backend import PlaygroundBackend, PlaygroundEvaluator
from .lifecycle import Diverged, Learner, Run, run_training
from .loop import initial_state, make_optimizers, policy_spec, prepare_process
from .runfolder import RunFolder
from .stats import EpisodeStats
from .update import make_update, pop_finite_flags


def stack(trees: list):
    """Pytrees of one structure -> one pytree whose array leaves have a new leading axis."""
    return jax.tree.map(lambda *xs: jnp.stack(xs) if eqx.is_array(xs[0]) else xs[0], *trees)


def unstack(tree, index: int):
    """Entry `index` of a `stack`ed pytree."""
    return jax.tree.map(lambda x: x[index] if eqx.is_array(x) else x, tree)


def align_checkpoints(run_dirs: list[Path]) -> None:
    """Before a group resumes: roll every seed whose current checkpoint is behind the group's newest one
    forward to its pending checkpoint of that iteration (a kill between a group's two checkpoint phases
    leaves exactly that). Seeds that cannot be aligned are a clear error."""
    current = {}
    for run_dir in run_dirs:
        found = find_checkpoint(run_dir / "checkpoint")
        current[run_dir] = None if found is None else read_meta(found)["iteration"]
    newest = max((i for i in current.values() if i is not None), default=None)
    for run_dir, iteration in current.items():
        if iteration == newest:
            continue
        if pending_iteration(run_dir / "checkpoint") != newest:
            found = ", ".join(f"{d.name}: {i}" for d, i in current.items())
            raise CheckpointError(
                f"the seeds' checkpoints are at different iterations ({found}) and cannot be aligned; resume "
                "these seeds as separate runs (without --seeds)"
            )
        if find_checkpoint(run_dir / "checkpoint") != run_dir / "checkpoint":  # a kill between the renames
            (run_dir / "checkpoint.old").rename(run_dir / "checkpoint")
        commit_checkpoint(run_dir / "checkpoint")


def over_seeds(fn, batching: str):
    """`fn` applied along the leading seed axis of its arguments: `vmap` (one batched program: the seeds fill
    a GPU) or `map` (`lax.map`: the seeds one after another inside one program, each exactly the unbatched
    computation; on a CPU, which batching does not speed up, this keeps a grouped seed bit-identical to the
    seed run alone). Non-array leaves (static model parts) pass through."""
    if batching == "vmap":
        return eqx.filter_vmap(fn)

    def mapped(*args):
        dynamic, static = eqx.partition(args, eqx.is_array)
        out_static = []

        def one(arrays):
            out_arrays, out_rest = eqx.partition(fn(*eqx.combine(arrays, static)), eqx.is_array)
            out_static.append(out_rest)  # at trace time: the outputs' static parts, the same for every seed
            return out_arrays

        return eqx.combine(jax.lax.map(one, dynamic), out_static[0])

    return mapped


def batching_for(setting: str) -> str:
    """`--seed-batching auto`: vmap on accelerators, map on CPUs."""
    if setting != "auto":
        return setting
    return "map" if jax.devices()[0].platform == "cpu" else "vmap"


class GroupBackend(PlaygroundBackend):
    """Playground envs of every seed on one device; the iteration and the reset mapped over seeds."""

    def __init__(self, algorithm: AbstractAlgorithm, args: TrainArgs):
        super().__init__(algorithm, args, devices=jax.devices()[:1])
        self.batching = batching_for(args.seed_batching)

    def start(self, state, update, env_key):
        env, mesh = self.env, self.mesh

        def reset(key):
            return distributed.constrain(env.reset(key), distributed.batch_sharding(mesh))

        reset = eqx.filter_jit(over_seeds(reset, self.batching))
        self.env_state, self.obs = reset(distributed.put(env_key, distributed.replicated(mesh)))
        self._iteration = eqx.filter_jit(over_seeds(self._make_iteration(update), self.batching))
        self.evaluator = PlaygroundEvaluator(self.algorithm, self.args, mesh)
        return self.place(state)

    def evaluate(self, actor, seed: int, deterministic: bool, episodes: int | None = None):
        raise TypeError("evaluate one seed's actor with `SeedGroup` (the group's actors are stacked)")


class Member(Run):
    """Seed `index` of a `SeedGroup`, one of its `runs` (the group does the training)."""

    def __init__(self, group: "SeedGroup", index: int):
        self.group, self.index = group, index

    @property
    def iteration(self) -> int:
        return int(self.group.state.iteration[self.index])

    @property
    def env_steps(self) -> int:
        return int(self.group.state.env_steps[self.index])

    def state_trees(self) -> dict:
        group, i = self.group, self.index
        envs = unstack(group.backend.checkpoint_tree(), i)
        return {"state": unstack(group.state, i), "stats": group.stats[i].arrays(), "env": envs}

    def load_state(self, trees: dict, meta: dict) -> None:
        self.group.replace(self.index, trees)

    def evaluate(self, deterministic: bool, seed: int, episodes: int | None = None):
        group = self.group
        actor = unstack(group.state.model.actor, self.index)
        return group.evaluator(actor, seed, deterministic, episodes)

    def save_actor(self, policy_dir: Path) -> None:
        self.group.algorithm.save_actor(unstack(self.group.state.model.actor, self.index), policy_dir)


class SeedGroup(Learner):
    """`args.seeds` trained side by side on one device; `run()` returns their policy folders."""

    def __init__(self, algorithm: AbstractAlgorithm, args: TrainArgs):
        prepare_process(args)
        self.algorithm, self.args = algorithm, args
        self.seed_args = [for_seed(args, seed) for seed in args.seeds]
        # One progress bar for the group (the first seed's); every seed logs its own metrics.
        self.folders = []
        try:
            for i, one in enumerate(self.seed_args):
                quiet = (
                    one
                    if i == 0
                    else dataclasses.replace(one, log=dataclasses.replace(one.log, progress=False))
                )
                self.folders.append(RunFolder(algorithm.name, quiet))
            self._build()
        except BaseException:
            self.release()
            raise

    def _build(self) -> None:
        algorithm, first = self.algorithm, self.seed_args[0]
        self.backend = GroupBackend(algorithm, first)
        spec = policy_spec(first, self.backend.env)
        optimizers = make_optimizers(first)  # the same for every seed: only the seed differs
        starts = [initial_state(algorithm, one, spec, optimizers) for one in self.seed_args]
        states, env_keys = [s for s, _ in starts], [k for _, k in starts]
        self.stats = [EpisodeStats(first.rollout.num_envs) for _ in self.seed_args]
        update = make_update(algorithm, first, optimizers, self.backend.mesh)
        self.state = self.backend.start(stack(states), update, jnp.stack(env_keys))
        self.evaluator = self.backend.evaluator
        self.runs = [Member(self, i) for i in range(len(self.seed_args))]

    @property
    def run_dirs(self) -> list[Path]:
        return [folder.run_dir for folder in self.folders]

    def release(self) -> None:
        for folder in self.folders:
            folder.release()

    def replace(self, index: int, trees: dict) -> None:
        """Seed `index` continues from loaded checkpoint trees."""
        seeds = range(len(self.seed_args))
        self.state = self.backend.place(
            stack([trees["state"] if i == index else unstack(self.state, i) for i in seeds])
        )
        self.stats[index].load(trees["stats"])
        envs = self.backend.checkpoint_tree()
        self.backend.restore(stack([trees["env"] if i == index else unstack(envs, i) for i in seeds]))

    def run(self) -> list[Path]:
        """Resume if asked (the seeds' checkpoints aligned first), train every seed to the end and write each
        seed's policy folder; the folders' locks are released however it ends."""
        try:
            if self.args.resume:
                align_checkpoints(self.run_dirs)
        except BaseException:
            self.release()
            raise
        return run_training(self, self.folders, self.backend.mesh, group=self.args.seeds)

    def collect_and_update(self) -> list[tuple[dict, dict]]:
        """One iteration of every seed: per seed, its metrics and episode summary. The first seed that went
        non-finite stops the group (`Diverged`, recorded in that seed's folder)."""
        self.state, metrics, (rewards, dones) = self.backend.iteration(self.state)
        metrics = jax.tree.map(np.asarray, metrics)  # one device round trip per iteration
        rewards, dones = np.asarray(rewards), np.asarray(dones)
        per_seed = []
        for i, stats in enumerate(self.stats):
            values, bad = pop_finite_flags({k: float(v[i]) for k, v in metrics.items()})
            if bad is not None:
                raise Diverged(f"{bad} (seed {self.seed_args[i].seed}; the group stops)", run=i)
            stats.update(rewards[i], dones[i], self.args.rollout.unrolls_per_iteration)
            per_seed.append(values)
        return [(values, stats.summary()) for values, stats in zip(per_seed, self.stats, strict=True)]

    def close(self) -> None:
        self.backend.close()
