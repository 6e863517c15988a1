"""One run's life, the same for every trainer, in one function (`run_training`) that reads top to bottom: set
up (resume, run.json, the metrics log), then per iteration collect and update, log, evaluate when due and
checkpoint when due; then the final deterministic evaluation and the saved policy.

A trainer supplies only what differs, as a `Learner` (how an iteration collects and updates, and closing its
envs) whose `runs` are each a `Run` (what its checkpoint holds, how it evaluates and saves its actor): one run,
or the seeds of a group trained in lockstep (`trainers._core.seed_group`). Where the run writes is its
`trainers._core.runfolder.RunFolder`, which never calls back: this loop tells it what to write.
"""

import abc
import functools
import time
from pathlib import Path

from gsbpolicy.gym import EnvOutputError

from .checkpoint import CheckpointError
from .config import TrainArgs
from .evaluation import eval_record, eval_seed
from .runfolder import RunFolder, held


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


def checkpoint_due(args: TrainArgs, iteration: int) -> bool:
    """Whether to checkpoint after `iteration` (every `--log.checkpoint-every` iterations, and at the end)."""
    return iteration % args.log.checkpoint_every == 0 or iteration == args.num_iterations


class Diverged(Exception):  # noqa: N818 (a stop, not a failure of the code: the loop turns it into one)
    """Raised by `Learner.collect_and_update` when the iteration went non-finite: `what` (a loss, the gradient,
    the parameters...) in run `run` (its index in `Learner.runs`). The loop stops the run before anything of
    the iteration is logged or saved."""

    def __init__(self, what: str, run: int = 0):
        super().__init__(what)
        self.what, self.run = what, run


class Run(abc.ABC):
    """One run as the loop sees it: its counters, its checkpointed state, its evaluation and its actor."""

    @property
    @abc.abstractmethod
    def iteration(self) -> int:
        """Iterations trained so far."""

    @property
    @abc.abstractmethod
    def env_steps(self) -> int:
        """Env steps collected so far."""

    @abc.abstractmethod
    def state_trees(self) -> dict:
        """{name: pytree of arrays} of everything training continues from (also the skeletons to load)."""

    def checkpoint_fields(self) -> dict:
        """Extra JSON fields of the checkpoint record (none by default)."""
        return {}

    @abc.abstractmethod
    def load_state(self, trees: dict, meta: dict) -> None:
        """Continue from loaded `state_trees` and the checkpoint record `meta`."""

    @abc.abstractmethod
    def evaluate(self, deterministic: bool, seed: int, episodes: int | None = None):
        """Per-episode (returns, lengths) of the current policy, as numpy; every process calls it."""

    @abc.abstractmethod
    def save_actor(self, policy_dir: Path) -> None:
        """Write the deployable policy folder (config.json + model.safetensors)."""


class Learner(abc.ABC):
    """What the loop trains: its `runs` (one, or the seeds of a group), advanced together one iteration at a
    time."""

    runs: list[Run]

    @abc.abstractmethod
    def collect_and_update(self) -> list[tuple[dict, dict]]:
        """One iteration (rollout, then the updates) of every run: per run, its metrics (losses and
        diagnostics, as floats) and its training episodes' summary. Raises `Diverged` if it went non-finite."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the training envs."""


def train_record(run: Run, elapsed: float, sps: float, metrics: dict, episodes: dict) -> dict:
    """The metrics.jsonl line of the iteration `run` just did at `sps` env steps per second (`elapsed`: the
    seconds of training so far)."""
    return {
        "type": "train",
        "iteration": run.iteration,
        "env_steps": run.env_steps,
        "time/wall_s": elapsed,
        "time/sps": sps,
        **episodes,
        **{f"train/{k}": v for k, v in metrics.items()},
    }


def run_training(learner: Learner, folders: list[RunFolder], mesh=None, group=None) -> list[Path]:
    """Train `learner`'s runs, each into its run folder (`folders[i]` for `learner.runs[i]`), to the end and
    return their policy folders; every lock is released however it ends. `mesh`: the devices the batch is
    split over; `group`: the seeds trained together (both recorded in run.json)."""
    args, runs = folders[0].args, learner.runs
    with held(folders):
        for folder, run in zip(folders, runs, strict=True):  # set up: resume, run.json, metrics log
            if folder.args.resume and (restored := folder.restore(run.state_trees())) is not None:
                run.load_state(*restored)
                folder.check_restored(run.iteration, run.env_steps)
            folder.start(mesh, group)
        if len({run.iteration for run in runs}) > 1:  # `align_checkpoints` makes a group's agree
            raise CheckpointError("the seeds of the group resumed at different iterations")
        due_evals = eval_iterations(args)
        try:
            while (done := runs[0].iteration) < args.num_iterations:
                start = time.perf_counter()
                try:
                    results = learner.collect_and_update()
                except Diverged as stop:
                    raise folders[stop.run].diverged(stop.what, done + 1) from None
                seconds = time.perf_counter() - start
                sps = args.rollout.steps_per_iteration / seconds
                for folder, run, (metrics, episodes) in zip(folders, runs, results, strict=True):
                    folder.elapsed += seconds
                    folder.metrics.write(train_record(run, folder.elapsed, sps, metrics, episodes))
                    if done + 1 in due_evals:
                        evaluate = functools.partial(run.evaluate, seed=eval_seed(folder.args.seed, done + 1))
                        record = eval_record(run.iteration, run.env_steps, evaluate)
                        folder.metrics.write(record)
                        if args.log.keep_best and (candidate := folder.best.candidate(record)) is not None:
                            run.save_actor(candidate)
                            folder.best.label(record)
                        if (warning := folder.watch.after(record)) and folder.writer:
                            print(warning, flush=True)
                if checkpoint_due(args, done + 1):  # every run's written before any is current
                    for folder, run in zip(folders, runs, strict=True):
                        meta = folder.checkpoint_record(run.iteration, run.env_steps, run.checkpoint_fields())
                        folder.checkpoints.write(run.state_trees(), meta)
                    for folder in folders:
                        folder.checkpoints.commit()
                        folder.best.promote()
                for folder in folders:
                    folder.iteration = done + 1
                folders[0].metrics.progress(runs[0].env_steps, sps)
        except EnvOutputError as err:  # the env's fault, not training's: said and recorded as such
            raise folders[0].diverged(str(err), done + 1, err.record) from None
        finally:
            for folder in folders:
                folder.metrics.close()
        for folder, run in zip(folders, runs, strict=True):  # the final evaluation and the saved policy
            seed = eval_seed(folder.args.seed, run.iteration)
            returns, lengths = run.evaluate(True, seed, args.eval.final_episodes)  # a collective
            if folder.writer:
                run.save_actor(folder.policy_dir)
                folder.write_results(returns, lengths, run.env_steps, seed)
        learner.close()
        return [folder.policy_dir for folder in folders]
