"""The training loop shared by every on-policy trainer: a Python loop around jitted iterations.

One iteration = rollout (a `lax.scan` for Playground, a host loop for Gymnasium) -> epochs x minibatches
of updates -> observation-statistics update. Around it: evaluation, metrics.jsonl, atomic checkpoints and,
at the end, the policy folder (config.json, model.safetensors, results.json).

Playground runs are data-parallel over every device of every process (`distributed.py`): envs and rollout
sequences split over a 1-D mesh, parameters and optimizer state replicated; the global batch sizes of the
config are the same whatever the device count. Every process runs this loop; process 0 alone writes.
Gymnasium runs (host-side envs) stay on one device of one process.
"""

import time
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from . import distributed, gym_state
from .algorithm import AbstractAlgorithm
from .checkpoint import find_checkpoint, load_checkpoint, save_checkpoint
from .config import TrainArgs, output_path
from .envs import GymnasiumEnv, PlaygroundEnv, make_env
from .evaluation import eval_record, eval_seed, evaluate_gym, make_playground_eval, write_results
from .model import ActorCritic, Optimizers, ValueMLP, trainable_mask
from .rollout import HostCollector, collect_playground
from .rundir import open_run_folder
from .runlog import RunLogger, write_run_json
from .stats import EpisodeStats
from .update import NonFiniteError, TrainState, make_update, pop_finite_flags


def eval_iterations(args: TrainArgs) -> set[int]:
    """1-based iteration counts after which to evaluate (the last iteration always)."""
    n = args.num_iterations
    if args.eval.interval_steps > 0:
        per = args.rollout.steps_per_iteration
        due = {
            i
            for i in range(1, n + 1)
            if (i * per) // args.eval.interval_steps > ((i - 1) * per) // args.eval.interval_steps
        }
    else:
        due = {max(1, round(k * n / args.eval.num_evals)) for k in range(1, args.eval.num_evals + 1)}
    return due | {n}


class Trainer:
    """Holds the env, the jitted functions and the state of one run.

    `devices` (Playground only) restricts the mesh to these devices; default: all devices of all processes.
    The constructor sets `jax_default_matmul_precision` process-wide to `args.matmul_precision`.
    """

    def __init__(self, algorithm: AbstractAlgorithm, args: TrainArgs, devices=None):
        args.validate()
        distributed.initialize(args.distributed)  # first: before anything starts the XLA backend
        jax.config.update("jax_default_matmul_precision", args.matmul_precision)
        self.algorithm, self.args = algorithm, args
        self.is_main = distributed.is_main_process()
        self.run_dir = output_path(args.output_dir, args.env, algorithm.name, args.seed)
        self.lock = open_run_folder(self.run_dir, algorithm.name, args, writer=self.is_main)
        try:
            self._build(devices)
        except BaseException:
            self.release()
            raise

    def _build(self, devices) -> None:
        algorithm, args, rollout = self.algorithm, self.args, self.args.rollout
        self.mesh = None
        if "-v" in args.env:
            if jax.process_count() > 1:
                raise ValueError(
                    f"multi-process training needs a Playground env; {args.env} runs in one process"
                )
            self.env = make_env(args.env, rollout.num_envs, vectorization_mode=rollout.vectorization)
        else:
            self.mesh = distributed.make_mesh(devices)
            self._check_mesh_sizes()
            self.env = make_env(args.env, rollout.num_envs, episode_length=rollout.episode_length,
                                action_repeat=rollout.action_repeat)  # fmt: skip
        env = self.env
        self.spec = args.policy.spec(env.obs_dim, env.act_dim, env.action_low, env.action_high, args.env)
        init_key, env_key, train_key = jax.random.split(jax.random.key(args.seed), 3)
        actor_key, critic_key = jax.random.split(init_key)
        model = ActorCritic(
            algorithm.make_actor(self.spec, args, key=actor_key),
            ValueMLP(env.obs_dim, args.critic, key=critic_key),
        )
        num_updates = args.num_iterations * rollout.epochs * rollout.num_minibatches
        self.optimizers = Optimizers.make(args.optim, num_updates)
        opt_state = self.optimizers.init(eqx.filter(model, trainable_mask(model)))
        self.state = TrainState(
            model, opt_state, train_key, jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32)
        )
        self.stats = EpisodeStats(rollout.num_envs)
        update = make_update(algorithm, args, self.optimizers, self.mesh)
        if isinstance(env, PlaygroundEnv):
            self.state = distributed.put(self.state, distributed.replicated(self.mesh))
            reset = jax.jit(
                lambda key: distributed.constrain(env.reset(key), distributed.batch_sharding(self.mesh))
            )
            self.env_state, self.obs = reset(distributed.put(env_key, distributed.replicated(self.mesh)))
            self._iteration = eqx.filter_jit(self._playground_iteration(update))
            eval_env = PlaygroundEnv.make(args.env, args.eval.num_envs, episode_length=rollout.episode_length,
                                          action_repeat=rollout.action_repeat)  # fmt: skip
            self._eval_playground = make_playground_eval(
                algorithm, eval_env, rollout.episode_length, self.mesh
            )
        else:
            self.env_state, self.obs = None, env.reset(seed=args.seed)
            self.collector = HostCollector(algorithm, env)
            self._update = eqx.filter_jit(update)
        self.elapsed = 0.0
        self.num_records = 0
        self.checkpointed = None  # iteration of the last checkpoint written or loaded

    # ------------------------------------------------------------------ setup
    def release(self) -> None:
        """Give up the run folder's lock (the end of `run` does it; so does the end of the process)."""
        if self.lock is not None:
            self.lock.release()

    def _check_mesh_sizes(self) -> None:
        """Every batch split over the mesh must give each device the same share (clear errors, not XLA's)."""
        rollout = self.args.rollout
        distributed.check_divisible("rollout.num_envs", rollout.num_envs, self.mesh)
        distributed.check_divisible("sequences per minibatch (num_envs * unrolls_per_iteration / "
                                    "num_minibatches)", rollout.batch_size, self.mesh)  # fmt: skip
        distributed.check_divisible("eval.num_envs", self.args.eval.num_envs, self.mesh)

    def _playground_iteration(self, update):
        algorithm, env, rollout = self.algorithm, self.env, self.args.rollout
        split, whole = distributed.batch_sharding(self.mesh), distributed.replicated(self.mesh)

        def iteration(state: TrainState, env_state, obs):
            state_key, rollout_key = jax.random.split(state.key)
            env_state, obs, data = collect_playground(
                algorithm, env, state.model.actor, env_state, obs, rollout_key,
                rollout.unroll_length, rollout.unrolls_per_iteration, split,
            )  # fmt: skip
            state, metrics = update(eqx.tree_at(lambda s: s.key, state, state_key), data)
            # Rewards and dones go to every device (the host-side episode statistics read them whole).
            episodes = (data.reward, data.terminated | data.truncated)
            state, metrics, episodes = distributed.constrain((state, metrics, episodes), whole)
            env_state, obs = distributed.constrain((env_state, obs), split)
            return state, env_state, obs, metrics, episodes

        return iteration

    def _env_trees(self) -> dict:
        if isinstance(self.env, PlaygroundEnv):
            return {"env": (self.env_state, self.obs)}
        return {"env": {"obs": self.obs, **gym_state.get_state(self.env.vec_env)}}

    def save_checkpoint(self) -> None:
        meta = {"iteration": int(self.state.iteration), "env_steps": int(self.state.env_steps),
                "num_records": self.num_records, "elapsed": self.elapsed}  # fmt: skip
        trees = {"state": self.state, "stats": self.stats.arrays(), **self._env_trees()}
        save_checkpoint(self.run_dir / "checkpoint", trees, meta)
        self.checkpointed = meta["iteration"]

    def restore(self) -> bool:
        """Load the latest checkpoint if there is one; returns whether one was loaded."""
        directory = find_checkpoint(self.run_dir / "checkpoint")
        if directory is None:
            return False
        likes = {"state": self.state, "stats": self.stats.arrays(), **self._env_trees()}
        trees, meta = load_checkpoint(directory, likes)
        self.state = trees["state"]
        self.stats.load(trees["stats"])
        if isinstance(self.env, PlaygroundEnv):
            # Checkpoints hold whole arrays: lay them out on this run's mesh, whatever device count wrote them.
            self.state = distributed.put(self.state, distributed.replicated(self.mesh))
            self.env_state, self.obs = distributed.put(trees["env"], distributed.batch_sharding(self.mesh))
        else:
            env_tree = dict(trees["env"])
            self.obs = np.asarray(env_tree.pop("obs"))
            gym_state.set_state(self.env.vec_env, env_tree)
        self.num_records, self.elapsed = meta["num_records"], meta["elapsed"]
        self.checkpointed = meta["iteration"]
        return True

    # ------------------------------------------------------------------ one iteration
    def _collect_and_update(self):
        rollout = self.args.rollout
        if isinstance(self.env, PlaygroundEnv):
            self.state, self.env_state, self.obs, metrics, (rewards, dones) = self._iteration(
                self.state, self.env_state, self.obs
            )
        else:
            state_key, rollout_key = jax.random.split(self.state.key)
            self.obs, data = self.collector.collect(
                self.state.model.actor,
                self.obs,
                rollout_key,
                rollout.unroll_length,
                rollout.unrolls_per_iteration,
            )
            self.state, metrics = self._update(eqx.tree_at(lambda s: s.key, self.state, state_key), data)
            rewards, dones = data.reward, data.terminated | data.truncated
        metrics = {k: float(v) for k, v in metrics.items()}  # one device round trip per iteration
        try:
            metrics = pop_finite_flags(metrics, int(self.state.iteration))
        except NonFiniteError as err:
            kept = (f"the last good checkpoint (iteration {self.checkpointed}) is kept in {self.run_dir / 'checkpoint'}"
                    if self.checkpointed is not None else "no checkpoint had been written")  # fmt: skip
            raise NonFiniteError(f"{err}; nothing of it was saved and {kept}") from None
        self.stats.update(np.asarray(rewards), np.asarray(dones), rollout.unrolls_per_iteration)
        return metrics

    def evaluate(self, deterministic: bool, episodes: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        actor, args = self.state.model.actor, self.args
        seed = eval_seed(args.seed, int(self.state.iteration))
        if isinstance(self.env, PlaygroundEnv):
            key = distributed.put(jax.random.key(seed), distributed.replicated(self.mesh))
            returns, lengths = self._eval_playground(actor, key, deterministic)
            return np.asarray(returns), np.asarray(lengths)
        episodes = episodes or args.eval.episodes
        return evaluate_gym(self.algorithm, actor, args.env, episodes, seed, deterministic)

    def _eval_record(self) -> dict:
        return eval_record(int(self.state.iteration), int(self.state.env_steps), self.evaluate)

    # ------------------------------------------------------------------ the run
    def run(self) -> Path:
        """Train to the end and write the policy folder; the run folder's lock is released however it ends."""
        try:
            self._train()
            return self.finish()
        finally:
            self.release()

    def _train(self) -> None:
        args = self.args
        resumed = args.resume and self.restore()
        if self.is_main:
            write_run_json(self.run_dir, self.algorithm.name, args, self.mesh)
        logger = RunLogger(self.run_dir, args.num_iterations * args.rollout.steps_per_iteration,
                           args.log.tensorboard, args.log.progress, enabled=self.is_main)  # fmt: skip
        if resumed:
            logger.truncate(self.num_records)
        due_evals = eval_iterations(args)
        try:
            while int(self.state.iteration) < args.num_iterations:
                start = time.perf_counter()
                metrics = self._collect_and_update()
                seconds = time.perf_counter() - start
                self.elapsed += seconds
                iteration, env_steps = int(self.state.iteration), int(self.state.env_steps)
                sps = args.rollout.steps_per_iteration / seconds
                record = {"type": "train", "iteration": iteration, "env_steps": env_steps,
                          "time/wall_s": self.elapsed, "time/sps": sps, **self.stats.summary(),
                          **{f"train/{k}": v for k, v in metrics.items()}}  # fmt: skip
                logger.write(record)
                self.num_records += 1
                if iteration in due_evals:
                    logger.write(self._eval_record())
                    self.num_records += 1
                if iteration % args.log.checkpoint_every == 0 or iteration == args.num_iterations:
                    self.save_checkpoint()
                logger.progress(env_steps, sps)
        finally:
            logger.close()

    def finish(self) -> Path:
        """Write the policy folder: config.json, model.safetensors, results.json (and policy.onnx)."""
        args = self.args
        policy_dir = self.run_dir / "policy"
        returns, lengths = self.evaluate(True, args.eval.final_episodes)  # every process: a collective
        if not self.is_main:
            return policy_dir
        self.algorithm.save_actor(self.state.model.actor, policy_dir)
        write_results(policy_dir, env_id=args.env, algo=self.algorithm.name, returns=returns, lengths=lengths,
                      seed=args.seed, env_steps=int(self.state.env_steps),
                      eval_seed=eval_seed(args.seed, int(self.state.iteration)))  # fmt: skip
        if args.log.export_onnx:
            from export.onnx import export_policy_folder

            export_policy_folder(policy_dir)
        if isinstance(self.env, GymnasiumEnv):
            self.env.close()
        return policy_dir
