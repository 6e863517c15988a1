"""The `--slurm.*` options of `python -m trainers.benchmark --executor slurm` (`SlurmArgs`), and the checks
that refuse, before anything is submitted, a value Slurm would refuse or misread (or a shell line smuggled
into the job script)."""

import dataclasses
import math
import re

from gsbpolicy._cli import CommandError, refuse_control_characters

SLURM_NAME = re.compile(r"[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*")
"""A partition, account or QOS name as Slurm writes them (a comma-separated list where Slurm takes one); a
space, quote or `$` in one is a typo, or a shell line smuggled into the job script."""
NAMED_OPTIONS = ("account", "qos")
"""The `--slurm.extra` keys whose value is such a name."""
_KEYS_WE_SET = {
    "array",
    "output",
    "error",
    "signal",
    "open-mode",
    "job-name",
    "wckey",
    "time",
    "partition",
    "gpus-per-node",
    "cpus-per-task",
}
"""The sbatch options the runner sets itself (through submitit): `--slurm.extra` may not set them again."""


@dataclasses.dataclass(frozen=True)
class SlurmArgs:
    """How `--executor slurm` submits a suite: one job array, one array task per run (or per seed group)."""

    partition: str | None = None
    """Partition (queue) the jobs go to; default: the cluster's default partition."""
    gpus_per_job: int = 1
    """GPUs each job asks for (sbatch --gpus-per-node); 0 on a cluster or partition without GPUs. A trainer
    uses every GPU it is given."""
    cpus_per_job: int = 4
    """CPU cores each job asks for (sbatch --cpus-per-task). Gymnasium tasks step their envs on the CPU."""
    time: str = "04:00:00"
    """Time limit of each job, HH:MM:SS or D-HH:MM:SS (Slurm counts whole minutes). A job stopped at its
    limit is requeued and continues from its last checkpoint, so it need not fit a whole run."""
    array_parallelism: int = 256
    """Most jobs of the array running at once (sbatch --array=0-N%P)."""
    extra: tuple[str, ...] = ()
    """More sbatch options, each KEY=VALUE with the option's long name without dashes (e.g. account=lab
    qos=high mem=32G constraint=a100)."""
    signal_delay_s: int = 120
    """Seconds before the time limit at which Slurm signals a job (USR2) to stop its trainer and requeue
    itself. Slurm checks limits every 30 s, so the signal comes up to 30 s later than this: keep it above 60."""
    max_requeues: int = 10
    """Requeues at the time limit one job may take before it is reported failed (submitit's
    max_num_timeout); preemptions do not count."""
    poll_s: float = 30.0
    """Seconds between two looks at the queue while --wait waits."""

    def check(self) -> None:
        """Raise a usage `CommandError` for an option Slurm would refuse or misread."""
        for name, value, least in (
            ("gpus-per-job", self.gpus_per_job, 0),
            ("cpus-per-job", self.cpus_per_job, 1),
            ("array-parallelism", self.array_parallelism, 1),
            ("signal-delay-s", self.signal_delay_s, 0),
            ("max-requeues", self.max_requeues, 0),
        ):
            if value < least:
                raise CommandError(f"--slurm.{name} must be at least {least}, got {value}")
        if not (math.isfinite(self.poll_s) and self.poll_s > 0):
            raise CommandError(f"--slurm.poll-s must be a finite number of seconds > 0, got {self.poll_s}")
        if self.partition is not None:
            check_slurm_name(self.partition, "--slurm.partition")
        refuse_control_characters(self.time, "--slurm.time")
        limit_s = time_limit_minutes(self.time) * 60
        if self.signal_delay_s >= limit_s:
            raise CommandError(
                f"--slurm.signal-delay-s {self.signal_delay_s} must be below the time limit --slurm.time "
                f"{self.time} ({limit_s} s): the job would be signalled to stop before it starts"
            )
        sbatch_options(self.extra)


def check_slurm_name(value: str, option: str) -> None:
    """Raise a usage `CommandError` unless `value` is a partition, account or QOS name in Slurm's characters."""
    refuse_control_characters(value, option)
    if not SLURM_NAME.fullmatch(value):
        raise CommandError(
            f"{option} must be a Slurm name (letters, digits, '_', '-', '.', comma-separated), got {value!r}"
        )


def time_limit_minutes(text: str) -> int:
    """Minutes of a HH:MM:SS or D-HH:MM:SS time limit, rounded up as Slurm rounds it."""
    match = re.fullmatch(r"(?:(\d+)-)?(\d+):([0-5]\d):([0-5]\d)", text.strip())
    if match is None:
        raise CommandError(f"--slurm.time must be HH:MM:SS or D-HH:MM:SS, got {text!r}")
    days, hours, minutes, seconds = (int(g or 0) for g in match.groups())
    total = math.ceil((((days * 24 + hours) * 60 + minutes) * 60 + seconds) / 60)
    if total < 1:
        raise CommandError(f"--slurm.time must be at least 00:01:00, got {text!r}")
    return total


def sbatch_options(pairs: tuple[str, ...]) -> dict[str, str]:
    """`--slurm.extra` KEY=VALUE pairs as sbatch options; the options the runner sets itself are refused."""
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip().removeprefix("--")
        if not sep or not re.fullmatch(r"[a-z][a-z0-9_-]*", key) or not value:
            raise CommandError(f"--slurm.extra takes KEY=VALUE pairs (e.g. account=lab), got {pair!r}")
        if key.replace("_", "-") in _KEYS_WE_SET:
            raise CommandError(f"--slurm.extra {key}: the runner sets it (use its --slurm.* option, if any)")
        refuse_control_characters(value, f"--slurm.extra {key}")
        if key in NAMED_OPTIONS:
            check_slurm_name(value, f"--slurm.extra {key}")
        options[key] = value
    return options
