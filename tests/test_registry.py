"""The algorithm registry is the one place an algorithm is named, and the benchmark pipeline reaches the
model cards through files only: every entry is a real trainer, every suite column a registered algorithm,
the cards print the registry's labels (the one module of trainers hub_cards imports), and trainers never imports
hub_cards."""

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from hub_cards.baselines import method_name
from trainers import registry
from trainers.benchmark.suites import PAPER_METHODS, SUITES, Variant

ROOT = Path(__file__).parents[1]


@pytest.mark.parametrize("algo", registry.ALGORITHMS, ids=lambda a: a.name)
def test_every_entry_is_a_trainer_with_a_cpu_preset_and_a_main(algo):
    from trainers._core.cli import parse

    assert algo.available()
    module = importlib.import_module(algo.module)
    assert "cpu" in algo.presets and algo.presets is module.PRESETS
    assert callable(module.main)
    assert parse(module.Args, algo.presets, "cpu", "", []).preset == "cpu"  # the preset passes validation
    assert algo.policy_kind in registry.POLICY_KINDS and algo.module == f"trainers.{algo.name}"


@pytest.mark.parametrize("algo", registry.ALGORITHMS, ids=lambda a: a.name)
def test_the_vmapped_seeds_capability_is_what_the_trainer_accepts(algo, capsys):
    """The runner groups the seeds of a Playground task by the declared capability: a trainer that declares it
    takes `--seeds` there, one that does not refuses it (a one-line usage error)."""
    from trainers._core.cli import parse

    args_type = importlib.import_module(algo.module).Args
    argv = ["--env", "tests.jax_point_mass:PointMass", "--seeds", "0", "1"]
    if algo.vmapped_seeds:
        assert parse(args_type, algo.presets, "cpu", "", argv).seeds == (0, 1)
    else:
        with pytest.raises(SystemExit):
            parse(args_type, algo.presets, "cpu", "", argv)
        assert "--seeds" in capsys.readouterr().err


def test_names_labels_and_columns():
    names = registry.names()
    assert len(set(names)) == len(names) and len({a.label for a in registry.ALGORITHMS}) == len(names)
    assert registry.PROPOSED in PAPER_METHODS and set(PAPER_METHODS) < set(names)


def test_registering_an_algorithm_changes_no_suite():
    """The paper's columns are named by the suites: a new algorithm joins no suite and moves no verdict."""
    before = {name: suite.variant_names for name, suite in SUITES.items()}
    registry.register(registry.Algorithm("newcomer", "Newcomer", "flow", module="tests.nowhere"))
    try:
        assert registry.get_algo("newcomer").module == "tests.nowhere" and "newcomer" in registry.names()
        assert {name: suite.variant_names for name, suite in SUITES.items()} == before
        assert "newcomer" not in PAPER_METHODS
        with pytest.raises(ValueError, match="an algorithm named 'newcomer' is already registered"):
            registry.register(registry.Algorithm("newcomer", "Again", "flow"))
    finally:
        registry.unregister("newcomer")
    assert "newcomer" not in registry.names()


def test_an_unknown_name_is_a_one_line_error_listing_the_valid_ones():
    with pytest.raises(ValueError) as err:
        registry.get_algo("sac")
    message = str(err.value)
    assert message == f"unknown algorithm 'sac'; algorithms: {', '.join(registry.names())}"
    with pytest.raises(ValueError, match="unknown algorithm 'sac'"):
        Variant("sac", "sac")  # a suite column of an unregistered algorithm fails where it is defined
    with pytest.raises(ValueError, match="policy kind 'mixture' is not one of"):
        registry.Algorithm("x", "X", "mixture")


def test_every_suite_column_is_a_registered_algorithm():
    for suite in SUITES.values():
        for variant in suite.variants:
            assert variant.method in registry.names(), (suite.name, variant.name)
    # A reference column is one whose method is not one of the paper's (`PAPER_METHODS`).
    assert [v.name for v in SUITES["cpu-gym"].variants if v.reference] == ["fpo_pp", "sb3_ppo:zoo"]
    assert [v.name for v in SUITES["cpu-playground"].variants if v.reference] == ["fpo_pp"]


def test_importing_the_registry_imports_no_trainer_or_training_stack():
    heavy = ("jax", "torch", "stable_baselines3", "optax", "tyro", "trainers.gsb_mdpo", "trainers.ppo")
    script = f"import sys, trainers.registry\nprint(','.join(m for m in {heavy!r} if m in sys.modules))"
    loaded = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert loaded.stdout.strip() == ""


def test_cards_print_the_registry_labels():
    for algo in registry.ALGORITHMS:
        assert method_name(algo.name) == algo.label
    assert method_name("sac") == "sac"  # an id the table does not list is shown as it is
    registry.register(registry.Algorithm("my_algo", "My algorithm", "flow"))
    try:
        assert method_name("my_algo") == "My algorithm"  # an algorithm registered at run time too
    finally:
        registry.unregister("my_algo")


def _imported_modules(package: str) -> dict[str, set[str]]:
    """Per module file of `package`: the absolute modules its import statements name (at any depth,
    function-level imports included; relative imports stay inside the package)."""
    found = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        names = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module)
        found[str(path.relative_to(ROOT))] = names
    return found


def test_hub_cards_imports_only_the_registry_of_trainers_and_trainers_never_hub_cards():
    """hub_cards reads the benchmark's result files and the registry's labels, trainers writes the files: the
    cards import no trainer (the registry imports none), and trainers never imports hub_cards."""
    cards = {
        f"{path}: {name}"
        for path, names in _imported_modules("hub_cards").items()
        for name in names
        if name.split(".")[0] == "trainers" and name != "trainers.registry"
    }
    training = {
        f
        for f, names in _imported_modules("trainers").items()
        if any(n.split(".")[0] == "hub_cards" for n in names)
    }
    assert cards == set() and training == set()


def test_the_benchmark_commands_still_start():
    for module in ("trainers.benchmark", "trainers.benchmark.aggregate"):
        out = subprocess.run(
            [sys.executable, "-m", module, "--help"], capture_output=True, text=True, cwd=ROOT
        )
        assert out.returncode == 0 and "--suite" in out.stdout, out.stderr


def test_every_algorithm_has_the_python_training_api():
    import inspect

    for algo in registry.ALGORITHMS:
        train = importlib.import_module(algo.module).train
        assert list(inspect.signature(train).parameters) == ["env", "preset", "overrides"], algo.name
