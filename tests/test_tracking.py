"""Weights & Biases logging (`--log.wandb`, CleanRL's `--track`), in offline mode: a tiny run's records
reach a wandb run at step env_steps, a resume continues the same wandb run, and a missing wandb is one
line naming the extra. The offline run file is read back with a small reader of its record log."""

import json
import struct
import sys
import time
from pathlib import Path

import pytest

from trainers import gsb_mdpo
from trainers._core.runlog import RunLogger

wandb = pytest.importorskip("wandb")
from wandb.proto import wandb_internal_pb2 as wandb_pb2  # noqa: E402

TINY = [
    "--env", "InvertedPendulum-v5", "--seed", "0", "--total-steps", "256", "--rollout.num-envs", "8",
    "--rollout.unroll-length", "16", "--log.no-progress", "--eval.num-evals", "1", "--eval.episodes", "2",
    "--eval.final-episodes", "2", "--policy.width", "16", "--critic.width", "16",
]  # fmt: skip
"""Two iterations of 128 steps and one evaluation."""

BLOCK, HEADER = 32768, 7
FULL, LAST = 1, 4


def wandb_records(path: Path):
    """The protobuf records of a `.wandb` file: a 7-byte file header, then LevelDB-log chunks (4-byte crc,
    2-byte length, 1-byte type) in 32 KiB blocks whose tails shorter than a chunk header are padding."""
    data = path.read_bytes()
    assert data[:HEADER] == b":W&B\xe1\xbe\x00", "not a wandb record log (version 0)"
    position, pending = HEADER, b""
    while position + HEADER <= len(data):
        if BLOCK - position % BLOCK < HEADER:
            position += BLOCK - position % BLOCK
            continue
        _crc, length, kind = struct.unpack("<IHB", data[position : position + HEADER])
        pending += data[position + HEADER : position + HEADER + length]
        position += HEADER + length
        if kind in (FULL, LAST):
            record = wandb_pb2.Record()
            record.ParseFromString(pending)
            pending = b""
            yield record


def offline_runs(run_dir: Path) -> list[dict]:
    """Each offline wandb run under the run folder, oldest first: its id, name, group, project and history
    rows ({metric: value}, with `_step`)."""
    wandb.teardown()  # `finish` may return before wandb's service has written the file; teardown waits
    runs = []
    for path in sorted(run_dir.glob("wandb/offline-run-*/run-*.wandb")):
        run = {"history": []}
        for record in wandb_records(path):
            kind = record.WhichOneof("record_type")
            if kind == "run":
                r = record.run
                run.update(id=r.run_id, name=r.display_name, group=r.run_group, project=r.project)
                run["config"] = {item.key: json.loads(item.value_json) for item in r.config.update}
            elif kind == "history":
                items = record.history.item  # wandb's own keys (`_step`) come as one-part nested keys
                run["history"].append(
                    {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in items}
                )
        runs.append(run)
    return runs


@pytest.fixture
def offline(monkeypatch, tmp_path):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb_dir"))
    monkeypatch.setenv("WANDB_SILENT", "true")


@pytest.mark.slow
def test_a_tiny_run_logs_its_records_to_an_offline_wandb_run(offline, tmp_path):
    out = tmp_path / "run"
    gsb_mdpo.main([*TINY, "--output-dir", str(out), "--log.wandb", "--log.wandb-project", "tiny"])
    (run,) = offline_runs(out)
    assert (run["name"], run["group"], run["project"]) == ("run", "gsb_mdpo:InvertedPendulum-v5", "tiny")
    assert run["config"]["env"] == "InvertedPendulum-v5" and run["config"]["total_steps"] == 256
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    logged = {}
    for row in run["history"]:
        logged.setdefault(row["_step"], {}).update(row)
    assert sorted(logged) == sorted({r["env_steps"] for r in metrics})
    for record in metrics:
        for name in ("train/actor_loss", "train/episode_return", "eval/return_deterministic"):
            if name in record:
                assert logged[record["env_steps"]][name] == pytest.approx(record[name])
    assert any("eval/return_deterministic" in r for r in metrics)


def _run_json(run_dir: Path, started: str, *, wandb: bool, resumed_with_wandb: bool | None = None) -> None:
    log = {"wandb": wandb, "wandb_project": "p", "wandb_entity": None}
    record = {"algo": "gsb_mdpo", "args": {"env": "Reach-v0", "log": log}, "git": {}, "started": started}
    if resumed_with_wandb is not None:
        record["resumes"] = [{"changed": {"log.wandb": {"old": wandb, "new": resumed_with_wandb}}}]
    run_dir.mkdir(exist_ok=True)
    (run_dir / "run.json").write_text(json.dumps(record))


def _log(run_dir: Path, *env_steps: int) -> None:
    time.sleep(1.0)  # wandb names an offline run's folder by its id and the second it starts
    logger = RunLogger(run_dir, 100, tensorboard=False, progress=False)
    for steps in env_steps:
        logger.write({"type": "train", "iteration": steps // 10, "env_steps": steps, "train/x": steps / 10})
    logger.close()


def test_a_resume_continues_the_same_wandb_run_and_a_new_run_starts_another(offline, tmp_path):
    run_dir = tmp_path / "run"
    _run_json(run_dir, "2026-01-01T00:00:00+00:00", wandb=False, resumed_with_wandb=True)
    _log(run_dir, 10, 20)  # --log.wandb switched on at the resume: the args in effect are what count
    _run_json(run_dir, "2026-01-01T00:00:00+00:00", wandb=True)
    _log(run_dir, 20, 30)
    first, resumed = offline_runs(run_dir)
    assert first["id"] == resumed["id"]
    assert [row["_step"] for row in resumed["history"]] == [20, 30]
    _run_json(run_dir, "2026-02-01T00:00:00+00:00", wandb=True)  # the folder reused by a new run
    _log(run_dir, 10)
    assert len({run["id"] for run in offline_runs(run_dir)}) == 2


def test_without_wandb_the_flag_is_one_line_naming_the_extra(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "wandb", None)  # what an install without the `track` extra looks like
    with pytest.raises(SystemExit) as exit_:
        gsb_mdpo.main([*TINY, "--output-dir", str(tmp_path / "run"), "--log.wandb"])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 1 and "\n" not in err  # a missing extra is a failure, not a usage error
    assert "--log.wandb" in err and 'pip install -c tests/constraints.txt -e ".[track]"' in err
    assert not (tmp_path / "run").exists()
