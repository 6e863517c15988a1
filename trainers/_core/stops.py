"""How a run can stop early without being wrong, each said in one line: Ctrl-C (exit 130), SIGTERM (exit 143, what
`kill`, Slurm and most job schedulers send), a full disk or another failed write (exit 1), and the accelerator
or host running out of memory (exit 1). Whatever stops a run, what was saved before stays as it was (checkpoints
are committed atomically, metrics are appended whole), so the line says what is kept and how to continue.
"""

import contextlib
import re
import signal

from gsbpolicy._cli import INTERRUPTED

TERMINATED = 143
"""Exit status of a run stopped by SIGTERM (128 + SIGTERM)."""


class Terminated(BaseException):
    """SIGTERM arrived: raised in the main thread (like KeyboardInterrupt for SIGINT), so that the run unwinds,
    releases its lock and says where it stopped."""


@contextlib.contextmanager
def sigterm_raises():
    """Inside: SIGTERM raises `Terminated` instead of ending the process silently. Only the main thread can
    install a handler; elsewhere (a trainer run from a worker thread) SIGTERM keeps its own handling."""
    try:
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _raise_terminated(signum, frame):
    raise Terminated


def where_it_stopped(folders) -> str:
    """ "at iteration k of n; the checkpoint of iteration j is kept in DIR: continue with ... --resume" for the run
    (or the seed group) that writes these run folders (`trainers._core.runfolder.RunFolder`)."""
    lead = folders[0]
    done, total = lead.iteration, lead.args.num_iterations
    when = (
        f"after its last iteration ({total} of {total}), while writing its policy folder"
        if done >= total
        else f"at iteration {done + 1} of {total}"
    )
    kept = (
        f"the checkpoint of iteration {lead.checkpoints.iteration} is kept in {lead.run_dir / 'checkpoint'}"
        if lead.checkpoints.iteration is not None
        else f"no checkpoint had been written in {lead.run_dir}"
    )
    others = "" if len(folders) == 1 else f" (and in the other {len(folders) - 1} seeds' folders)"
    return f"{when}; {kept}{others}: continue with the same command and --resume"


def stop_signal(err: BaseException) -> tuple[str, int] | None:
    """(what stopped the run, exit status) for Ctrl-C and SIGTERM; None for anything else."""
    if isinstance(err, KeyboardInterrupt):
        return "interrupted (Ctrl-C)", INTERRUPTED
    if isinstance(err, Terminated):
        return "terminated (SIGTERM)", TERMINATED
    return None


_OUT_OF_MEMORY = re.compile(r"RESOURCE_EXHAUSTED|[Oo]ut of memory|not enough memory")
_BYTES = re.compile(r"allocat\w*\s+(\d+)\s+bytes")


def out_of_memory(err: BaseException, args) -> str | None:
    """The line for an out-of-memory error (XLA's RESOURCE_EXHAUSTED, torch's, Python's MemoryError): what was
    asked for, and the flags that size it; None for any other error."""
    text = str(err)
    if not isinstance(err, MemoryError) and not (
        isinstance(err, RuntimeError) and _OUT_OF_MEMORY.search(text)
    ):
        return None
    asked = _BYTES.search(text)
    size = f"{int(asked.group(1)) / 2**30:,.2f} GiB" if asked else "more memory than there is"
    rollout = args.rollout
    return (
        f"out of memory: the run asked for {size}; an iteration collects --rollout.num-envs "
        f"{rollout.num_envs} x --rollout.unroll-length {rollout.unroll_length} x --rollout.unrolls-per-iteration "
        f"{rollout.unrolls_per_iteration} env steps and updates on 1/--rollout.num-minibatches "
        f"({rollout.num_minibatches}) of them at a time, and an evaluation runs --eval.num-envs "
        f"{args.eval.num_envs} envs: lower --rollout.num-envs or --eval.num-envs, or raise "
        "--rollout.num-minibatches"
        + (f" (or train fewer --seeds together than {len(args.seeds)})" if len(args.seeds) > 1 else "")
    )
