"""The training loop shared by every on-policy trainer: a Python loop around jitted iterations.

One iteration = rollout -> epochs x minibatches of updates -> observation-statistics update; how the
rollout runs is the env backend's (`trainers._core.envs`: a `lax.scan` for Playground, a host loop for
Gymnasium). `Trainer` is that iteration as a `Learner`; the run around it (evaluation, metrics.jsonl, atomic
checkpoints and, at the end, the policy folder) is the one loop of `trainers._core.lifecycle.run_training`.

Playground runs are data-parallel over every device of every process (`distributed.py`): envs and rollout
sequences split over a 1-D mesh, parameters and optimizer state replicated; the global batch sizes of the
config are the same whatever the device count. Every process runs this loop; process 0 alone writes.
Gymnasium runs (host-side envs) stay on one device of one process.
"""

from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from . import compile_cache, distributed
from .algorithm import AbstractAlgorithm
from .config import TrainArgs
from .envs import make_backend
from .init_from import start_actor
from .lifecycle import Diverged, Learner, Run, run_training
from .model import ActorCritic, Optimizers, ValueMLP, trainable_mask
from .return_norm import ReturnNorm
from .runfolder import RunFolder
from .stats import EpisodeStats
from .update import TrainState, make_update, pop_finite_flags


def prepare_process(args: TrainArgs) -> None:
    """What must happen before a run builds anything: check the config, join a multi-process run (before
    anything starts the XLA backend), point JAX at the compilation cache (before the first compile) and set
    the matmul precision process-wide."""
    args.validate()
    distributed.initialize(args.distributed)
    compile_cache.enable(args.compile_cache)
    jax.config.update("jax_default_matmul_precision", args.matmul_precision)


def policy_spec(args: TrainArgs, env):
    return args.policy.spec(env.obs_dim, env.act_dim, env.action_low, env.action_high, args.env)


def make_optimizers(args: TrainArgs) -> Optimizers:
    rollout = args.rollout
    updates_per_iteration = rollout.epochs * rollout.num_minibatches
    warmup_iterations = -(-args.init.critic_warmup_steps // rollout.steps_per_iteration)
    decay_steps = args.optim.cosine_decay_steps
    decay_iterations = None if decay_steps is None else -(-decay_steps // rollout.steps_per_iteration)
    return Optimizers.make(
        args.optim,
        args.num_iterations * updates_per_iteration,
        actor_frozen_updates=warmup_iterations * updates_per_iteration,
        decay_updates=None if decay_iterations is None else decay_iterations * updates_per_iteration,
    )


def initial_state(algorithm: AbstractAlgorithm, args: TrainArgs, spec, optimizers: Optimizers):
    """The training state a run of `args.seed` starts from, and the key its envs are reset with. With
    `--init-from` the actor is the pretrained policy (the fresh one is still drawn, so the other keys of the
    run are those of a fresh start)."""
    init_key, env_key, train_key = jax.random.split(jax.random.key(args.seed), 3)
    actor_key, critic_key = jax.random.split(init_key)
    actor = start_actor(algorithm.make_actor(spec, args, key=actor_key), args.init, algorithm.name)
    reference = actor if args.init.source is not None else None  # what `path_kl_init` is measured against
    model = ActorCritic(actor, ValueMLP(spec.obs_dim, args.critic, key=critic_key), reference)
    opt_state = optimizers.init(eqx.filter(model, trainable_mask(model)))
    zero = jnp.zeros((), jnp.int32)
    return_norm = ReturnNorm.init(args.rollout.num_envs) if args.rollout.normalize_rewards else None
    return TrainState(model, opt_state, train_key, zero, zero, return_norm), env_key


class Trainer(Run, Learner):
    """Holds the env backend, the jitted functions and the state of one run (its only `runs`).

    `devices` (Playground only) restricts the mesh to these devices; default: all devices of all processes.
    The constructor sets process-wide JAX options first (`prepare_process`).
    """

    def __init__(self, algorithm: AbstractAlgorithm, args: TrainArgs, devices=None):
        prepare_process(args)
        self.algorithm, self.args = algorithm, args
        self.folder = RunFolder(algorithm.name, args, writer=distributed.is_main_process())
        self.run_dir, self.folders, self.runs = self.folder.run_dir, [self.folder], [self]
        with self.folder.released_on_error():
            self._build(devices)

    def _build(self, devices) -> None:
        algorithm, args = self.algorithm, self.args
        self.backend = make_backend(algorithm, args, devices)
        self.spec = policy_spec(args, self.backend.env)
        self.optimizers = make_optimizers(args)
        state, env_key = initial_state(algorithm, args, self.spec, self.optimizers)
        self.stats = EpisodeStats(args.rollout.num_envs)
        update = make_update(algorithm, args, self.optimizers, self.backend.mesh)
        self.state = self.backend.start(state, update, env_key)

    # ------------------------------------------------------------------ what the loop asks for
    @property
    def iteration(self) -> int:
        return int(self.state.iteration)

    @property
    def env_steps(self) -> int:
        return int(self.state.env_steps)

    def state_trees(self) -> dict:
        return {"state": self.state, "stats": self.stats.arrays(), "env": self.backend.checkpoint_tree()}

    def load_state(self, trees: dict, meta: dict) -> None:
        self.state = self.backend.place(trees["state"])
        self.stats.load(trees["stats"])
        self.backend.restore(trees["env"])

    def evaluate(self, deterministic: bool, seed: int, episodes: int | None = None):
        return self.backend.evaluate(self.state.model.actor, seed, deterministic, episodes)

    def save_actor(self, policy_dir: Path) -> None:
        self.algorithm.save_actor(self.state.model.actor, policy_dir)

    def close(self) -> None:
        self.backend.close()

    # ------------------------------------------------------------------ training
    def run(self) -> Path:
        """Train to the end and write the policy folder; the run folder's lock is released however it ends."""
        return run_training(self, self.folders, self.backend.mesh)[0]

    def collect_and_update(self) -> list[tuple[dict, dict]]:
        """One iteration; its metrics as floats. `Diverged` if it went non-finite."""
        self.state, metrics, (rewards, dones) = self.backend.iteration(self.state)
        metrics = {k: float(v) for k, v in metrics.items()}  # one device round trip per iteration
        metrics, bad = pop_finite_flags(metrics)
        if bad is not None:
            raise Diverged(bad)
        self.stats.update(np.asarray(rewards), np.asarray(dones), self.args.rollout.unrolls_per_iteration)
        return [(metrics, self.stats.summary())]
