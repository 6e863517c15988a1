"""One run's life, the same for every trainer: the run folder and its lock, resume, run.json, metrics.jsonl,
the due evaluations and checkpoints, the stop on a non-finite update, and the end (final deterministic
evaluation -> policy folder -> results.json -> optional ONNX).

A trainer supplies only what differs, as a `Learner`: how it trains (calling `RunLifecycle.iteration_done`
after every iteration), what its checkpoint holds, how it evaluates and how it saves its actor.
"""

import abc
import contextlib
import datetime
import functools
import json
import shutil
from pathlib import Path

from gsbpolicy._files import atomic_write_text
from gsbpolicy.gym import EnvOutputError

from .checkpoint import CheckpointError, commit_checkpoint, find_checkpoint, load_checkpoint, write_checkpoint
from .config import TrainArgs, output_path
from .evaluation import LearningWatch, eval_record, eval_seed, write_results
from .rundir import open_run_folder
from .runlog import RunLogger, experiment_sha256, write_run_json
from .update import NonFiniteError


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


BEST_POLICY, BEST_PENDING, BEST_RECORD = "best_policy", "best_policy.pending", "best.json"
"""`--log.keep-best`: the folder of the best evaluated policy, the candidate written at an evaluation (it becomes
`best_policy` when the next checkpoint is committed, so that the best kept always belongs to the evaluations a
resume keeps), and the record inside both saying which evaluation it was."""

DIVERGED_FILE = "diverged.json"
"""Written into the run folder when a run stops on a non-finite update (the iteration, the quantity that went
non-finite, the last good checkpoint), so that what reads the folder afterwards (the benchmark runner) can tell
a run that diverged from one that crashed; the next attempt of the run removes it when it starts."""


class Learner(abc.ABC):
    """What a trainer supplies to its `RunLifecycle`."""

    @property
    @abc.abstractmethod
    def iteration(self) -> int:
        """Iterations trained so far."""

    @property
    @abc.abstractmethod
    def env_steps(self) -> int:
        """Env steps collected so far."""

    @abc.abstractmethod
    def train(self) -> None:
        """Train up to `num_iterations`, calling `RunLifecycle.iteration_done` after every iteration."""

    @abc.abstractmethod
    def checkpoint_trees(self) -> dict:
        """{name: pytree of arrays} of everything training continues from (also the skeletons to load)."""

    def checkpoint_fields(self) -> dict:
        """Extra JSON fields of the checkpoint record (none by default)."""
        return {}

    @abc.abstractmethod
    def load_checkpoint(self, trees: dict, meta: dict) -> None:
        """Continue from loaded `checkpoint_trees` and the checkpoint record `meta`."""

    @abc.abstractmethod
    def evaluate(self, deterministic: bool, seed: int, episodes: int | None = None):
        """Per-episode (returns, lengths) of the current policy, as numpy; every process calls it."""

    @abc.abstractmethod
    def save_actor(self, policy_dir: Path) -> None:
        """Write the deployable policy folder (config.json + model.safetensors)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the training envs."""


class RunLifecycle:
    """The run folder of one run of `algo` with `args`, locked from construction to the end of `run`.

    `writer=False` (processes other than 0 of a multi-process run) only checks the folder and writes nothing;
    such a process still takes part in every collective (checkpoints, evaluations).
    """

    def __init__(self, algo: str, args: TrainArgs, writer: bool = True):
        self.algo, self.args, self.writer = algo, args, writer
        self.run_dir = output_path(args.output_dir, args.env, algo, args.seed)
        self.lock = open_run_folder(self.run_dir, algo, args, writer=writer)
        self.due_evals = eval_iterations(args)
        self.num_records, self.elapsed = 0, 0.0
        self.checkpointed = None  # iteration of the last checkpoint written or loaded
        self.iteration = 0  # iterations done so far: logged and, when due, checkpointed (or loaded)
        self.logger = None
        self.experiment = None  # run.json's experiment hash, which every checkpoint record carries
        self.watch = LearningWatch()
        self.best = None  # --log.keep-best: the best deterministic evaluation return so far

    def release(self) -> None:
        """Give up the run folder's lock (the end of `run` does it; so does the end of the process)."""
        if self.lock is not None:
            self.lock.release()

    @contextlib.contextmanager
    def released_on_error(self):
        """Give the lock up if setting up the trainer fails (a half-built trainer never runs)."""
        try:
            yield
        except BaseException:
            self.release()
            raise

    def run(self, learner: Learner, mesh=None) -> Path:
        """Resume if asked, train to the end and write the policy folder; the lock is released however it
        ends. `mesh` (recorded in run.json) is the devices the batch is split over."""
        try:
            self.begin(learner, mesh)
            try:
                learner.train()
            except EnvOutputError as err:  # the env's fault, not training's: said and recorded as such
                raise self.non_finite(str(err), self.iteration + 1, err.record) from None
            finally:
                self.logger.close()
            return self.finish(learner)
        finally:
            self.release()

    def begin(self, learner: Learner, mesh=None, group: tuple[int, ...] | None = None) -> None:
        """Load the checkpoint into `learner` if resuming, write run.json and open the metrics log.
        `group`: the seeds trained together in this process, if any (recorded in run.json)."""
        resumed = self.args.resume and self.restore(learner)
        self.settle_best_candidate()
        if self.writer:
            (self.run_dir / DIVERGED_FILE).unlink(missing_ok=True)
            self.experiment = experiment_sha256(
                write_run_json(self.run_dir, self.algo, self.args, mesh, group)
            )
        log = self.args.log
        self.logger = RunLogger(self.run_dir, self.args.num_iterations * self.args.rollout.steps_per_iteration,
                                log.tensorboard, log.progress, enabled=self.writer)  # fmt: skip
        if self.args.resume:
            # Metrics always agree with the checkpoint resumed: its records stay, the interrupted attempt's go.
            # With no checkpoint yet (a stop before the first one), that is all of them: a clean start.
            dropped = self.logger.truncate(self.num_records)
            if not resumed and self.writer:
                print(
                    f"--resume: {self.run_dir} holds no checkpoint yet (the run stopped before its first "
                    f"one): training starts again from iteration 1, and the {dropped} metrics records of the "
                    "interrupted attempt are discarded",
                    flush=True,
                )

    def restore(self, learner: Learner) -> bool:
        """Load the latest checkpoint into `learner` if there is one; returns whether one was loaded."""
        directory = find_checkpoint(self.run_dir / "checkpoint")
        if directory is None:
            return False
        trees, meta = load_checkpoint(directory, learner.checkpoint_trees())
        learner.load_checkpoint(trees, meta)
        if (learner.iteration, learner.env_steps) != (meta["iteration"], meta["env_steps"]):
            raise CheckpointError(
                f"checkpoint record {directory / 'meta.json'} says iteration {meta['iteration']} at "
                f"{meta['env_steps']} env steps, but its training state is at iteration {learner.iteration}, "
                f"{learner.env_steps} env steps: the checkpoint is corrupted; cannot resume"
            )
        self.num_records, self.elapsed = meta["num_records"], meta["elapsed"]
        self.checkpointed = self.iteration = meta["iteration"]
        self.best = meta.get("best_return")
        return True

    def settle_best_candidate(self) -> None:
        """At a resume, the pending best policy left by the interrupted attempt: the best if the checkpoint
        resumed covers its evaluation (a kill between the commit and the promotion), else gone with the
        evaluations the resume discards."""
        pending = self.run_dir / BEST_PENDING
        if not (self.writer and pending.is_dir()):
            return
        if json.loads((pending / BEST_RECORD).read_text())["iteration"] <= (self.checkpointed or 0):
            self._promote_best()
        else:
            shutil.rmtree(pending)

    def save_checkpoint(self, learner: Learner) -> None:
        """Write the checkpoint (a collective: every process calls it; process 0 writes)."""
        self.write_checkpoint(learner)
        self.commit_checkpoint()

    def write_checkpoint(self, learner: Learner) -> None:
        """The first half of `save_checkpoint`: the new checkpoint written beside the current one, which stays
        the one a resume loads until `commit_checkpoint` (a seed group writes all its seeds' new checkpoints
        before it commits any; see `trainers._core.seed_group`)."""
        meta = {"iteration": learner.iteration, "env_steps": learner.env_steps, **learner.checkpoint_fields(),
                "num_records": self.num_records, "elapsed": self.elapsed,
                "metrics_sha256": self.logger.metrics_sha256, "experiment_sha256": self.experiment,
                "best_return": self.best}  # fmt: skip
        write_checkpoint(self.run_dir / "checkpoint", learner.checkpoint_trees(), meta)
        self.checkpointed = meta["iteration"]

    def commit_checkpoint(self) -> None:
        """The second half of `save_checkpoint`: the checkpoint `write_checkpoint` wrote becomes the current one."""
        if self.writer:
            commit_checkpoint(self.run_dir / "checkpoint")
            if (self.run_dir / BEST_PENDING).is_dir():
                self._promote_best()

    def _promote_best(self) -> None:
        """The pending best policy becomes `best_policy/`."""
        best = self.run_dir / BEST_POLICY
        if best.is_dir():
            shutil.rmtree(best)
        (self.run_dir / BEST_PENDING).rename(best)

    def keep_if_best(self, learner: Learner, record: dict) -> None:
        """`--log.keep-best`: save the policy just evaluated as the pending best if it beats every earlier one."""
        value = record["eval/return_deterministic"]
        if self.best is not None and value <= self.best:
            return
        self.best = value
        if not self.writer:
            return
        pending = self.run_dir / BEST_PENDING
        if pending.is_dir():
            shutil.rmtree(pending)
        learner.save_actor(pending)
        best = {
            "label": "the best deterministic evaluation during training (policy/ is the last iteration's)",
            "env_id": self.args.env,
            "algo": self.algo,
            "iteration": record["iteration"],
            "env_steps": record["env_steps"],
            "mean": value,
            "std": record["eval/return_deterministic_std"],
            "n_episodes": self.args.eval.episodes,
        }
        atomic_write_text(pending / BEST_RECORD, json.dumps(best, indent=2) + "\n")

    def non_finite(self, what: str, iteration: int, env_record: dict | None = None) -> NonFiniteError:
        """The error that stops a run whose `iteration` went non-finite, before anything of that iteration is
        logged or saved; the run folder records the stop in `DIVERGED_FILE`. `what` is the quantity the update
        made non-finite, or, with `env_record` (env, quantity, value, env_step), what the env returned."""
        kept = (
            f"the last good checkpoint (iteration {self.checkpointed}) is kept in {self.run_dir / 'checkpoint'}"
            if self.checkpointed is not None
            else "no checkpoint had been written"
        )
        if self.writer:
            record = {
                "iteration": iteration,
                "quantity": what,
                **(env_record or {}),  # env, quantity (observation[i] or reward), value, env_step
                "checkpoint_iteration": self.checkpointed,
                "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            }
            atomic_write_text(self.run_dir / DIVERGED_FILE, json.dumps(record))
        if env_record:
            return NonFiniteError(
                f"training stopped in iteration {iteration}: {what}; nothing of it was saved and {kept}"
            )
        return NonFiniteError(
            f"training stopped: non-finite {what} (NaN or inf) in iteration {iteration}; "
            f"nothing of it was saved and {kept}"
        )

    def iteration_done(self, learner: Learner, metrics: dict, episodes: dict, seconds: float) -> None:
        """Log an iteration that took `seconds` of training (`metrics`: its losses and diagnostics;
        `episodes`: the training episodes it finished), then evaluate and checkpoint when due."""
        self.record_iteration(learner, metrics, episodes, seconds)
        if self.checkpoint_due(learner.iteration):
            self.save_checkpoint(learner)
        self.iteration = learner.iteration
        self.logger.progress(learner.env_steps, self.args.rollout.steps_per_iteration / seconds)

    def record_iteration(self, learner: Learner, metrics: dict, episodes: dict, seconds: float) -> None:
        """The logging half of `iteration_done`: the train record, then the evaluation when due."""
        self.elapsed += seconds
        iteration, env_steps = learner.iteration, learner.env_steps
        sps = self.args.rollout.steps_per_iteration / seconds
        record = {
            "type": "train",
            "iteration": iteration,
            "env_steps": env_steps,
            "time/wall_s": self.elapsed,
            "time/sps": sps,
            **episodes,
            **{f"train/{k}": v for k, v in metrics.items()},
        }
        self._write(record)
        if iteration in self.due_evals:
            record = eval_record(iteration, env_steps, functools.partial(self.evaluate, learner))
            self._write(record)
            if self.args.log.keep_best:
                self.keep_if_best(learner, record)
            warning = self.watch.after(record)
            if warning and self.writer:
                print(warning, flush=True)

    def checkpoint_due(self, iteration: int) -> bool:
        return iteration % self.args.log.checkpoint_every == 0 or iteration == self.args.num_iterations

    def _write(self, record: dict) -> None:
        self.logger.write(record)
        self.num_records += 1

    def evaluate(self, learner: Learner, deterministic: bool, episodes: int | None = None):
        """`learner.evaluate` with the evaluation seed of its current iteration."""
        return learner.evaluate(deterministic, eval_seed(self.args.seed, learner.iteration), episodes)

    def finish(self, learner: Learner) -> Path:
        """Write the policy folder: config.json, model.safetensors, results.json (and policy.onnx)."""
        args, policy_dir = self.args, self.run_dir / "policy"
        # Every process evaluates (a collective); process 0 alone writes.
        returns, lengths = self.evaluate(learner, True, args.eval.final_episodes)
        if not self.writer:
            return policy_dir
        learner.save_actor(policy_dir)
        write_results(policy_dir, env_id=args.env, algo=self.algo, returns=returns, lengths=lengths, seed=args.seed,
                      env_steps=learner.env_steps, eval_seed=eval_seed(args.seed, learner.iteration))  # fmt: skip
        if args.log.export_onnx:
            from export.onnx import export_policy_folder

            export_policy_folder(policy_dir)
        learner.close()
        return policy_dir
