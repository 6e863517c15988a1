"""What a run costs: one trainer process run to its end with its wall-clock and memory sampled (`execute`,
`run_trainer`), the cost kept in its run folder across attempts (`bench_cost.json`), and the machine it ran
on (`hardware`).

Memory is the RSS of the process tree, sampled, and device memory through nvidia-smi on GPUs; other trainers
seen running beside it (another runner's, say) are counted, since they slow it. A runner killed mid-run loses
at most `PROGRESS_EVERY_S` of the run's wall-clock: the next attempt folds what the killed one recorded.
"""

import itertools
import json
import os
import shlex
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

from gsbpolicy._files import atomic_write_text, open_no_follow

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
            capture_output=True,
            text=True,
            timeout=10,
        )
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
    fold_interrupted_attempt(directory)
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


def fold_interrupted_attempt(directory: Path) -> None:
    """An attempt that was killed (or failed) still cost its time: count what it recorded."""
    if (directory / ATTEMPT_FILE).exists():
        accumulate_cost(directory, json.loads((directory / ATTEMPT_FILE).read_text()))


def cost_so_far(directory: Path) -> dict:
    path = directory / "bench_cost.json"
    return json.loads(path.read_text()) if path.exists() else {"wall_s": 0.0, "attempts": 0}


def accumulate_cost(directory: Path, attempt: dict) -> dict:
    """Wall-clock adds up over resumed attempts; memory and sharing keep the worst attempt."""
    cost = cost_so_far(directory)
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


def hardware() -> dict:
    """The machine this process runs on: CPU model, cores, GPUs (through nvidia-smi, where there is one)."""
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
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        gpu = ", ".join(sorted(set(out.stdout.split("\n")) - {""})) or None
    return {"cpu": cpu, "cores": os.cpu_count(), "gpu": gpu}


def run_trainer(
    cmd: list[str] | None, folders: list[Path], sample_interval: float, ignored_signals: tuple = ()
) -> None:
    """Run one trainer process to the end (nothing to do for a run that finished before its ledger line was
    written). A seed group's process logs into its folders' parent, and each seed is charged an equal share
    of its wall-clock (`group_wall_s` and `group_size` keep the whole)."""
    if cmd is None:
        return
    if len(folders) == 1 and "--seeds" not in cmd:
        accumulate_cost(folders[0], execute(cmd, folders[0], sample_interval, ignored_signals))
        return
    cost = execute(cmd, folders[0].parent, sample_interval, ignored_signals)
    # Simplification: an interrupted group attempt's time (its progress file in the parent) is not charged
    # to the seeds; each seed's trainer clock (`trainer_wall_s`) still bounds its cost from below.
    (folders[0].parent / ATTEMPT_FILE).unlink(missing_ok=True)
    share = {**cost, "wall_s": cost["wall_s"] / len(folders)}
    for directory in folders:
        directory.mkdir(parents=True, exist_ok=True)
        total = accumulate_cost(directory, share)
        total["group_wall_s"] = total.get("group_wall_s", 0.0) + cost["wall_s"]
        total["group_size"] = len(folders)
        atomic_write_text(directory / "bench_cost.json", json.dumps(total))
