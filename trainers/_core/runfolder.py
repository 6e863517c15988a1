"""The run folder of one run as one passive object: its paths and lock, `--resume`'s restore of what it holds,
run.json, the metrics log (`metrics`), the checkpoint store (`checkpoints`), the keep-best candidate (`best`),
the stop record of a diverged run and the policy folder's results.json.

It never calls the trainer: the loop (`trainers._core.lifecycle.run_training`) hands it the trees, records and
numbers to write, and saves the policy itself into the folders the run folder names.
"""

import contextlib
import datetime
import json

from gsbpolicy._files import atomic_write_text

from .best import BestPolicy
from .checkpoint import CheckpointError, CheckpointStore, find_checkpoint, load_checkpoint
from .config import TrainArgs, output_path
from .evaluation import LearningWatch, write_results
from .rundir import open_run_folder
from .runlog import RunLogger, experiment_sha256, write_run_json
from .update import NonFiniteError

DIVERGED_FILE = "diverged.json"
"""Written into the run folder when a run stops on a non-finite update (the iteration, the quantity that went
non-finite, the last good checkpoint), so that what reads the folder afterwards (the benchmark runner) can tell
a run that diverged from one that crashed; the next attempt of the run removes it when it starts."""


class RunFolder:
    """The run folder of one run of `algo` with `args`, locked from construction until `release`.

    `writer=False` (processes other than 0 of a multi-process run) only checks the folder and writes nothing;
    such a process still takes part in every collective (checkpoints, evaluations).
    """

    def __init__(self, algo: str, args: TrainArgs, writer: bool = True):
        self.algo, self.args, self.writer = algo, args, writer
        self.run_dir = output_path(args.output_dir, args.env, algo, args.seed)
        self.policy_dir = self.run_dir / "policy"
        self.lock = open_run_folder(self.run_dir, algo, args, writer=writer)
        self.checkpoints = CheckpointStore(self.run_dir / "checkpoint", writer)
        self.best = BestPolicy(self.run_dir, algo, args.env, args.eval.episodes, writer)
        self.metrics = None  # the RunLogger of metrics.jsonl, opened by `start`
        self.watch = LearningWatch()
        self.experiment = None  # run.json's experiment hash, which every checkpoint record carries
        self.elapsed = 0.0  # seconds of training so far (evaluations and checkpoints excluded)
        self.iteration = 0  # iterations done: logged and, when due, checkpointed (or loaded)
        self._resumed = None  # (checkpoint folder, record) loaded by `restore`

    def release(self) -> None:
        """Give up the folder's lock (the end of the run does it; so does the end of the process)."""
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

    def restore(self, skeleton: dict) -> tuple[dict, dict] | None:
        """`--resume`: the latest checkpoint's trees (laid out as `skeleton`) and record, whose counters the
        folder continues from; None when not resuming or when the folder holds no checkpoint yet."""
        directory = find_checkpoint(self.run_dir / "checkpoint") if self.args.resume else None
        if directory is None:
            return None
        trees, meta = load_checkpoint(directory, skeleton)
        self.elapsed, self.best.value = meta["elapsed"], meta.get("best_return")
        self.checkpoints.iteration = self.iteration = meta["iteration"]
        self._resumed = directory, meta
        return trees, meta

    def check_restored(self, iteration: int, env_steps: int) -> None:
        """The training state loaded from the restored checkpoint is at the iteration its record says."""
        directory, meta = self._resumed
        if (iteration, env_steps) != (meta["iteration"], meta["env_steps"]):
            raise CheckpointError(
                f"checkpoint record {directory / 'meta.json'} says iteration {meta['iteration']} at "
                f"{meta['env_steps']} env steps, but its training state is at iteration {iteration}, "
                f"{env_steps} env steps: the checkpoint is corrupted; cannot resume"
            )

    def start(self, mesh=None, group: tuple[int, ...] | None = None) -> None:
        """Settle a keep-best candidate, write run.json and open the metrics log (after `restore`). `mesh`: the
        devices the batch is split over; `group`: the seeds trained together in this process (run.json)."""
        args, log = self.args, self.args.log
        self.best.settle(self.checkpoints.iteration or 0)
        if self.writer:
            (self.run_dir / DIVERGED_FILE).unlink(missing_ok=True)
            self.experiment = experiment_sha256(write_run_json(self.run_dir, self.algo, args, mesh, group))
        total = args.num_iterations * args.rollout.steps_per_iteration
        self.metrics = RunLogger(self.run_dir, total, log.tensorboard, log.progress, enabled=self.writer)
        if args.resume:
            # Metrics always agree with the checkpoint resumed: its records stay, the interrupted attempt's go.
            # With no checkpoint yet (a stop before the first one), that is all of them: a clean start.
            dropped = self.metrics.truncate(self._resumed[1]["num_records"] if self._resumed else 0)
            if self._resumed is None and self.writer:
                print(
                    f"--resume: {self.run_dir} holds no checkpoint yet (the run stopped before its first "
                    f"one): training starts again from iteration 1, and the {dropped} metrics records of the "
                    "interrupted attempt are discarded",
                    flush=True,
                )

    def checkpoint_record(self, iteration: int, env_steps: int, fields: dict) -> dict:
        """The record of a checkpoint of the run at `iteration` (`fields`: the trainer's own)."""
        return {
            "iteration": iteration,
            "env_steps": env_steps,
            **fields,
            "num_records": self.metrics.num_records,
            "elapsed": self.elapsed,
            "metrics_sha256": self.metrics.metrics_sha256,
            "experiment_sha256": self.experiment,
            "best_return": self.best.value,
        }

    def diverged(self, what: str, iteration: int, env_record: dict | None = None) -> NonFiniteError:
        """The error that stops a run whose `iteration` went non-finite, before anything of that iteration is
        logged or saved; the folder records the stop in `DIVERGED_FILE`. `what` is the quantity the update
        made non-finite, or, with `env_record` (env, quantity, value, env_step), what the env returned."""
        checkpointed = self.checkpoints.iteration
        kept = (
            f"the last good checkpoint (iteration {checkpointed}) is kept in {self.run_dir / 'checkpoint'}"
            if checkpointed is not None
            else "no checkpoint had been written"
        )
        if self.writer:
            record = {
                "iteration": iteration,
                "quantity": what,
                **(env_record or {}),  # env, quantity (observation[i] or reward), value, env_step
                "checkpoint_iteration": checkpointed,
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

    def write_results(self, returns, lengths, env_steps: int, eval_seed: int) -> None:
        """results.json of the policy folder (the final deterministic evaluation), and policy.onnx if asked."""
        args = self.args
        write_results(
            self.policy_dir,
            env_id=args.env,
            algo=self.algo,
            returns=returns,
            lengths=lengths,
            seed=args.seed,
            env_steps=env_steps,
            eval_seed=eval_seed,
        )
        if args.log.export_onnx:
            from export.onnx import export_policy_folder

            export_policy_folder(self.policy_dir)


@contextlib.contextmanager
def held(folders: list[RunFolder]):
    """Inside: the folders' locks are held; they are released when the block ends, however it ends."""
    try:
        yield
    finally:
        for folder in folders:
            folder.release()
