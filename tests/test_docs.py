"""The documentation site: it builds strictly, every public object has its reference, every Python and bash block
on every page runs as written (a page's blocks in order, in a fresh folder, as a reader would run them), and a
real browser loads it.

A block can ask for what the page assumes with a comment on the line before it, `<!-- docs-test: ... -->`:
"needs the quickstart policy" (the Getting started run's folder, with an untrained stand-in policy: these blocks
load and run it, what it learned is not their point), "... exported" (its `policy.onnx` too), "needs two finished
runs" (`runs/a`, `runs/b`), "budget" (its training commands run at a tiny budget: the page's take minutes), and
"skip (why)" for a block that cannot run inside the tests (the test command itself). Blocks in `text` are command
templates with placeholders, or output.
"""

import functools
import http.server
import inspect
import json
import os
import re
import shlex
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from only_extras import prelude
from test_bad_inputs_publish import make_run_folder

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
QUICKSTART_RUN = Path("runs/InvertedPendulum-v5/gsb_mdpo/seed_0")
GENERATED = DOCS / "benchmarks"
"""Pages written by `trainers.lab.aggregate` (tables, no code blocks)."""
SKIPPED = {
    (
        "getting-started.md",
        'pip install -c tests/constraints.txt -e ".[dev]" && python -m pytest -n 2 --dist loadfile && python -m pytest -n 2 --dist loadfile tests/lab',
    )
}
"""(page, first line) of every block the tests do not run, each marked on its page with the reason."""
SMALLER = {
    "trainers.gsb_mdpo": ["--total-steps", "2048", "--log.no-progress", "--eval.episodes", "2", "--eval.final-episodes", "2"],
    "trainers.bc": ["--steps", "200", "--eval-episodes", "2"],
    "hub_cards.publish": ["--no-onnx"],
}  # fmt: skip
"""What "budget" appends to a page's commands, by module: the same commands at a size that runs in seconds."""

BLOCK = re.compile(r"(?:<!-- docs-test: (?P<marks>.*?) -->\n)?```(?P<language>\w+)\n(?P<code>.*?)```", re.S)


def pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if GENERATED not in p.parents)


def blocks(page: Path) -> list[tuple[str, str, str]]:
    """(language, code, marks) of every fenced block of `page`, in order."""
    return [(m["language"], m["code"], m["marks"] or "") for m in BLOCK.finditer(page.read_text())]


# -------------------------------------------------------------------------------------------- running a page
def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """`argv` in a fresh process in `cwd`, this checkout importable as a clone's working tree is."""
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(cwd), "MPLBACKEND": "Agg"}
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=env, timeout=900)


def prepare(marks: str, folder: Path, tiny_spec) -> None:
    if "needs the quickstart policy" in marks and not (folder / QUICKSTART_RUN).exists():
        (folder / QUICKSTART_RUN).parent.mkdir(parents=True)
        make_run_folder(folder / QUICKSTART_RUN, tiny_spec)
    if "exported" in marks and not (folder / "policy.onnx").exists():
        done = run(
            [sys.executable, "-m", "export.onnx", str(QUICKSTART_RUN / "policy"), "--out", "policy.onnx"],
            folder,
        )
        assert done.returncode == 0, done.stderr[-3000:]
    if "needs two finished runs" in marks:
        for seed, name in enumerate(
            ("a", "b")
        ):  # two seeds of one algorithm on one env: one curve with a band
            if not (folder / "runs" / name).exists():
                (folder / "runs").mkdir(exist_ok=True)
                make_run_folder(folder / "runs" / name, tiny_spec)
                run_json = folder / "runs" / name / "run.json"
                record = json.loads(run_json.read_text())
                run_json.write_text(json.dumps({**record, "args": {**record["args"], "seed": seed}}))


def commands(code: str, budget: bool) -> list[list[str]]:
    """The `python -m` lines of a bash block as argv for this interpreter (`pip install` lines are skipped: the
    test environment has every extra)."""
    argvs = []
    for line in code.splitlines():
        if not line.strip() or line.startswith("pip install"):
            continue
        assert line.startswith("python -m "), f"a bash block line that is not `python -m ...`: {line!r}"
        argv = shlex.split(line)[1:]
        if budget:
            argv += SMALLER.get(argv[1], [])
            if "--init.critic-warmup-steps" in argv:
                argv += ["--init.critic-warmup-steps", "1024"]
        argvs.append([sys.executable, *argv])
    return argvs


@pytest.mark.slow
@pytest.mark.parametrize("page", [p.relative_to(DOCS) for p in pages() if blocks(p)], ids=str)
def test_every_code_block_of_the_page_runs(page, tmp_path, tiny_spec):
    for language, code, marks in blocks(DOCS / page):
        if language not in ("python", "bash"):
            continue
        if marks.startswith("skip"):
            assert re.fullmatch(r"skip \(.+\)", marks) and (str(page), code.splitlines()[0]) in SKIPPED, marks
            continue
        prepare(marks, tmp_path, tiny_spec)
        if language == "python":
            (tmp_path / "block.py").write_text(code)
            argvs = [[sys.executable, "block.py"]]
        else:
            argvs = commands(code, budget="budget" in marks)
        for argv in argvs:
            done = run(argv, tmp_path)
            assert done.returncode == 0, (page, argv, done.stderr[-3000:])


def test_readme_snippets_are_pages_blocks_that_run():
    """The README's code is the pages': each of its blocks is a block of some page, which the test above runs."""
    in_pages = {code for page in pages() for _, code, _ in blocks(page)}
    readme = [
        m["code"]
        for m in BLOCK.finditer((ROOT / "README.md").read_text())
        if m["language"] in ("python", "bash")
    ]
    assert readme and all(code in in_pages for code in readme), [c for c in readme if c not in in_pages]


# ---------------------------------------------------------------------------------------------- the site
@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site as `mkdocs build --strict` writes it where only the `docs` extra is installed (the README names
    that extra for it): the modules no other extra provides are unimportable in the build's process."""
    out = tmp_path_factory.mktemp("site")
    build = f"import runpy\nsys.argv = ['mkdocs', 'build', '--strict', '-d', {str(out)!r}]\nrunpy.run_module('mkdocs', run_name='__main__')"
    built = subprocess.run([sys.executable, "-c", prelude(["docs"]) + build], cwd=ROOT,
                           capture_output=True, text=True, timeout=600, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})  # fmt: skip
    assert built.returncode == 0, built.stderr[-4000:]
    return out


@pytest.mark.slow
def test_the_site_builds_strictly_with_the_docs_extra_alone_and_a_page_for_every_markdown_file(site):
    for page in DOCS.rglob("*.md"):
        stem = page.relative_to(DOCS).with_suffix("")
        assert (site / (stem.parent if stem.name == "index" else stem) / "index.html").is_file(), page


def _public_objects():
    import export.onnx
    import export.runtime
    import gsbpolicy
    from trainers import dppo, fpo, fpo_pp, gaussian_ppo, genpo, gsb_mdpo, ppo, registry

    objects = {f"gsbpolicy.{name}": getattr(gsbpolicy, name) for name in gsbpolicy.__all__}
    objects |= {"export.runtime.OnnxPolicy": export.runtime.OnnxPolicy, "export.onnx.export": export.onnx.export,
                "export.onnx.export_policy_folder": export.onnx.export_policy_folder,
                "trainers.registry.Algorithm": registry.Algorithm, "trainers.registry.register": registry.register}  # fmt: skip
    objects |= {
        f"{m.__name__}.train": m.train for m in (dppo, fpo, fpo_pp, gaussian_ppo, genpo, gsb_mdpo, ppo)
    }
    return objects


def test_every_public_object_has_its_reference():
    """Every public name and method has a docstring (the API pages render them) and an API page names it."""
    api = "".join(p.read_text() for p in (DOCS / "api").glob("*.md"))
    undocumented = []
    for name, obj in _public_objects().items():
        assert f"::: {name}" in api, f"{name} has no API reference entry"
        members = (
            [obj] + [m for n, m in vars(obj).items() if not n.startswith("_") and callable(m)]
            if inspect.isclass(obj)
            else [obj]
        )
        undocumented += [
            f"{name}: {getattr(m, '__name__', m)}" for m in members if not (inspect.getdoc(m) or "").strip()
        ]
    assert not undocumented, undocumented


# ------------------------------------------------------------------------------------------ a real browser
BROWSER = Path("/usr/bin/chromium")
SCREENSHOTS = DOCS / "screenshots"
"""Committed screenshots of the site, for review; `GSBPOLICY_DOCS_SCREENSHOTS=1` rewrites them."""


def _serve(folder: Path):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(BROWSER)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1280,1000"):  # fmt: skip
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))


@pytest.mark.slow
@pytest.mark.skipif(not BROWSER.exists(), reason="Debian's chromium is not installed (.ci/run installs it)")
def test_a_browser_loads_the_landing_a_benchmark_and_an_api_page(site):
    server = _serve(site)
    driver = _browser()
    try:
        for path, shot, images in (("", "landing.png", 1), ("benchmarks/cpu-playground/", "benchmark.png", 1),
                                   ("api/gsbpolicy/", "api.png", 0)):  # fmt: skip
            driver.get(f"http://127.0.0.1:{server.server_address[1]}/{path}")
            assert driver.execute_script("return document.images.length") >= images, path
            errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
            assert not errors, (path, errors)
            broken = driver.execute_script(
                "return Array.from(document.images).filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src)"
            )
            assert not broken, (path, broken)
            assert driver.find_element("css selector", "h1").text.strip(), path
            if os.environ.get("GSBPOLICY_DOCS_SCREENSHOTS"):
                SCREENSHOTS.mkdir(exist_ok=True)
                driver.save_screenshot(str(SCREENSHOTS / shot))
    finally:
        driver.quit()
        server.shutdown()
