"""House rules a reviewer would otherwise check by eye: no function over 60 lines, and few formatter pragmas
(`# fmt: skip`, which keeps the formatter's hands off a statement), each on a table of data, such as a column of
the paper's tables laid out as rows, never on logic or on an ordinary call."""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("gsbpolicy", "trainers", "export", "hub_cards")
LONGEST = 60
MOST_PRAGMAS = 20
"""How many formatter pragmas the code outside the tests may hold (issue 66)."""

PRAGMA = re.compile(r"fmt:\s*(skip|off|on)\b|yapf:\s*(disable|enable)\b", re.IGNORECASE)
"""Every spelling that ruff or black honours (`# fmt: skip`, `#fmt:skip`, a `# fmt: off` ... `# fmt: on` region,
which ruff also takes as `# yapf: disable` ... `# yapf: enable`), matched anywhere on a line so that no spelling
escapes the count."""
SKIP = re.compile(r"#\s*fmt:\s*skip\s*$")
"""The one pragma allowed: a trailing `# fmt: skip`, which ends the statement it applies to."""

TABLE_NODES = (
    ast.Tuple,
    ast.List,
    ast.Dict,
    ast.Set,
    ast.Constant,
    ast.Name,
    ast.Attribute,
    ast.Load,
    ast.Store,
)
"""What a table's cells may be: literals, names of constants and nested literal containers. No call of any name
(so neither renaming a call nor defining a helper makes a table), no operator, comprehension or f-string."""

SKIPPED_FOLDERS = {"tests", "site", "build", "dist", "node_modules", "__pycache__"}
"""Not the code the budget is about: the tests' own parameter tables, and generated or installed files."""


def _sources():
    for package in PACKAGES:
        yield from sorted((ROOT / package).rglob("*.py"))


def _code_outside_tests():
    """Every .py file of the repository except the tests (in a `tests` folder, or named test_*.py/conftest.py)."""
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT).parts
        if any(p in SKIPPED_FOLDERS or p.startswith((".", "tests_", "venv")) for p in parts[:-1]):
            continue
        if not path.name.startswith("test_") and path.name != "conftest.py":
            yield path


def test_no_function_is_longer_than_60_lines():
    long = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > LONGEST:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length} lines)")
    assert not long, long


def _is_cell(node: ast.AST) -> bool:
    """A literal, a (dotted) name, a signed number or a literal container of cells."""
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, ast.USub | ast.UAdd) and isinstance(node.operand, ast.Constant)
    if isinstance(node, ast.Constant):
        return not isinstance(node.value, bytes)
    return isinstance(node, TABLE_NODES) and all(_is_cell(child) for child in ast.iter_child_nodes(node))


def _is_table(statement: ast.stmt) -> bool:
    """An assignment whose value is a literal tuple, list, dict or set of cells."""
    if not isinstance(statement, ast.Assign | ast.AnnAssign) or statement.value is None:
        return False
    value = statement.value
    if isinstance(value, ast.Dict) and None in value.keys:  # `{**other}` merges, it does not list
        return False
    return isinstance(value, ast.Tuple | ast.List | ast.Dict | ast.Set) and _is_cell(value)


def pragma_problems(text: str) -> tuple[list[int], list[int]]:
    """(the lines holding a formatter pragma, those of them not a trailing `# fmt: skip` on a table)."""
    tree = ast.parse(text)
    # A statement with a body (def, if, for, with, ...) ends where its last inner statement ends.
    simple = [node for node in ast.walk(tree) if isinstance(node, ast.stmt) and "body" not in node._fields]
    pragmas, misplaced = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if not PRAGMA.search(line):
            continue
        pragmas.append(number)
        ending = [node for node in simple if node.end_lineno == number]
        if not SKIP.search(line) or not ending or not all(_is_table(node) for node in ending):
            misplaced.append(number)
    return pragmas, misplaced


def test_no_benchmark_module_is_longer_than_300_lines():
    # The runner and the suites grew into files doing several jobs each; 300 lines keeps one job per module.
    long = {
        str(path.relative_to(ROOT)): n
        for path in sorted((ROOT / "trainers" / "benchmark").rglob("*.py"))
        if (n := len(path.read_text().splitlines())) > 300
    }
    assert not long, f"split these by job: {long}"


def test_fmt_skip_is_rare_and_only_on_tables_of_data():
    counts, misplaced = {}, []
    for path in _code_outside_tests():
        pragmas, wrong = pragma_problems(path.read_text())
        name = str(path.relative_to(ROOT))
        counts.update({name: len(pragmas)} if pragmas else {})
        misplaced += [f"{name}:{number}" for number in wrong]
    assert not misplaced, f"formatter pragmas not on a table of data: {misplaced}"
    assert sum(counts.values()) <= MOST_PRAGMAS, f"{sum(counts.values())} formatter pragmas: {counts}"


TABLE = "ROWS = (\n    (1, -2.5, None),  (3, 4.0, 'x'),\n)  # fmt: skip\n"


@pytest.mark.parametrize(
    "source, misplaced",
    [
        (TABLE, []),
        ("NAMES = {'a': math.inf, 'b': ('x', 'y')}  #fmt:skip\n", []),
        ("ROWS = dict(a=1, b=2)  # fmt: skip\n", [1]),
        ("def table(**rows):\n    return rows\n\n\nROWS = table(a=1, b=2)  # fmt: skip\n", [5]),
        ("ROWS = [table(a=1)]  # fmt: skip\n", [1]),
        ("ROWS = [row for row in range(3)]  # fmt: skip\n", [1]),
        ("ROWS = (1 + 2, 3)  # fmt: skip\n", [1]),
        ("ROWS = {**OTHER, 'a': 1}  # fmt: skip\n", [1]),
        ("call(a=1, b=2)  # fmt: skip\n", [1]),
        ("ROWS = [1]; call(a=1)  # fmt: skip\n", [1]),
        ("ROWS = (\n    1,  # fmt: skip\n    2,\n)\n", [2]),
        ("# fmt: off\nROWS = (1, 2)\n# fmt: on\n", [1, 3]),
        ("# yapf: disable\nROWS = (1, 2)\n", [1]),
        ("if True:  # fmt: skip\n    ROWS = (1, 2)\n", [1]),
    ],
)
def test_the_pragma_rule_sees_through_calls_helpers_and_regions(source, misplaced):
    """The rule reads the syntax only: a call is never a table, whatever its name or definition, and every
    pragma is counted, the region ones included."""
    pragmas, wrong = pragma_problems(source)
    assert wrong == misplaced and len(pragmas) == source.count("fmt") + source.count("yapf")
