"""Publish a training run to the Hugging Face Hub: a complete model repo in one commit.

    python -m hub_cards.publish RUN_DIR --repo-id ORG/NAME [--private] [--dry-run] [--out DIR]
        [--code-url URL]

RUN_DIR is a finished training run (runs/<env>/<algo>/seed_<k>: run.json, metrics.jsonl, policy/).
The folder DIR (default RUN_DIR/hub) receives config.json, model.safetensors, results.json, run.json,
metrics.jsonl, README.md (the model card), learning_curve.png, policy.onnx when the exporter is installed
(or the run already exported one) with onnx_policy.py (a copy of export/runtime.py: the card's robot
snippet needs only these two files, numpy and onnxruntime), and replay.mp4 when a video encoder and
MuJoCo rendering are available. The card links gsbpolicy's code and installs from it: the Repository URL
of pyproject.toml unless `--code-url` names another.
Every input is validated before anything is written: the four files must come from one run (the same
env, algorithm, seed and commit, one unbroken metrics sequence), the weights must load and be finite,
and no file may be a link to somewhere outside its folder. Then the repo is created if needed and the
folder is pushed in ONE commit (huggingface_hub's token from the usual places: HF_TOKEN or
`hf auth login`); files this tool publishes that the new folder no longer has (an old replay.mp4, say)
are deleted in the same commit. `--dry-run` stops after writing the folder.

DIR is replaced as a whole only if this tool created it (it leaves a `.gsbpolicy-publish` marker) and
it holds nothing else; any other non-empty DIR is refused unless `--overwrite`, which replaces only the
files this tool writes and keeps everything else. Every error is one line: bad input exits 2 before
anything is written; a failed push leaves the folder intact, says why and exits 1.
"""

import argparse
import functools
import os
import shutil
import sys
import tempfile
import urllib.parse
from pathlib import Path

import export
from export import ONNX_MODULES
from gsbpolicy._cli import (
    FAILURE,
    CommandError,
    MissingExtraError,
    OneLineParser,
    check_writable_folder,
    one_line,
    refuse_owned,
    require_extra,
    run_command,
)
from gsbpolicy.hub import HubRequestError, check_policy_name, hub_requests, hub_timeout

from .card import default_code_url
from .curves import CURVE_NAME, NoEvaluations
from .folder import (
    CONFIG,
    METRICS,
    ONNX_RUNTIME,
    RESULTS,
    RUN,
    WEIGHTS,
    CardSource,
    FolderError,
    run_policy_dir,
)
from .render import ONNX, README, VIDEO, render_folder
from .replay import ReplayUnavailable, record_replay

PUBLISHED = (CONFIG, WEIGHTS, ONNX, ONNX_RUNTIME, RESULTS, RUN, METRICS, README, CURVE_NAME, VIDEO)
"""Every file the publisher writes; the only ones it replaces locally or deletes from the repo."""
MARKER = ".gsbpolicy-publish"
"""Left in every folder this tool creates: such a folder (holding nothing else) may be replaced whole."""
HUB_MODULES = ("jinja2", "matplotlib")
"""What the card needs from the `hub` extra (the template engine and the learning-curve plot)."""
RUNTIME_SOURCE = Path(export.__file__).with_name("runtime.py")
"""Published as `ONNX_RUNTIME`, byte for byte: it imports only numpy and onnxruntime."""


def _check_out_is_its_own(out: Path, run_dir: Path, policy_dir: Path) -> None:
    """--out must be a folder of its own: not a link (the files would land where it points), not the run folder
    nor its policy/ (replacing the publisher's file names there would overwrite or delete the run's own
    config.json, results.json or policy.onnx), nor a folder inside policy/."""
    if out.is_symlink():
        raise FolderError(f"--out {out} is a symbolic link (to {os.readlink(out)}); give the folder itself")
    resolved = out.resolve()
    if resolved == run_dir.resolve() or resolved.is_relative_to(policy_dir.resolve()):
        raise FolderError(
            f"--out {out} is the run's own {'folder' if resolved == run_dir.resolve() else 'policy/ folder'}: "
            f"publishing there would replace the run's files; choose another folder (the default is {run_dir / 'hub'})"
        )


def _out_is_replaceable(out: Path, overwrite: bool) -> bool:
    """Whether `out` may be replaced as a whole (absent, empty, or this tool's own untouched folder);
    False: only the publisher's files in it are replaced (`--overwrite`). Refuses anything else."""
    if out.exists() and not out.is_dir():
        raise FolderError(f"--out {out} exists and is not a folder")
    names = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
    foreign = [name for name in names if name not in PUBLISHED and name != MARKER]
    if not names or (MARKER in names and not foreign):
        return True
    if overwrite:
        return False
    shown = ", ".join((foreign or names)[:5]) + (", ..." if len(foreign or names) > 5 else "")
    reason = "holds files the publisher did not write" if foreign else "was not created by the publisher"
    raise FolderError(
        f"refusing to write into {out}: it {reason} ({shown}); choose an empty --out, or pass --overwrite "
        "to replace only the publisher's files in it"
    )


def _check_inside(folder: Path, names: tuple[str, ...]) -> None:
    """Each existing `folder/name` must be a file inside `folder`: a link to somewhere else (a key, a
    private file) is never copied into a folder that gets pushed."""
    root = folder.resolve()
    for name in names:
        path = folder / name
        if path.is_symlink() and not path.resolve().is_relative_to(root):
            raise FolderError(
                f"{path} is a link to {path.resolve()}, outside {folder}: refusing to publish it"
            )


def _swap_in(staging: Path, out: Path, whole: bool) -> None:
    """Move the built folder into place: as a whole, or (whole=False) file by file, keeping other files."""
    if not whole:
        for name in PUBLISHED:
            if (staging / name).is_file():
                os.replace(staging / name, out / name)
            elif (out / name).is_file():  # stale: it would be pushed with the new files
                (out / name).unlink()
        return
    if out.exists():
        old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.old-"))
        out.rename(old / out.name)
        staging.rename(out)
        shutil.rmtree(old)
    else:
        staging.rename(out)


def _add_onnx(policy_dir: Path, staging: Path, log) -> None:
    """policy.onnx (copied from the run or exported here) and, with it, its standalone runtime."""
    _add_onnx_model(policy_dir, staging, log)
    if (staging / ONNX).is_file():
        shutil.copyfile(RUNTIME_SOURCE, staging / ONNX_RUNTIME)
        log(f"{ONNX_RUNTIME}: the numpy + onnxruntime runtime ({RUNTIME_SOURCE.name})")


def _add_onnx_model(policy_dir: Path, staging: Path, log) -> None:
    if (policy_dir / ONNX).is_file():  # exported and verified at the end of training
        shutil.copyfile(policy_dir / ONNX, staging / ONNX)
        log(f"{ONNX}: copied from {policy_dir}")
        return
    try:
        require_extra("onnx", ONNX_MODULES, "the exporter")
    except MissingExtraError as err:
        log(f"{ONNX}: skipped, {err}")
        return
    from export.onnx import ExportVerificationError, export_policy_folder

    try:
        export_policy_folder(staging, progress=lambda line: log(f"{ONNX}: {line}"))
        log(f"{ONNX}: exported and verified against JAX")
    except ExportVerificationError as err:
        log(f"{ONNX}: skipped, the export did not match JAX: {err}")
        if err.report is not None:
            log(err.report.table())


def _load_policy(folder: Path):
    """The policy in `folder`, loaded as users will load it: proof that the weights match config.json."""
    from gsbpolicy import GSBPolicy

    try:
        return GSBPolicy.from_pretrained(folder)
    except Exception as err:  # whatever is wrong with the files, nothing may be published
        raise FolderError(f"the policy does not load: {type(err).__name__}: {err}") from err


def _add_replay(policy, staging: Path, env_id: str, max_steps: int, log) -> int | None:
    log(f"{VIDEO}: recording one deterministic episode of at most {max_steps} steps ...")
    try:
        steps = record_replay(policy, env_id, staging / VIDEO, max_steps=max_steps)
    except ReplayUnavailable as err:
        log(f"{VIDEO}: skipped, {err}")
        return None
    log(f"{VIDEO}: {steps} steps of the deterministic policy")
    return steps


def assemble(
    run_dir: Path,
    out: Path,
    repo_id: str,
    *,
    license: str = "apache-2.0",
    onnx: bool = True,
    video: bool = True,
    video_steps: int = 500,
    overwrite: bool = False,
    code_url: str | None = None,
    log=print,
) -> Path:
    """Write the Hub folder for `run_dir` into `out` (built aside, then swapped in); returns `out`.

    `overwrite`: write into a non-empty `out` this tool did not create, replacing only its own files.
    `code_url`: the gsbpolicy code the card links and installs from (default: pyproject.toml's)."""
    policy_dir = run_policy_dir(run_dir)
    _check_inside(policy_dir, (CONFIG, WEIGHTS, RESULTS, ONNX))
    _check_inside(run_dir, (RUN, METRICS))
    _check_out_is_its_own(out, run_dir, policy_dir)
    # Another run's folder or a saved policy's: the publisher's file names there are that run's own files.
    refuse_owned(out, "--out", FolderError)
    source = CardSource.read(policy_dir / CONFIG, policy_dir / RESULTS, run_dir / RUN, run_dir / METRICS)
    whole = _out_is_replaceable(out, overwrite)
    check_writable_folder(out.parent, f"--out {out}")
    out.parent.mkdir(parents=True, exist_ok=True)
    # Built in a new sibling folder, so a failure half-way leaves a previous `out` as it was.
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.staging-"))
    try:
        for name in (CONFIG, WEIGHTS, RESULTS):
            shutil.copyfile(policy_dir / name, staging / name)
        for name in (RUN, METRICS):
            shutil.copyfile(run_dir / name, staging / name)
        policy = _load_policy(staging)
        if onnx:
            _add_onnx(policy_dir, staging, log)
        steps = _add_replay(policy, staging, source.env_id, video_steps, log) if video else None
        rendered = render_folder(staging, repo_id, license=license, video_steps=steps, code_url=code_url)
        for name, data in rendered.items():
            (staging / name).write_bytes(data)
        (staging / MARKER).write_text(
            "written by python -m hub_cards.publish; replaced whole by the next run\n"
        )
        _swap_in(staging, out, whole)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


def push(
    folder: Path,
    repo_id: str,
    *,
    private: bool = False,
    commit_message: str | None = None,
    timeout: float | None = None,
) -> str:
    """Create `repo_id` if needed and commit `folder` to it in one commit; returns the commit URL.

    `create_commit`, not `upload_folder`: with hf_xet installed, upload_folder may split a folder into
    several commits, and the repo should only ever show complete policies. Each request waits at most
    `timeout` s for an answer (default $GSBPOLICY_HUB_TIMEOUT, else 10 s); a Hub that does not answer, answers
    with an error or answers something else is a `HubRequestError` naming it and its answer."""
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi

    api = HfApi()
    with hub_requests(hub_timeout(timeout), f"push to {repo_id}"):
        api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        local = sorted(p.name for p in folder.iterdir() if p.is_file() and p.name in PUBLISHED)
        stale = [name for name in api.list_repo_files(repo_id) if name in PUBLISHED and name not in local]
        operations = [
            CommitOperationAdd(path_in_repo=name, path_or_fileobj=str(folder / name)) for name in local
        ]
        operations += [CommitOperationDelete(path_in_repo=name) for name in stale]
        info = api.create_commit(
            repo_id, operations, commit_message=commit_message or f"Upload {folder.name}"
        )
    return info.commit_url


def _repo_id_error(repo_id: str) -> str | None:
    """Why `repo_id` is not a Hub model id ORG/NAME (huggingface_hub's own rules), or None."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        check_policy_name(repo_id, "--repo-id must be ORG/NAME")
    except ValueError as err:
        return str(err)
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        return f"--repo-id must be ORG/NAME, got {repo_id!r}"
    try:
        validate_repo_id(repo_id)
    except HFValidationError as err:
        return f"--repo-id {repo_id!r} is not a valid Hub repo id: {one_line(err)}"
    return None


def _code_url_error(url: str) -> str | None:
    """Why `url` cannot be the card's code link and `pip install "gsbpolicy @ git+URL"` source, or None."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.netloc or any(c.isspace() for c in url):
        return f"--code-url must be an http(s) URL of gsbpolicy's git repository, got {url!r}"
    return None


def _publish_command(args: argparse.Namespace) -> None:
    require_extra("hub", HUB_MODULES, "python -m hub_cards.publish")
    out = args.out or args.run_dir / "hub"
    code_url = args.code_url or default_code_url()  # before the slow steps: it may be missing
    assemble(
        args.run_dir,
        out,
        args.repo_id,
        license=args.license,
        onnx=not args.no_onnx,
        video=not args.no_video,
        video_steps=args.video_steps,
        overwrite=args.overwrite,
        code_url=code_url,
        log=functools.partial(print, flush=True),
    )
    print(f"wrote {out}: {', '.join(sorted(p.name for p in out.iterdir() if p.name in PUBLISHED))}")
    if args.dry_run:
        print("dry run: nothing pushed")
        return
    results = CardSource.from_folder(out).results
    message = (
        f"Upload {args.repo_id.split('/')[1]}: mean_reward {results['mean']:.2f} +/- {results['std']:.2f}"
    )
    files = [p for p in out.iterdir() if p.name in PUBLISHED]
    megabytes = sum(p.stat().st_size for p in files) / 1e6
    print(f"uploading {len(files)} files ({megabytes:.1f} MB) to {args.repo_id} in one commit ...")
    try:
        url = push(out, args.repo_id, private=args.private, commit_message=message)
    except HubRequestError as err:  # the Hub did not answer, or answered an error or something else
        raise CommandError(
            f"{err}; the folder {out} is intact: retry the push when the cause is fixed", FAILURE
        ) from None
    except Exception as err:  # auth, permissions, a repo of another type: all leave `out` as written
        raise CommandError(
            f"push to {args.repo_id} failed: {type(err).__name__}: {one_line(err)}; the folder {out} is "
            "intact: retry the push when the cause is fixed",
            FAILURE,
        ) from err
    print(f"pushed {args.repo_id} in one commit: {url}")


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(
        prog="python -m hub_cards.publish",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a finished training run folder")
    parser.add_argument("--repo-id", required=True, help="the Hub repo, ORG/NAME")
    parser.add_argument(
        "--private", action="store_true", help="create the repo private (if it does not exist)"
    )
    parser.add_argument("--dry-run", action="store_true", help="write the folder, push nothing")
    parser.add_argument("--out", type=Path, help="the folder to write (default RUN_DIR/hub)")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="write into a non-empty --out this tool did not create: replace only its own files there",
    )
    parser.add_argument(
        "--license", default="apache-2.0", help="Hub license id for the card (default apache-2.0)"
    )
    parser.add_argument("--no-onnx", action="store_true", help="do not export policy.onnx")
    parser.add_argument("--no-video", action="store_true", help="do not record replay.mp4")
    parser.add_argument("--video-steps", type=int, default=500, help="replay.mp4 length limit in env steps")
    parser.add_argument(
        "--code-url",
        help="gsbpolicy's git repository, linked and installed from by the card "
        "(default: the Repository URL in pyproject.toml)",
    )
    args = parser.parse_args(argv)
    if not args.run_dir.strip():
        parser.error("RUN_DIR must name a finished training run folder, got an empty string")
    args.run_dir = Path(args.run_dir)
    if args.out is not None and str(args.out).strip() in ("", "."):
        parser.error(f"--out must name a folder for the Hub files, got {str(args.out)!r}")
    problem = _repo_id_error(args.repo_id)
    if problem:
        parser.error(problem)
    if args.video_steps < 1:
        parser.error(f"--video-steps must be >= 1, got {args.video_steps}")
    if args.code_url is not None and (problem := _code_url_error(args.code_url)):
        parser.error(problem)
    return run_command(
        lambda: _publish_command(args),
        usage_errors=(FolderError, NoEvaluations),
        kept="nothing was pushed, and an earlier --out folder is as it was",
    )


if __name__ == "__main__":
    sys.exit(main())
