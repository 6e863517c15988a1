"""The timing scripts' generated README and documentation blocks (`trainers.lab.perf`)."""

from pathlib import Path

README = (Path(__file__).parents[2] / "README.md").read_text()


def test_the_readme_performance_block_is_generated_from_the_committed_measurements(capsys):
    from trainers.lab.perf import report

    report.main(["--check"])
    assert "up to date" in capsys.readouterr().out


def test_the_timing_script_finds_the_readme_blocks_it_runs():
    """`trainers.lab.perf.new_user` (which times the README's steps) runs the control-script and robot blocks."""
    from trainers.lab.perf.new_user import SCRIPTS, readme_block

    for name, heading in SCRIPTS.items():
        compile(readme_block(heading, README), name, "exec")
