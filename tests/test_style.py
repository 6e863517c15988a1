"""House rules a reviewer would otherwise check by eye: no function over 60 lines, and `# fmt: skip` (which keeps
the formatter's hands off a statement) only on tables of data, such as a preset's column of the paper's tables or
a test's argument list, never on logic."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("gsbpolicy", "trainers", "export", "hub_cards")
LONGEST = 60

DATA_NODES = (ast.Constant, ast.Name, ast.Attribute, ast.Call, ast.keyword, ast.List, ast.Tuple, ast.Dict,
              ast.Set, ast.Starred, ast.UnaryOp, ast.USub, ast.UAdd, ast.Load, ast.Store, ast.Assign, ast.AnnAssign,
              ast.Expr, ast.Return, ast.BinOp, ast.Mult, ast.Div, ast.FloorDiv, ast.Add, ast.Sub, ast.Pow,
              ast.Subscript, ast.Slice)  # fmt: skip
"""What a table of data is made of: literals, names, calls and containers; no comprehension, lambda, f-string,
condition or definition."""


def _sources():
    for package in PACKAGES:
        yield from sorted((ROOT / package).rglob("*.py"))


def test_no_function_is_longer_than_60_lines():
    long = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > LONGEST:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length} lines)")
    assert not long, long


def _statement_ending_on(tree: ast.AST, line: int) -> ast.stmt | None:
    """The innermost statement that ends on `line`."""
    found = None
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.stmt)
            and node.end_lineno == line
            and (found is None or node.lineno >= found.lineno)
        ):
            found = node
    return found


def test_fmt_skip_is_only_on_tables_of_data():
    logic = []
    for path in _sources():
        text = path.read_text()
        tree = ast.parse(text)
        for number, line in enumerate(text.splitlines(), 1):
            if "# fmt: skip" not in line:
                continue
            statement = _statement_ending_on(tree, number)
            if statement is None or not all(isinstance(n, DATA_NODES) for n in ast.walk(statement)):
                logic.append(f"{path.relative_to(ROOT)}:{number}")
    assert not logic, logic
