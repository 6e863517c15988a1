"""Run a benchmark suite: every task x method (or ablation variant) x seed, one trainer subprocess each.

    python -m trainers.benchmark --suite cpu-gym [--methods gsb_mdpo fpo] [--seeds 0 1] [--resume]

Suites are data (`trainers.benchmark.suites`). Each run is `python -m trainers.<method> --preset <suite
preset> --env <task> --seed <s> --total-steps <budget> <suite overrides> <variant overrides>` in its own
process, so its wall-clock and memory (RSS of the process tree, sampled; device memory through nvidia-smi on
GPUs) are its own; other trainers seen running beside it (another runner's, say) are recorded, since
they slow it. As each run finishes, one line goes into `<results dir>/<suite>.runs.jsonl` (the
raw record: curve, final evaluation, cost, hardware, commit) and the summaries are regenerated from it
(`trainers.benchmark.aggregate`). By default all of it lands under runs/benchmarks/<suite>/, and the end of
the command compares the new runs with the committed results; `--publish` adds them to the committed
results in hub_cards/results instead. Finished runs are skipped; with `--resume` an interrupted run
continues from its checkpoint. Ctrl-C or a crash loses at most the run in progress, which `--resume` then
continues.

`--executor slurm` sends the runs to do to a Slurm cluster instead, as one job array (`slurm_suite`): each job
runs the same trainer command in the same run folder and leaves the run's ledger line there, which the runner
adds to the ledger whenever it runs (`--wait` as the jobs end; `--status` shows each run's state).
"""

import concurrent.futures
import dataclasses
import fcntl
import itertools
import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Literal

from gsbpolicy._cli import CommandError, check_writable_folder, refuse_control_characters, run_command
from gsbpolicy._files import atomic_write_text, open_no_follow

from .._core.cli import tyro_cli
from .._core.rundir import holds_started_run
from .._core.runfolder import DIVERGED_FILE
from .._core.runlog import read_jsonl as read_ledger
from . import pretraining
from .aggregate import RESULTS_DIR as COMMITTED
from .compare import write_comparison
from .slurm import SlurmArgs
from .suites import SUITES, Suite, Variant, available_methods


@dataclasses.dataclass(frozen=True)
class BenchArgs:
    """Run (part of) a benchmark suite; finished runs are skipped."""

    suite: str
    """Suite name, a key of `trainers.benchmark.suites.SUITES` (an unknown name is answered with the list)."""
    methods: tuple[str, ...] = ()
    """Methods or ablation variants to run (default: all of the suite's whose trainer exists here)."""
    tasks: tuple[str, ...] = ()
    """Subset of the suite's tasks (default: all)."""
    seeds: tuple[int, ...] = ()
    """Subset of the suite's seeds (default: all)."""
    resume: bool = False
    """Continue interrupted runs from their checkpoints (without it an interrupted run is an error)."""
    runs_dir: Path = Path("runs/benchmarks")
    """Where run folders go: <runs_dir>/<suite>/<task>/<variant>/seed_<s>."""
    results_dir: Path | None = None
    """Where the run ledger and the generated summaries go. Default: <runs_dir>/<suite>, outside the source
    tree, with `<suite>.comparison.md` setting the new runs beside the committed results. The committed
    results (hub_cards/results, and the README blocks made from them) are written only with --publish."""
    publish: bool = False
    """Add the runs to the committed results in hub_cards/results and regenerate the README's blocks (what a
    maintainer does to publish new evidence; runs already in the committed ledger are skipped)."""
    dry_run: bool = False
    """Print the commands without running them."""
    jobs: int = 1
    """Runs at a time. Keep 1 where wall-clock is compared (the compute suites, a 2-core CPU); on a many-core
    machine give each run two or three cores (Gym runs step their envs on the CPU: one core each slows them several times)."""
    sample_interval: float = 0.25
    """Seconds between memory samples of a run. Each GPU sample calls nvidia-smi, so raise it with --jobs."""
    group_seeds: bool = False
    """Train the seeds of each Playground task x method in one process (the trainers' `--seeds`: the iteration
    vmapped over seeds, compiled once). Each seed still gets its own run folder and ledger line; the group's
    wall-clock is shared equally among its seeds (`cost.group_wall_s` keeps the whole). Gymnasium tasks and
    SB3 PPO run one seed per process as before."""
    executor: Literal["local", "slurm"] = "local"
    """Where the runs train: "local", on this machine (--jobs at a time), or "slurm", as one Slurm job array
    submitted through submitit (--slurm.*), each job the same trainer command in the same run folder."""
    slurm: SlurmArgs = SlurmArgs()
    """Options of --executor slurm."""
    wait: bool = False
    """With --executor slurm: after submitting, wait until the suite's jobs have ended, adding each run to
    the ledger as its job ends, then compare and report as a local run does (exit 1 if a job failed)."""
    status: bool = False
    """Show where each run of the suite is (done, running, pending, failed, interrupted, not started) from
    the ledger, the run folders and Slurm, after adding the runs that Slurm jobs finished; submits nothing."""


# ---------------------------------------------------------------------------------------------- ledger
def ledger_path(results_dir: Path, suite: str) -> Path:
    return results_dir / f"{suite}.runs.jsonl"


def record_json(record: dict) -> str:
    return json.dumps(record, sort_keys=True)


def append_ledger(path: Path, *records: dict) -> list[dict]:
    """Add the records whose run the ledger does not hold yet; returns those added. The ledger is rewritten
    atomically (a crash leaves the old or the new file) under an exclusive lock on `<ledger>.lock`, so that
    runners merging at the same time (a --wait and a --status, say) add each run exactly once."""
    if not records:
        return []
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = open_no_follow(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        held = {run_key(r) for r in read_ledger(path)}
        added = []
        for record in records:
            if run_key(record) not in held:
                held.add(run_key(record))
                added.append(record)
        if added:
            text = (path.read_text() if path.exists() else "") + "".join(record_json(r) + "\n" for r in added)
            atomic_write_text(path, text)
        return added
    finally:
        os.close(fd)  # releases the lock


def run_key(record: dict) -> tuple[str, str, int]:
    return record["task"], record["variant"], record["seed"]


def ledger_command(suite: Suite, task: str, variant: Variant, seed: int, directory: Path) -> str:
    """The trainer arguments a ledger line records (without --resume)."""
    return " ".join(command(suite, task, variant, seed, directory, False)[1:])


def trainer_args(cmd: str) -> str:
    """A ledger command without its output folder: two runs with equal trainer args are the same run."""
    return re.sub(r"--output-dir \S+ ", "", cmd)


def results_folder(args: BenchArgs) -> Path:
    """Where this invocation's ledger and summaries go (see `BenchArgs.results_dir`)."""
    if not args.publish:
        return args.results_dir if args.results_dir is not None else args.runs_dir / args.suite
    if args.results_dir is not None and args.results_dir.resolve() != COMMITTED.resolve():
        raise CommandError(
            f"--publish writes into {COMMITTED}; drop --results-dir {args.results_dir} or --publish"
        )
    return COMMITTED


def other_ledgers(args: BenchArgs, results_dir: Path) -> list[Path]:
    """The ledgers of the other suites beside this one's: in the same folder, or (the default layout) in the
    sibling suite folders under --runs-dir."""
    pattern = "*/*.runs.jsonl" if results_dir == args.runs_dir / args.suite else "*.runs.jsonl"
    return sorted((results_dir.parent if pattern.startswith("*/") else results_dir).glob(pattern))


def finished_elsewhere(ledgers: list[Path], suite: str) -> dict[str, tuple[str, dict]]:
    """Finished runs of the other suites' ledgers, by trainer args (e.g. ablation-cpu's default variant is
    cpu-gym's GSB-MDPO on Hopper-v5, so it is not trained twice)."""
    found = {}
    for path in ledgers:
        other = path.name.removesuffix(".runs.jsonl")
        if other != suite:
            for record in read_ledger(path):
                if "reused_from" not in record:
                    found.setdefault(trainer_args(record["command"]), (other, record))
    return found


# ---------------------------------------------------------------------------------------------- one run
def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def run_dir(args: BenchArgs, suite: Suite, task: str, variant: Variant, seed: int) -> Path:
    return args.runs_dir / suite.name / task / slug(variant.name) / f"seed_{seed}"


def finished(directory: Path) -> bool:
    """The run's trainer finished (its policy folder's results.json is written last)."""
    return (directory / "policy" / "results.json").exists()


def command(suite: Suite, task: str, variant: Variant, seed: int, directory: Path, resume: bool) -> list[str]:
    pretrained = str(pretraining.policy_path(directory, seed))
    variant_args = [pretrained if arg == pretraining.PRETRAINED else arg for arg in variant.args]
    return [
        sys.executable,
        "-m",
        f"trainers.{variant.method}",
        "--preset",
        variant.preset or suite.preset,
        "--env",
        task,
        "--seed",
        str(seed),
        "--total-steps",
        str(suite.steps(task)),
        "--output-dir",
        str(directory),
        *(suite.args if variant.shared_geometry else ()),
        *suite.eval_args,
        *variant_args,
        *(["--resume"] if resume else []),
    ]


def group_command(
    suite: Suite, task: str, variant: Variant, seeds: list[int], directory: Path, resume: bool
) -> list[str]:
    """One process for several seeds: the trainer writes <directory>/seed_<s> for each (`--seeds`)."""
    cmd = command(suite, task, variant, seeds[0], directory, resume)
    at = cmd.index("--seed")
    return [*cmd[:at], "--seeds", *map(str, seeds), *cmd[at + 2 :]]


def groupable(task: str, variant: Variant) -> bool:
    """Seeds share a process only where the trainer vmaps them: Playground tasks, the shared JAX loop."""
    from gsbpolicy._internal import env_kind

    return env_kind(task) == "playground" and variant.method != "ppo"


def group_runs(suite: Suite, commands: list[tuple]) -> list[tuple]:
    """`_commands`' runs as jobs (task, variant, seeds, run folders, command or None), those of one task x
    variant x state (fresh, or resumed) merged into one `--seeds` process where `groupable`."""
    jobs, groups = [], {}
    for task, variant, seed, directory, cmd in commands:
        if cmd is None or not groupable(task, variant):
            jobs.append((task, variant, [seed], [directory], cmd))
        else:
            groups.setdefault((task, variant.name, "--resume" in cmd), []).append((variant, seed, directory))
    for (task, _, resume), runs in groups.items():
        variant, seeds, folders = runs[0][0], [r[1] for r in runs], [r[2] for r in runs]
        cmd = group_command(suite, task, variant, seeds, folders[0].parent, resume)
        jobs.append((task, variant, seeds, folders, cmd))
    return jobs


OTHERS_EVERY_S = 5.0
"""Seconds between scans of the machine for other trainers (a scan reads every process's command line)."""


def is_trainer(cmdline: list[str]) -> bool:
    """`python -m trainers.<method> ...`: a training process, but not a benchmark runner."""
    return any(
        flag == "-m" and module.startswith("trainers.") and not module.startswith("trainers.benchmark")
        for flag, module in itertools.pairwise(cmdline)
    )


class MemorySampler:
    """Samples the RSS of a process and its children (and their GPU memory, where nvidia-smi exists), and
    counts trainers outside its tree: another runner's runs, or a run started by hand, share the machine and
    slow this one, and `concurrent_runs` (this runner's `--jobs`) cannot see them."""

    def __init__(self, pid: int, interval: float = 0.25):
        import psutil

        self._process = psutil.Process(pid)
        self._interval = interval
        self._gpu = shutil.which("nvidia-smi") is not None
        self.rss: list[float] = []
        self.gpu: list[float] = []
        self.others: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _pids(self) -> list:
        import psutil

        try:
            return [self._process, *self._process.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def _gpu_mib(self, pids: set[int]) -> float:
        out = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=10,
        )  # fmt: skip
        rows = [line.split(",") for line in out.stdout.splitlines() if "," in line]
        return sum(float(mib) for pid, mib in rows if int(pid) in pids)

    def _other_trainers(self, own: set[int]) -> int:
        import psutil

        count = 0
        for process in psutil.process_iter():
            try:
                count += process.pid not in own and is_trainer(process.cmdline())
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                pass
        return count

    def _loop(self) -> None:
        import psutil

        next_scan = time.perf_counter()
        while not self._stop.wait(self._interval):
            total, pids = 0, set()
            for process in self._pids():
                try:
                    total += process.memory_info().rss
                    pids.add(process.pid)
                except psutil.NoSuchProcess:
                    pass
            if total:
                self.rss.append(total / 2**20)
            if self._gpu and pids:
                self.gpu.append(self._gpu_mib(pids))
            if pids and time.perf_counter() >= next_scan:
                self.others.append(self._other_trainers(pids))
                next_scan += OTHERS_EVERY_S

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        return self.snapshot()

    def snapshot(self) -> dict:
        """Peak and mean memory over the samples so far."""

        def stats(samples):
            return (max(samples), sum(samples) / len(samples)) if samples else (None, None)

        (peak, mean), (gpu_peak, gpu_mean) = stats(self.rss), stats(self.gpu)
        return {
            "peak_rss_mib": peak,
            "mean_rss_mib": mean,
            "peak_gpu_mib": gpu_peak,
            "mean_gpu_mib": gpu_mean,
            # Most trainers seen running beside this one, and the share of scans that saw any.
            "other_trainers_peak": max(self.others, default=0),
            "shared_fraction": sum(n > 0 for n in self.others) / len(self.others) if self.others else 0.0,
        }


ATTEMPT_FILE = "bench_cost.attempt.json"
"""The running attempt's cost so far, rewritten every `PROGRESS_EVERY_S` seconds, so that a runner killed
mid-run (a session that ends, SIGTERM) loses at most that much of the run's wall-clock; the next attempt
folds it into `bench_cost.json`."""
PROGRESS_EVERY_S = 30.0


def execute(
    cmd: list[str], directory: Path, sample_interval: float = 0.25, ignored_signals: tuple = ()
) -> dict:
    """Run one trainer; returns its wall-clock and memory. Output goes to <run>/train.log. The trainer ignores
    `ignored_signals` (a Slurm job's time-limit signal, which reaches every process of the job, is the job's)."""
    directory.mkdir(parents=True, exist_ok=True)
    _fold_interrupted_attempt(directory)
    # Device memory is measured, so XLA must not preallocate most of the GPU up front.
    env = {**os.environ, "TQDM_DISABLE": "1", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    start = time.perf_counter()
    # Appended to across attempts, never through a link planted in the run folder.
    with os.fdopen(
        open_no_follow(directory / "train.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT), "a"
    ) as log:
        process = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=_ignoring(ignored_signals) if ignored_signals else None,
        )
        sampler = MemorySampler(process.pid, sample_interval)
        try:
            while True:
                try:
                    code = process.wait(timeout=PROGRESS_EVERY_S)
                    break
                except subprocess.TimeoutExpired:
                    so_far = {"wall_s": time.perf_counter() - start, **sampler.snapshot()}
                    atomic_write_text(directory / ATTEMPT_FILE, json.dumps(so_far))
        finally:
            if process.poll() is None:
                process.kill()
            memory = sampler.stop()
    if code != 0:
        tail = "".join((directory / "train.log").read_text().splitlines(keepends=True)[-30:])
        raise RuntimeError(
            f"exit code {code}: {shlex.join(cmd)}\n--- {directory / 'train.log'} (tail) ---\n{tail}"
        )
    return {"wall_s": time.perf_counter() - start, **memory}


def _ignoring(signals: tuple):
    """A child-side hook setting `signals` to SIG_IGN, which survives exec (only for a single-threaded parent:
    a Slurm job)."""

    def ignore():
        for number in signals:
            signal.signal(number, signal.SIG_IGN)

    return ignore


def _fold_interrupted_attempt(directory: Path) -> None:
    """An attempt that was killed (or failed) still cost its time: count what it recorded."""
    if (directory / ATTEMPT_FILE).exists():
        _accumulate_cost(directory, json.loads((directory / ATTEMPT_FILE).read_text()))


def _cost_so_far(directory: Path) -> dict:
    path = directory / "bench_cost.json"
    return json.loads(path.read_text()) if path.exists() else {"wall_s": 0.0, "attempts": 0}


def _accumulate_cost(directory: Path, attempt: dict) -> dict:
    """Wall-clock adds up over resumed attempts; memory and sharing keep the worst attempt."""
    cost = _cost_so_far(directory)
    cost["wall_s"] += attempt["wall_s"]
    cost["attempts"] += 1
    for name in ("other_trainers_peak", "shared_fraction"):
        cost[name] = max(cost.get(name, 0), attempt.get(name, 0))
    for name in ("peak_rss_mib", "peak_gpu_mib", "mean_rss_mib", "mean_gpu_mib"):
        values = [v for v in (cost.get(name), attempt.get(name)) if v is not None]
        cost[name] = max(values) if values else None
    atomic_write_text(directory / "bench_cost.json", json.dumps(cost))
    (directory / ATTEMPT_FILE).unlink(missing_ok=True)
    return cost


def collect_record(
    suite: Suite, task: str, variant: Variant, seed: int, directory: Path, jobs: int = 1
) -> dict:
    """The ledger line of a finished run, from its run folder. A run that diverged (stopped on a non-finite
    update, `DIVERGED_FILE`) is a result of its method too, so it gets a line: its final return is its last
    evaluation before it stopped, and `diverged` says where it stopped. Leaving it out would keep only the
    seeds that happened not to diverge."""
    lines = [json.loads(line) for line in (directory / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in lines if r["type"] == "eval"]
    trains = [r for r in lines if r["type"] == "train"]
    run = json.loads((directory / "run.json").read_text())
    diverged = None
    if (directory / DIVERGED_FILE).exists():
        diverged = json.loads((directory / DIVERGED_FILE).read_text())
        if not evals:
            raise RuntimeError(
                f"{directory} diverged in iteration {diverged['iteration']}, before its first "
                "evaluation: it has no return to record"
            )
        last = evals[-1]
        results = {"mean": last["eval/return_deterministic"], "std": last["eval/return_deterministic_std"],
                   "n_episodes": None, "deterministic": True, "env_steps": last["env_steps"],
                   "date": diverged["date"]}  # fmt: skip
    else:
        results = json.loads((directory / "policy" / "results.json").read_text())
    curve = {
        "env_steps": [r["env_steps"] for r in evals],
        "deterministic": [r["eval/return_deterministic"] for r in evals],
        "stochastic": [r.get("eval/return_stochastic") for r in evals],
    }
    cost = _cost_so_far(directory)
    # The trainer's own clock (kept in its checkpoints across resumes) is a floor for the end-to-end time:
    # an attempt whose runner was killed before `ATTEMPT_FILE` existed left no end-to-end record.
    cost["trainer_wall_s"] = trains[-1].get("time/wall_s") if trains else None
    cost["wall_s"] = max(cost["wall_s"], cost["trainer_wall_s"] or 0.0)
    return {
        "suite": suite.name,
        "task": task,
        "variant": variant.name,
        "method": variant.method,
        "seed": seed,
        "command": ledger_command(suite, task, variant, seed, directory),
        "final": {k: results[k] for k in ("mean", "std", "n_episodes", "deterministic", "env_steps")},
        "curve": curve,
        "step_clip_frac": _train_curve(trains, "train/step_clip_frac"),
        "sample_clip_frac": _train_curve(trains, "train/sample_clip_frac"),
        "path_kl_init": _train_curve(trains, "train/path_kl_init"),
        "cost": cost,
        "concurrent_runs": jobs,
        "seed_group": run.get("seed_group"),
        "git": run["git"],
        "packages": run["packages"],
        "device": run["device"],
        "hardware": hardware(),
        "finished": results["date"],
        **({"diverged": diverged} if diverged else {}),
    }


def _train_curve(trains: list[dict], key: str) -> dict | None:
    """A training metric at every iteration that logged it ({"env_steps", "value"}), None if none did."""
    points = [(r["env_steps"], r[key]) for r in trains if key in r]
    return {"env_steps": [p[0] for p in points], "value": [p[1] for p in points]} if points else None


def hardware() -> dict:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpu = None
    if shutil.which("nvidia-smi"):
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)  # fmt: skip
        gpu = ", ".join(sorted(set(out.stdout.split("\n")) - {""})) or None
    return {"cpu": cpu, "cores": os.cpu_count(), "gpu": gpu}


# ---------------------------------------------------------------------------------------------- suite
def plan(args: BenchArgs, suite: Suite) -> list[tuple[str, Variant, int]]:
    """The runs to do, seed-major so that a partial suite covers every method first."""
    present = set(available_methods())
    names = args.methods or tuple(v.name for v in suite.variants if v.method in present)
    try:
        variants = [suite.variant(name) for name in names]
    except KeyError as err:
        raise CommandError(err.args[0]) from None
    missing = sorted({v.method for v in variants} - present)
    if missing:
        raise CommandError(f"trainers not in this checkout: {missing}")
    for task in args.tasks:
        if task not in suite.tasks:
            raise CommandError(f"suite {suite.name!r} has no task {task!r}; it has {list(suite.tasks)}")
    for seed in args.seeds:
        if seed not in suite.seeds:
            raise CommandError(f"suite {suite.name!r} has no seed {seed}; it has {list(suite.seeds)}")
    tasks = args.tasks or suite.tasks
    seeds = args.seeds or suite.seeds
    return [
        (task, variant, seed)
        for seed in seeds
        for task in tasks
        for variant in variants
        if suite.runs(task, variant) and seed in suite.seeds_for(task)
    ]


def _check_options(args: BenchArgs) -> Path:
    """Refuse bad options before anything runs; return the results folder."""
    if args.suite not in SUITES:
        raise CommandError(f"unknown suite {args.suite!r}; suites: {sorted(SUITES)}")
    if args.jobs < 1:
        raise CommandError(f"--jobs must be at least 1, got {args.jobs}")
    if not (math.isfinite(args.sample_interval) and args.sample_interval > 0):
        raise CommandError(
            f"--sample-interval must be a finite number of seconds > 0, got {args.sample_interval}"
        )
    if args.executor == "slurm":
        args.slurm.check()
        # The jobs' log folder, under --runs-dir, is written into the job script (#SBATCH --output, srun).
        refuse_control_characters(str(args.runs_dir), "--runs-dir")
        if args.jobs != 1:
            raise CommandError(
                "--jobs is the local executor's; on Slurm, --slurm.array-parallelism jobs run at once"
            )
    elif args.slurm != SlurmArgs() or args.wait:
        raise CommandError(
            f"--{'wait' if args.wait else 'slurm.*'} needs --executor slurm (a local suite runs to its end)"
        )
    if args.status and (args.wait or args.dry_run):
        raise CommandError(f"--status only looks; drop --{'wait' if args.wait else 'dry-run'}")
    results_dir = results_folder(args)
    check_writable_folder(args.runs_dir, f"--runs-dir {args.runs_dir}")
    check_writable_folder(results_dir, f"--results-dir {results_dir}")
    return results_dir


def _commands(args: BenchArgs, suite: Suite, todo: list, ledger: Path, results_dir: Path) -> list[tuple]:
    """(task, variant, seed, run folder, command or None when the run already finished) for each run to do;
    a run another suite's ledger already holds is recorded as reused instead (unless --dry-run)."""
    elsewhere = finished_elsewhere(other_ledgers(args, results_dir), suite.name)
    commands = []
    for number, (task, variant, seed) in enumerate(todo, 1):
        directory = run_dir(args, suite, task, variant, seed)
        same = elsewhere.get(trainer_args(ledger_command(suite, task, variant, seed, directory)))
        if same is not None:
            print(f"[{number}/{len(todo)}] {task} {variant.name} seed {seed}: the same run is in {same[0]}")
            if not args.dry_run:
                record = {**same[1], "suite": suite.name, "variant": variant.name, "reused_from": same[0]}
                append_ledger(ledger, record)
            continue
        done = finished(directory)
        # The trainer's own test, so a run killed before its first metrics line (run.json alone) is resumed.
        started = holds_started_run(directory)
        if started and not done and not args.resume:
            raise CommandError(f"{directory} holds an interrupted run; pass --resume to continue it")
        cmd = command(suite, task, variant, seed, directory, resume=started and not done)
        print(f"[{number}/{len(todo)}] {task} {variant.name} seed {seed}: {shlex.join(cmd[1:])}", flush=True)
        commands.append((task, variant, seed, directory, None if done else cmd))
    return commands


def jobs_of(args: BenchArgs, suite: Suite, commands: list[tuple]) -> list[tuple]:
    """`_commands`' runs as processes to start: (task, variant, seeds, run folders, command or None), the
    seeds of a task x variant in one process with --group-seeds (`group_runs`)."""
    if args.group_seeds:
        return group_runs(suite, commands)
    return [(task, variant, [seed], [directory], cmd) for task, variant, seed, directory, cmd in commands]


def job_outcome(
    suite: Suite,
    task: str,
    variant: Variant,
    seeds,
    folders,
    error: RuntimeError | None,
    concurrent_runs: int,
) -> tuple[list[dict], list[tuple[int, str]]]:
    """After a trainer process ended (`error`: how it failed, None if it did not): the ledger lines of its runs
    that ended, and (seed, reason) for those that failed. A run that diverged ended: its stop is a result of
    its method too (`collect_record`)."""
    records, failed = [], []
    for seed, directory in zip(seeds, folders, strict=True):
        if error is not None and not (directory / DIVERGED_FILE).exists():
            failed.append((seed, str(error)))
            continue
        if error is not None:
            _fold_interrupted_attempt(directory)
        try:
            records.append(collect_record(suite, task, variant, seed, directory, concurrent_runs))
        except RuntimeError as err:
            failed.append((seed, str(err)))
    return records, failed


def report_record(record: dict) -> None:
    stop = f" (diverged in iteration {record['diverged']['iteration']})" if "diverged" in record else ""
    print(
        f"    {record['task']} {record['variant']} seed {record['seed']}: final return "
        f"{record['final']['mean']:.1f}{stop}, {record['cost']['wall_s']:.0f} s",
        flush=True,
    )


def _run_all(args: BenchArgs, suite: Suite, commands: list[tuple], ledger: Path, results_dir: Path) -> list:
    """Run the jobs `jobs` at a time in plan order; returns the failed (task, variant, seed).

    Only this thread writes the ledger and the summaries, in the order runs finish, so concurrent runs never
    race on a file."""
    failures = []
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs)
    try:
        futures = {
            pool.submit(run_trainer, cmd, folders, args.sample_interval): (task, variant, seeds, folders)
            for task, variant, seeds, folders, cmd in jobs_of(args, suite, commands)
        }
        for future in concurrent.futures.as_completed(futures):
            task, variant, seeds, folders = futures[future]
            error = None
            try:
                future.result()
            except RuntimeError as err:
                error = err
            records, failed = job_outcome(suite, task, variant, seeds, folders, error, args.jobs)
            if error is not None:
                print(
                    f"{'DIVERGED (recorded)' if records else 'FAILED'} {error}", file=sys.stderr, flush=True
                )
            for _, reason in failed:
                # Said above unless it is not the trainer's failure (a run that stopped before any evaluation).
                if reason != str(error):
                    print(f"FAILED {reason}", file=sys.stderr, flush=True)
            failures.extend((task, variant.name, seed) for seed, _ in failed)
            for record in records:
                append_ledger(ledger, record)
                report_record(record)
            if records:
                _aggregate(suite.name, results_dir)
    finally:
        # Ctrl-C must not start the queued runs (the running ones get the same SIGINT).
        pool.shutdown(wait=True, cancel_futures=True)
    return failures


def run_suite(args: BenchArgs) -> int:
    from . import slurm_suite

    results_dir = _check_options(args)
    suite = SUITES[args.suite]
    ledger = ledger_path(results_dir, suite.name)
    planned = plan(args, suite)
    # What Slurm jobs finished since the runner last looked goes into the ledger first, whatever is asked.
    if not args.dry_run and slurm_suite.merge_job_records(args, suite, planned, ledger):
        _aggregate(suite.name, results_dir)
    if args.status:
        return slurm_suite.print_status(args, suite, planned, ledger)
    done = {run_key(r) for r in read_ledger(ledger)}
    todo = [run for run in planned if (run[0], run[1].name, run[2]) not in done]
    if args.executor == "slurm":
        todo = slurm_suite.skip_queued(args, suite, todo)
    print(f"suite {suite.name}: {len(todo)} runs to do, results in {results_dir} ({suite.budget_note})")
    commands = _commands(args, suite, todo, ledger, results_dir)
    if args.dry_run:
        if args.group_seeds:
            for task, variant, seeds, _, cmd in group_runs(suite, commands):
                if cmd is not None and len(seeds) > 1:
                    print(f"grouped: {task} {variant.name} seeds {seeds}: {shlex.join(cmd[1:])}")
        if args.executor == "slurm":
            jobs = sum(cmd is not None for *_, cmd in jobs_of(args, suite, commands))
            print(f"would submit {jobs} jobs to Slurm as one array")
        return 0
    if len(commands) < len(todo):
        _aggregate(suite.name, results_dir)
    _prepare(suite, commands)
    if args.executor == "local":
        failures = _run_all(args, suite, commands, ledger, results_dir)
    else:
        slurm_suite.submit_runs(args, suite, commands, ledger)
        if not args.wait:
            return 0
        failures = slurm_suite.wait_for_jobs(
            args, suite, planned, ledger, lambda: _aggregate(suite.name, results_dir)
        )
    if results_dir.resolve() != COMMITTED.resolve() and (results_dir / f"{suite.name}.json").exists():
        print(write_comparison(suite.name, results_dir))
    if failures:
        print(f"{len(failures)} runs failed: {failures}", file=sys.stderr)
    return 1 if failures else 0


def _prepare(suite: Suite, commands: list[tuple]) -> None:
    """Build the demonstrations and cloned policies the fine-tuning runs to do start from, before any of them
    runs (one after another: the runs of a task share its demonstrations)."""
    for task, variant, seed, directory, cmd in commands:
        if cmd is not None and pretraining.uses_pretrained(variant.args):
            pretraining.prepare(suite, task, seed, directory)


def run_trainer(
    cmd: list[str] | None, folders: list[Path], sample_interval: float, ignored_signals: tuple = ()
) -> None:
    """Run one trainer process to the end (nothing to do for a run that finished before its ledger line was
    written). A seed group's process logs into its folders' parent, and each seed is charged an equal share
    of its wall-clock (`group_wall_s` and `group_size` keep the whole)."""
    if cmd is None:
        return
    if len(folders) == 1 and "--seeds" not in cmd:
        _accumulate_cost(folders[0], execute(cmd, folders[0], sample_interval, ignored_signals))
        return
    cost = execute(cmd, folders[0].parent, sample_interval, ignored_signals)
    # Simplification: an interrupted group attempt's time (its progress file in the parent) is not charged
    # to the seeds; each seed's trainer clock (`trainer_wall_s`) still bounds its cost from below.
    (folders[0].parent / ATTEMPT_FILE).unlink(missing_ok=True)
    share = {**cost, "wall_s": cost["wall_s"] / len(folders)}
    for directory in folders:
        directory.mkdir(parents=True, exist_ok=True)
        total = _accumulate_cost(directory, share)
        total["group_wall_s"] = total.get("group_wall_s", 0.0) + cost["wall_s"]
        total["group_size"] = len(folders)
        atomic_write_text(directory / "bench_cost.json", json.dumps(total))


def _aggregate(suite: str, results_dir: Path) -> None:
    """Regenerate the summaries. They derive from the ledger, whose line is already saved, so a failure
    here must not stop the runs still going (aggregate.py may change while a long runner is going)."""
    try:
        from .aggregate import write_suite

        write_suite(suite, results_dir)
    except Exception as err:  # noqa: BLE001 - reported, and the aggregate command redoes it
        print(
            f"summaries of {suite} not regenerated ({type(err).__name__}: {err}); the ledger is saved: "
            "run `python -m trainers.benchmark.aggregate`",
            file=sys.stderr,
            flush=True,
        )


def main(argv=None) -> None:
    args = tyro_cli(BenchArgs, args=argv, description=__doc__, prog="python -m trainers.benchmark")
    # A corrupt ledger line (ValueError from read_ledger) is bad input too: one line, exit 2.
    # Ctrl-C stops this runner only: the jobs it submitted go on.
    options = {"kept": "the submitted Slurm jobs go on (--status shows them, --wait waits again)"}
    sys.exit(
        run_command(
            lambda: run_suite(args),
            usage_errors=(ValueError,),
            **(options if args.executor == "slurm" else {}),
        )
    )


if __name__ == "__main__":
    main()
