"""The Table 3 timing script: each method's command is its gym preset from a fresh folder with the compilation
cache off, the warm-up iterations are left out of the steady state, and the file it writes is what the claims
read. The trainers are stood in for (a timing is not a test)."""

import json

import pytest

from trainers.lab import claims, claims_report
from trainers.lab.perf import runtime


def test_each_methods_iteration_is_its_table2_geometry():
    assert runtime.steps_per_iteration("gsb_mdpo", "HalfCheetah-v5") == 1024 * 24
    cmd = runtime.command("dppo", "HalfCheetah-v5", 3 * 24576, runtime.Path("runs/x"))
    assert cmd[2:5] == ["trainers.dppo", "--preset", "gym"] and cmd[cmd.index("--total-steps") + 1] == "73728"
    assert cmd[-2:] == ["--compile-cache", "off"]


def _fake_execute(seconds: dict):
    """Writes what a trainer leaves: one train record per iteration with its samples per second."""

    def execute(cmd, directory):
        method = cmd[2].removeprefix("trainers.")
        per = runtime.steps_per_iteration(method, "HalfCheetah-v5")
        directory.mkdir(parents=True)
        lines = [json.dumps({"type": "train", "time/sps": per / s}) for s in seconds[method]]
        lines.insert(1, json.dumps({"type": "eval"}))
        (directory / "metrics.jsonl").write_text("\n".join(lines) + "\n")
        return {"wall_s": sum(seconds[method]) + 5.0, "peak_rss_mib": 900.0, "peak_gpu_mib": None}

    return execute


def test_the_steady_state_leaves_out_the_warmup_and_the_claims_read_the_file(tmp_path, monkeypatch):
    from trainers.benchmark import cost

    # Table 3's minutes as iteration seconds, after a long first (compiling) iteration.
    seconds = {m: [60.0] + [minutes] * 3 for m, (minutes, _) in claims.TABLE3.items()}
    monkeypatch.setattr(cost, "execute", _fake_execute(seconds))
    out = tmp_path / "runtime-cpu.json"
    runtime.main(
        ["--iterations", "3", "--warmup", "1", "--runs-dir", str(tmp_path / "runs"), "--out", str(out)]
    )
    result = json.loads(out.read_text())
    gsb = result["methods"]["gsb_mdpo"]
    assert gsb["iteration_seconds"] == pytest.approx([7.39] * 3) and gsb["warmup_seconds"] == pytest.approx(
        [60.0]
    )
    assert gsb["end_to_end_s"] == pytest.approx(60 + 3 * 7.39 + 5) and gsb["env_steps"] == 4 * 24576
    assert {"started", "finished", "git", "load_average_start", "load_average_end"} <= set(result)
    rows = claims_report.rows({}, {"runtime": {out.name: result}})
    where = f"{out.name} on {claims.hardware(result['machine'])}"
    verdicts = {r.claim.rule.__name__: r.verdict for r in rows if r.source == where}
    # Table 3's own ratios agree on a GPU; a CPU is not the paper's hardware.
    expected = claims.AGREES if result["machine"]["gpu"] else claims.NOT_COMPARABLE
    assert verdicts == {"time_close_to_ppo_fpo_dppo": expected, "time_lower_than_dppo": expected}
    # No GPU memory on a CPU: the memory claim is not measured by this file.
    (memory,) = [r for r in rows if r.claim.rule is claims.memory_comparable]
    assert memory.verdict == claims.NOT_MEASURED


def test_too_few_iterations_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        runtime.main(["--iterations", "1"])
    assert exit_info.value.code == 2 and "--iterations must be at least 2" in capsys.readouterr().err
