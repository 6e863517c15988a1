"""Measurement scripts (benchmarks, not tests): timings, throughputs and agreement checks; `write_result` ends
each one."""


def write_result(result: dict, out) -> None:
    """End a measurement script: record the load average the machine ended at (a timing is only as good as
    the quiet it ran in), the commit and the machine, print the result as JSON and, with `out`, save it there
    too."""
    import json
    import os
    from pathlib import Path

    from gsbpolicy._files import atomic_write_text
    from trainers._core.runlog import git_commit
    from trainers.benchmark.cost import hardware

    result["load_average_end"] = os.getloadavg()
    result.setdefault("git", git_commit())  # which code, on which machine, the numbers come from
    result.setdefault("machine", hardware())
    text = json.dumps(result, indent=1)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(Path(out), text + "\n")
    print(text)
