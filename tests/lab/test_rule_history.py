"""Rules before data: each claim rule's recorded commit (`claims.RULES_SET_AT`) is the commit at which its code
took its present form, by the git history of main (its first parents: a merged branch's own commits were never
states of main). Needs the repository's history (CI fetches it in full); a shallow
clone or a source tarball skips."""

import functools
import subprocess
from pathlib import Path

import pytest

from trainers.benchmark.fingerprint import RULE_MODULES
from trainers.lab import claims

ROOT = Path(__file__).resolve().parents[2]
FILES = list(RULE_MODULES.values())


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


@functools.cache
def _sources_at(commit: str) -> dict[str, str]:
    found = {}
    for module, path in zip(RULE_MODULES, FILES, strict=True):
        shown = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=ROOT, capture_output=True, text=True)
        found[module] = shown.stdout if shown.returncode == 0 else ""
    return found


def _now() -> dict[str, str]:
    return {m: (ROOT / path).read_text() for m, path in zip(RULE_MODULES, FILES, strict=True)}


def _history_or_skip() -> None:
    try:
        shallow = _git("rev-parse", "--is-shallow-repository").strip() == "true"
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    if shallow:
        pytest.skip("a shallow clone: the rules' history is not here")


def _where_set(rule: str) -> str:
    """The commit since which `rule`'s code is what it is now: the oldest of the unbroken run of commits
    touching the rule files whose fingerprint equals today's."""
    now, found = claims.claim_fingerprint(rule, _now()), None
    for commit in _git("rev-list", "--first-parent", "HEAD", "--", *FILES).split():
        if claims.claim_fingerprint(rule, _sources_at(commit)) != now:
            break
        found = commit
    return found or "not committed yet"


def test_every_rule_has_a_recorded_commit():
    assert {c.rule.__name__ for c in claims.CLAIMS} == set(claims.RULES_SET_AT)


@pytest.mark.parametrize("rule", sorted(claims.RULES_SET_AT))
def test_each_rule_was_set_at_its_recorded_commit_and_has_not_changed_since(rule):
    _history_or_skip()
    commit, date = claims.RULES_SET_AT[rule]
    hint = f"{rule} took its present form at {_where_set(rule)}: record that commit in claims.RULES_SET_AT"
    now = claims.claim_fingerprint(rule, _now())
    known = subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=ROOT, capture_output=True)
    assert known.returncode == 0, f"{commit} is not in this history (rebased?): {hint}"
    assert claims.claim_fingerprint(rule, _sources_at(commit)) == now, hint
    assert claims.claim_fingerprint(rule, _sources_at(f"{commit}^")) != now, hint
    for later in _git("rev-list", "--first-parent", f"{commit}..HEAD", "--", *FILES).split():
        assert claims.claim_fingerprint(rule, _sources_at(later)) == now, f"{rule} changed at {later}: {hint}"
    assert _git("show", "-s", "--format=%aI", commit).strip() == date
