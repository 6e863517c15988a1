"""The exploration probe: on BallInCup a periodic swing scores where random actions never do (the reason
the benchmark tables give for the task's zeros), its file is merged per env, and bad input is refused."""

import json

import numpy as np
import pytest

from trainers.benchmark import aggregate, report
from trainers.benchmark.ledger import PROBE_FILE
from trainers.lab import exploration_probe as probe


def test_swings_are_a_sine_on_the_first_actuator_and_square_waves_on_the_rest():
    actions = probe.swing_actions(
        np.array([1.0, 2.0]), np.array([0.0, np.pi / 2]), steps=5, dt=0.125, act_dim=3
    )
    assert actions.shape == (5, 2, 3)
    t = np.arange(5) * 0.125
    np.testing.assert_allclose(actions[:, 0, 0], np.sin(2 * np.pi * t), atol=1e-6)
    np.testing.assert_allclose(actions[:, 1, 0], np.cos(4 * np.pi * t), atol=1e-6)
    np.testing.assert_array_equal(actions[:, 0, 1], actions[:, 0, 2])
    assert set(np.unique(actions[:, :, 1])) <= {-1.0, 0.0, 1.0}


@pytest.mark.slow
def test_ballincup_rewards_a_swing_and_not_random_actions(tmp_path, capsys):
    # The committed probe's best swing (2 Hz, phase pi) and the measured family it belongs to, cut down.
    out = tmp_path / "probe.json"
    out.write_text(json.dumps({"OtherTask": {"env": "OtherTask"}}))
    probe.main(["--episodes", "4", "--frequencies-hz", "2.0", "--phases", "2", "--out", str(out)])
    entries = json.loads(out.read_text())
    assert set(entries) == {"OtherTask", "BallInCup"}, "a rerun replaces its own env's entry only"
    entry = entries["BallInCup"]
    assert entry["random"] == {"episodes": 4, "mean": 0.0, "max": 0.0, "rewarded_episodes": 0}
    assert entry["swing"]["best"]["frequency_hz"] == 2.0 and entry["swing"]["best"]["return"] > 100
    assert "BallInCup: random actions mean 0 (0/4 episodes rewarded)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--env", "NoSuchTask"], "unknown env 'NoSuchTask'"),
        (["--episodes", "0"], "need episodes >= 1"),
        (["--frequencies-hz", "-1"], "frequencies must be positive"),
    ],
)
def test_bad_settings_are_one_line_usage_errors(argv, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        probe.main([*argv, "--out", str(tmp_path / "probe.json")])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert message in error and len(error.strip().splitlines()) == 1
    assert not (tmp_path / "probe.json").exists()


@pytest.mark.parametrize("content", ['{"BallInCup": {"trunc', "[1, 2]"])
def test_a_damaged_probe_file_stops_the_probe_before_it_runs_and_is_kept(content, tmp_path, capsys):
    out = tmp_path / "probe.json"
    out.write_text(content)
    with pytest.raises(SystemExit) as exit_info:
        probe.main(["--out", str(out)])
    assert exit_info.value.code == 1
    error = capsys.readouterr().err
    assert str(out) in error and len(error.strip().splitlines()) == 1
    assert out.read_text() == content


def _entry(env):
    return {"env": env, "random": {"episodes": 32, "mean": 0.0, "max": 0.0, "rewarded_episodes": 0},
            "swing": {"episodes": 32, "mean": 55.8, "max": 723.0, "rewarded_episodes": 8,
                      "best": {"frequency_hz": 2.0, "phase": 3.14, "return": 723.0}}}  # fmt: skip


def test_the_summaries_quote_the_probe_for_the_tasks_the_suite_ran(tmp_path):
    ledger = {"suite": "cpu-playground", "task": "BallInCup", "variant": "gsb_mdpo", "method": "gsb_mdpo",
              "seed": 0, "final": {"mean": 0.0, "std": 0.0, "n_episodes": 32, "deterministic": True,
                                   "env_steps": 300},
              "curve": {"env_steps": [300], "deterministic": [0.0], "stochastic": [0.0]}, "step_clip_frac": None,
              "cost": {"wall_s": 60.0}, "git": {"commit": "abc"}, "hardware": {"cpu": "x", "cores": 2, "gpu": None}}  # fmt: skip
    (tmp_path / "cpu-playground.runs.jsonl").write_text(json.dumps(ledger) + "\n")
    (tmp_path / PROBE_FILE).write_text(json.dumps({"BallInCup": _entry("BallInCup"),
                                                              "FingerSpin": _entry("FingerSpin")}))  # fmt: skip
    summary = aggregate.summaries(tmp_path)["cpu-playground"]
    assert list(summary["exploration_probe"]) == ["BallInCup"], "only the tasks the suite ran"
    table = report.markdown(summary)
    assert ("32 episodes of i.i.d. uniform random actions scored 0 on average (0 with any reward), while 8 of 32 "
            "open-loop periodic swings scored, the best 723 at 2 Hz") in table  # fmt: skip
    # It stays when a run leaves 0: the runs that did not are the ones it explains.
    moved = {
        **ledger,
        "seed": 1,
        "curve": {"env_steps": [300], "deterministic": [899.0], "stochastic": [880.0]},
    }
    (tmp_path / "cpu-playground.runs.jsonl").write_text(json.dumps(ledger) + "\n" + json.dumps(moved) + "\n")
    table = report.markdown(aggregate.summaries(tmp_path)["cpu-playground"])
    assert "returned the same value" not in table and "open-loop periodic swings scored" in table
    # A damaged probe file is named, not a traceback.
    (tmp_path / PROBE_FILE).write_text("{")
    with pytest.raises(ValueError, match="exploration_probe.json is not valid JSON"):
        aggregate.summaries(tmp_path)
