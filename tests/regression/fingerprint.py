"""Do refactors change results? Fingerprint a short cpu-preset run of every trainer, Gymnasium and Playground.

    python tests/regression/fingerprint.py --record      # write tests/regression/fingerprints.json
    python tests/regression/fingerprint.py               # rerun and compare with it (exit 1 on a difference)
    python tests/regression/fingerprint.py --only ppo    # some trainers only (substring of the run name)
    python tests/regression/fingerprint.py --record --only fpo_pp   # add or redo some runs, keep the others

Each run trains 3 iterations from seed 0 in a fresh temporary folder. Its fingerprint is the SHA-256 of
`metrics.jsonl` without the wall-clock fields (`time/*`), of every tensor of `policy/model.safetensors` (name,
dtype, shape and bytes: the file's metadata may change, the numbers may not) and of `policy/results.json`
without its provenance fields (date, commit) and without `metrics_sha256`, the hash of the raw metrics.jsonl,
whose wall-clock fields differ run to run (its other content is the `metrics` fingerprint). A refactor that
claims "results unchanged" must leave every fingerprint equal on the machine that recorded them (XLA's CPU
code is deterministic run to run; another CPU or XLA version may legitimately differ, so record and check on
the same machine and versions).

Not part of CI: 14 runs, each compiling its own functions, take 15-25 minutes on a 2-core CPU.
"""

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RECORD = Path(__file__).with_name("fingerprints.json")

TRAINERS = ("gsb_mdpo", "gaussian_ppo", "dppo", "fpo", "fpo_pp", "genpo", "ppo")
ENVS = ("InvertedPendulum-v5", "CartpoleSwingup")
SMALL = [
    "--preset", "cpu", "--seed", "0", "--total-steps", "3000", "--log.checkpoint-every", "2", "--log.no-progress",
    "--eval.num-evals", "2", "--eval.episodes", "2", "--eval.final-episodes", "2", "--eval.num-envs", "4",
    "--rollout.episode-length", "200",
]  # fmt: skip
"""Three iterations of every cpu preset (each collects at most 1024 steps per iteration), two evaluations, a
checkpoint after iteration 2 and at the end, short Playground episodes."""

PROVENANCE = ("date", "git_commit", "git_dirty", "metrics_sha256")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fingerprint(run_dir: Path) -> dict:
    """The result-bearing content of a finished run folder, hashed."""
    from safetensors.numpy import load_file

    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    records = [{k: v for k, v in r.items() if not k.startswith("time/")} for r in records]
    tensors = load_file(str(run_dir / "policy" / "model.safetensors"))
    results = json.loads((run_dir / "policy" / "results.json").read_text())
    results = {k: v for k, v in results.items() if k not in PROVENANCE}
    return {
        "metrics": _sha(json.dumps(records, sort_keys=True).encode()),
        "records": len(records),
        "weights": {
            name: _sha(f"{t.dtype}{t.shape}".encode() + t.tobytes()) for name, t in sorted(tensors.items())
        },
        "results": _sha(json.dumps(results, sort_keys=True).encode()),
        "final_mean": results["mean"],
    }


def run_one(trainer: str, env: str, scratch: Path) -> dict:
    out = scratch / f"{trainer}-{env}"
    command = [sys.executable, "-m", f"trainers.{trainer}", "--env", env, *SMALL, "--output-dir", str(out)]
    start = time.time()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{trainer} on {env} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    print(f"  {trainer} {env}: {time.time() - start:.0f} s", flush=True)
    return fingerprint(out)


def compare(old: dict, new: dict) -> list[str]:
    """Human-readable differences between two fingerprints of one run ([] when equal)."""
    problems = [f"{key} differs" for key in ("metrics", "records", "results") if old[key] != new[key]]
    if old["weights"].keys() != new["weights"].keys():
        problems.append(f"tensor names differ: {sorted(old['weights'])} vs {sorted(new['weights'])}")
    else:
        problems += [f"tensor {n} differs" for n in old["weights"] if old["weights"][n] != new["weights"][n]]
    return problems


def _write_record(fresh: dict, everything: bool) -> None:
    """Merge `fresh` into the record, leaving every other run's entry as it was. The top-level commit names
    the code that recorded all runs; a partial record names its commit in each run it adds instead, so the
    file never claims that runs it did not redo came from the new commit."""
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    old = json.loads(RECORD.read_text()) if RECORD.exists() else {"commit": commit, "runs": {}}
    if everything:
        runs, top = fresh, commit
    else:
        runs, top = (
            {**old["runs"], **{key: {**fp, "commit": commit} for key, fp in fresh.items()}},
            old["commit"],
        )
    RECORD.write_text(json.dumps({"commit": top, "command": SMALL, "runs": runs}, indent=1) + "\n")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", action="store_true", help=f"write {RECORD.name} instead of checking it")
    parser.add_argument("--only", nargs="*", default=(), help="runs whose name contains one of these")
    opts = parser.parse_args(argv)
    names = [(t, e) for t in TRAINERS for e in ENVS]
    names = [(t, e) for t, e in names if not opts.only or any(s in f"{t}-{e}" for s in opts.only)]
    recorded = json.loads(RECORD.read_text())["runs"] if RECORD.exists() else {}
    fresh, failed = {}, []
    with tempfile.TemporaryDirectory() as scratch:
        for trainer, env in names:
            key = f"{trainer}-{env}"
            fresh[key] = run_one(trainer, env, Path(scratch))
            if not opts.record:
                problems = compare(recorded[key], fresh[key]) if key in recorded else ["not recorded"]
                print(f"{key}: {'identical' if not problems else '; '.join(problems)}", flush=True)
                failed += [key] if problems else []
    if opts.record:
        _write_record(fresh, everything=not opts.only)
        print(f"recorded {len(fresh)} runs in {RECORD}")
    elif failed:
        raise SystemExit(f"{len(failed)} of {len(names)} runs changed: {', '.join(failed)}")
    else:
        print(f"all {len(names)} runs identical to the record")


if __name__ == "__main__":
    main()
