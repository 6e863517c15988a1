"""Which code a verdict rests on: a rule's fingerprint is a digest of its function and of everything it reads,
followed through the modules of `RULE_MODULES` as syntax trees (docstrings included, comments and layout not).

The pre-registered claims (`preregistration`, judged by `confirmatory`) record the fingerprint of their rule
when registered; the lab's claims (`trainers.lab.claims`) fingerprint theirs with the code that selects their
data. A module is named by the last segment of its dotted name, which is how imports between them are followed.
"""

import ast
import hashlib

RULE_MODULES = {
    "claims": "trainers/lab/claims.py",
    "stats": "trainers/benchmark/stats.py",
    "exact": "trainers/benchmark/exact.py",
    "suites": "trainers/benchmark/suites.py",
    "summary": "trainers/benchmark/summary.py",
    "cell_summary": "trainers/benchmark/cell_summary.py",
    "suite_types": "trainers/benchmark/suite_types.py",
    "table_suites": "trainers/benchmark/table_suites.py",
    "ablation_suites": "trainers/benchmark/ablation_suites.py",
    "finetune_suite": "trainers/benchmark/finetune_suite.py",
    "compute_suites": "trainers/benchmark/compute_suites.py",
    "defaults_suites": "trainers/benchmark/defaults_suites.py",
    "claims_report": "trainers/lab/claims_report.py",
    "aggregate": "trainers/benchmark/aggregate.py",
    "confirmatory": "trainers/benchmark/confirmatory.py",
    "tilt_settings": "trainers/lab/toy/tilt_settings.py",
    "tilt_summary": "trainers/lab/toy/tilt_summary.py",
}
"""Module name -> its path in the repository: every module whose code a verdict can depend on, the rules' own
and the code that selects their data."""


def _definitions(tree: ast.Module) -> dict[str, ast.AST]:
    """A module's top-level functions, classes and assigned names."""
    found: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            found[node.name] = node
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name):
                    found[target.id] = node
    return found


def _imports(tree: ast.Module, modules: set[str]) -> tuple[dict[str, str], dict[str, tuple[str, str]]]:
    """The names a module binds by importing from `modules` (anywhere in it, functions included): module aliases
    (`from . import claims as c`: c -> claims) and imported names (`from .suites import SUITES`)."""
    aliases, names = {}, {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        source = (node.module or "").split(".")[-1]
        for alias in node.names:
            if not node.module and alias.name in modules:
                aliases[alias.asname or alias.name] = alias.name
            elif source in modules:
                names[alias.asname or alias.name] = (source, alias.name)
    return aliases, names


def rule_fingerprint(
    rule: str, sources: dict[str, str], module: str = "claims", roots: tuple[tuple[str, str], ...] = ()
) -> str | None:
    """A digest of rule `rule`'s code (a function of `module`) and of `roots` (module, name): each function and
    every function, class and constant it reads, transitively, in `sources` (module name -> its source text),
    following imports between them, compared as syntax trees (docstrings included, comments and layout not).
    None when the rule is not defined there."""
    trees = {m: ast.parse(text) for m, text in sources.items()}
    defs = {m: _definitions(tree) for m, tree in trees.items()}
    bound = {m: _imports(tree, set(trees)) for m, tree in trees.items()}
    if rule not in defs.get(module, {}):
        return None
    seen, todo = set(), [(module, rule), *roots]
    while todo:
        module, name = todo.pop()
        if (module, name) in seen or name not in defs.get(module, {}):
            continue
        seen.add((module, name))
        aliases, names = bound[module]
        for node in ast.walk(defs[module][name]):
            if isinstance(node, ast.Name):
                todo.append(names.get(node.id, (module, node.id)))
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                base = aliases.get(node.value.id, node.value.id)
                if base in defs:
                    todo.append((base, node.attr))
    text = "\n".join(f"{m}.{n}: {ast.dump(defs[m][n])}" for m, n in sorted(seen))
    return hashlib.sha256(text.encode()).hexdigest()
