"""`python -m hub_cards.curves`: the learning curves of one or more run folders, without publishing. Runs are
copies of the committed example card's run.json and metrics.jsonl with their seed, algorithm or returns
changed, so nothing trains here."""

import json
from pathlib import Path

import pytest

from hub_cards import curves

EXAMPLE = Path(__file__).resolve().parents[1] / "hub_cards" / "examples" / "gsb_mdpo-InvertedPendulum-v5"
METRIC = "eval/return_deterministic"
PNG = b"\x89PNG\r\n\x1a\n"


def make_run(folder: Path, *, seed: int = 0, algo: str = "gsb_mdpo", offset: float = 0.0) -> Path:
    """A run folder whose evaluation returns are the example's plus `offset`."""
    folder.mkdir(parents=True)
    run = json.loads((EXAMPLE / "run.json").read_text())
    run["algo"], run["args"]["seed"] = algo, seed
    (folder / "run.json").write_text(json.dumps(run))
    records = [json.loads(line) for line in (EXAMPLE / "metrics.jsonl").read_text().splitlines()]
    for record in records:
        if METRIC in record:
            record[METRIC] += offset
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


def example_returns() -> list[float]:
    lines = (EXAMPLE / "metrics.jsonl").read_text().splitlines()
    return [r[METRIC] for r in map(json.loads, lines) if METRIC in r]


def test_seeds_of_one_method_are_one_curve_the_mean_with_a_band_over_seeds(tmp_path, capsys):
    runs = [make_run(tmp_path / f"seed_{s}", seed=s, offset=10.0 * s) for s in (0, 1, 2)]
    out = tmp_path / "plots" / "curves.png"
    assert curves.main([*map(str, runs), "--out", str(out)]) == 0
    assert out.read_bytes().startswith(PNG) and "wrote" in capsys.readouterr().out
    (curve,) = curves.seed_curves([curves.run_series(r, METRIC, "env_steps") for r in runs], per_run=False)
    assert curve["label"] == "gsb_mdpo on InvertedPendulum-v5, 3 seeds (0, 1, 2)"
    assert curve["mean"] == pytest.approx([r + 10.0 for r in example_returns()])
    assert curve["std"] == pytest.approx([(200 / 3) ** 0.5] * len(curve["x"]))  # std of (0, 10, 20)


def test_methods_are_separate_curves_and_per_run_draws_each_seed(tmp_path):
    runs = [
        make_run(tmp_path / "a0"),
        make_run(tmp_path / "a1", seed=1),
        make_run(tmp_path / "b0", algo="fpo"),
    ]
    series = [curves.run_series(r, METRIC, "iteration") for r in runs]
    labels = [c["label"] for c in curves.seed_curves(series, per_run=False)]
    assert labels == ["gsb_mdpo on InvertedPendulum-v5, 2 seeds (0, 1)", "fpo on InvertedPendulum-v5, seed 0"]
    (alone,) = curves.seed_curves(series[2:], per_run=False)
    assert alone["std"] == [  # one run's evaluation band is its spread over episodes
        json.loads(line)[METRIC + "_std"]
        for line in (EXAMPLE / "metrics.jsonl").read_text().splitlines()
        if METRIC in line
    ]
    per_run = curves.seed_curves(series, per_run=True)
    assert [c["label"].rsplit(", ", 1)[1] for c in per_run] == ["seed 0", "seed 1", "seed 0"]
    assert (
        curves.main([*map(str, runs), "--out", str(tmp_path / "c.png"), "--per-run", "--x", "iteration"]) == 0
    )


def _broken_runs(tmp_path: Path) -> dict[str, Path]:
    empty = tmp_path / "empty"
    empty.mkdir()
    no_metrics = make_run(tmp_path / "no_metrics")
    (no_metrics / "metrics.jsonl").unlink()
    bad_line = make_run(tmp_path / "bad_line")
    with (bad_line / "metrics.jsonl").open("a") as f:
        f.write("{not json\n")
    return {"missing": tmp_path / "nowhere", "empty": empty, "no_metrics": no_metrics, "bad_line": bad_line}


def exit_code(argv: list[str]) -> int:
    """The command's exit status, whether it returns it or argparse exits with it."""
    try:
        return curves.main(argv)
    except SystemExit as exit_:
        return exit_.code


@pytest.mark.parametrize(
    "case, extra, message",
    [
        ("missing", [], "is not a folder"),
        ("empty", [], "run.json is missing (is"),
        ("no_metrics", [], "metrics.jsonl is missing"),
        ("bad_line", [], "not valid JSON"),
        ("good", ["--metric", "eval/return_mean"], "has no 'eval/return_mean'; --metric is one of: eval/"),
        ("good", ["--x", "time"], "invalid choice: 'time'"),
        ("twice", [], "have the same seed: a band is over seeds; use --per-run"),
        ("folder_out", [], "is a folder; give a file path"),
        ("jpg_out", [], "curves.jpg: the suffix picks the format, one of .png, .svg, .pdf; got .jpg"),
        ("the run's metrics.jsonl as --out", [], "metrics.jsonl is the training log of the run in"),
        ("the run's run.json as --out", [], "run.json is the run record of the run in"),
        ("a checkpoint file as --out", [], "meta.json is inside the checkpoint of the run in"),
        ("another run's folder as --out", [], "is the folder of a training run: writing there would"),
        ("a published folder's weights as --out", [], "model.safetensors is the weights of the policy in"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_with_nothing_written(tmp_path, capsys, case, extra, message):
    good = make_run(tmp_path / "good")
    (good / "checkpoint").mkdir()
    (good / "checkpoint" / "meta.json").write_text("{}")
    runs = {**_broken_runs(tmp_path), "good": good}
    out = {"folder_out": tmp_path / "folder", "jpg_out": tmp_path / "curves.jpg",
           "the run's metrics.jsonl as --out": good / "metrics.jsonl", "the run's run.json as --out": good / "run.json",
           "a checkpoint file as --out": good / "checkpoint" / "meta.json",
           "another run's folder as --out": good,
           "a published folder's weights as --out": tmp_path / "hub" / "model.safetensors"}.get(case, tmp_path / "curves.png")  # fmt: skip
    if (
        case == "a published folder's weights as --out"
    ):  # run.json beside config.json: what the publisher writes
        (tmp_path / "hub").mkdir()
        for name in ("run.json", "metrics.jsonl", "config.json", "model.safetensors"):
            (tmp_path / "hub" / name).write_text("{}")
    if case == "folder_out":
        out.mkdir()
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    paths = [good, good] if case == "twice" else [runs.get(case, good)]
    assert exit_code([*map(str, paths), "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and message in err, err
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("suffix, magic", [(".svg", b"<?xml"), (".pdf", b"%PDF"), (".PNG", PNG)])
def test_the_out_suffix_picks_the_format(tmp_path, suffix, magic):
    good = make_run(tmp_path / "good")
    assert curves.main([str(good), "--out", str(tmp_path / f"c{suffix}")]) == 0
    assert (tmp_path / f"c{suffix}").read_bytes().startswith(magic)
