"""Publish a training run to the Hugging Face Hub: a complete model repo in one commit.

    python -m hub_cards.publish RUN_DIR --repo-id ORG/NAME [--private] [--dry-run] [--out DIR]

RUN_DIR is a finished training run (runs/<env>/<algo>/seed_<k>: run.json, metrics.jsonl, policy/).
The folder DIR (default RUN_DIR/hub) receives config.json, model.safetensors, results.json, run.json,
metrics.jsonl, README.md (the model card), learning_curve.png, policy.onnx when the exporter is installed
(or the run already exported one) and replay.mp4 when a video encoder and MuJoCo rendering are available.
Every input is validated before anything is written. Then the repo is created if needed and the folder
is pushed in ONE commit (huggingface_hub's token from the usual places: HF_TOKEN or `hf auth login`);
files this tool publishes that the new folder no longer has (an old replay.mp4, say) are deleted in the
same commit. `--dry-run` stops after writing the folder. A failed push leaves the folder intact, says why
and exits 1; bad input exits 2.
"""

import argparse
import importlib.util
import shutil
import sys
from pathlib import Path

from .curves import CURVE_NAME
from .folder import CONFIG, METRICS, RESULTS, RUN, WEIGHTS, CardSource, FolderError, run_policy_dir
from .render import ONNX, README, VIDEO, render_folder
from .replay import ReplayUnavailable, record_replay

PUBLISHED = (CONFIG, WEIGHTS, ONNX, RESULTS, RUN, METRICS, README, CURVE_NAME, VIDEO)
"""Every file the publisher writes; the only ones it replaces locally or deletes from the repo."""


def _check_out_dir(out: Path) -> None:
    """`out` must be absent, empty, or a folder this tool wrote (it is replaced as a whole)."""
    if out.exists() and not out.is_dir():
        raise FolderError(f"--out {out} exists and is not a folder")
    foreign = sorted(p.name for p in out.iterdir() if p.name not in PUBLISHED) if out.is_dir() else []
    if foreign:
        raise FolderError(f"refusing to replace {out}: it holds files the publisher did not write: {foreign}")


def _exporter_installed() -> bool:
    return all(importlib.util.find_spec(name) for name in ("jax2onnx", "onnx", "onnxruntime"))


def _add_onnx(policy_dir: Path, staging: Path, log) -> None:
    if (policy_dir / ONNX).is_file():  # exported and verified at the end of training
        shutil.copyfile(policy_dir / ONNX, staging / ONNX)
        log(f"{ONNX}: copied from {policy_dir}")
        return
    if not _exporter_installed():
        log(f'{ONNX}: skipped, the exporter is not installed (pip install "gsbpolicy[onnx]")')
        return
    from export.onnx import ExportVerificationError, export_policy_folder

    try:
        export_policy_folder(staging)
        log(f"{ONNX}: exported and verified against JAX")
    except ExportVerificationError as err:
        log(f"{ONNX}: skipped, the export did not match JAX:\n{err}")


def _load_policy(folder: Path):
    """The policy in `folder`, loaded as users will load it: proof that the weights match config.json."""
    from gsbpolicy import GSBPolicy

    try:
        return GSBPolicy.from_pretrained(folder)
    except Exception as err:  # whatever is wrong with the files, nothing may be published
        raise FolderError(f"the policy does not load: {type(err).__name__}: {err}") from err


def _add_replay(policy, staging: Path, env_id: str, max_steps: int, log) -> int | None:
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
    log=print,
) -> Path:
    """Write the Hub folder for `run_dir` into `out` (built aside, then swapped in); returns `out`."""
    policy_dir = run_policy_dir(run_dir)
    source = CardSource.read(policy_dir / CONFIG, policy_dir / RESULTS, run_dir / RUN, run_dir / METRICS)
    _check_out_dir(out)
    # Built in a sibling folder, so a failure half-way leaves a previous `out` as it was.
    staging = out.with_name(f".{out.name}.staging")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        for name in (CONFIG, WEIGHTS, RESULTS):
            shutil.copyfile(policy_dir / name, staging / name)
        for name in (RUN, METRICS):
            shutil.copyfile(run_dir / name, staging / name)
        policy = _load_policy(staging)
        if onnx:
            _add_onnx(policy_dir, staging, log)
        steps = _add_replay(policy, staging, source.env_id, video_steps, log) if video else None
        for name, data in render_folder(staging, repo_id, license=license, video_steps=steps).items():
            (staging / name).write_bytes(data)
        shutil.rmtree(out, ignore_errors=True)
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


def push(folder: Path, repo_id: str, *, private: bool = False, commit_message: str | None = None) -> str:
    """Create `repo_id` if needed and commit `folder` to it in one commit; returns the commit URL.

    `create_commit`, not `upload_folder`: with hf_xet installed, upload_folder may split a folder into
    several commits, and the repo should only ever show complete policies."""
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi

    api = HfApi()
    api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
    local = sorted(p.name for p in folder.iterdir() if p.is_file() and p.name in PUBLISHED)
    stale = [name for name in api.list_repo_files(repo_id) if name in PUBLISHED and name not in local]
    operations = [CommitOperationAdd(path_in_repo=name, path_or_fileobj=str(folder / name)) for name in local]
    operations += [CommitOperationDelete(path_in_repo=name) for name in stale]
    info = api.create_commit(repo_id, operations, commit_message=commit_message or f"Upload {folder.name}")
    return info.commit_url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hub_cards.publish",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a finished training run folder")
    parser.add_argument("--repo-id", required=True, help="the Hub repo, ORG/NAME")
    parser.add_argument(
        "--private", action="store_true", help="create the repo private (if it does not exist)"
    )
    parser.add_argument("--dry-run", action="store_true", help="write the folder, push nothing")
    parser.add_argument("--out", type=Path, help="the folder to write (default RUN_DIR/hub)")
    parser.add_argument(
        "--license", default="apache-2.0", help="Hub license id for the card (default apache-2.0)"
    )
    parser.add_argument("--no-onnx", action="store_true", help="do not export policy.onnx")
    parser.add_argument("--no-video", action="store_true", help="do not record replay.mp4")
    parser.add_argument("--video-steps", type=int, default=500, help="replay.mp4 length limit in env steps")
    args = parser.parse_args(argv)
    if args.repo_id.count("/") != 1 or not all(args.repo_id.split("/")):
        parser.error(f"--repo-id must be ORG/NAME, got {args.repo_id!r}")
    if args.video_steps < 1:
        parser.error(f"--video-steps must be >= 1, got {args.video_steps}")
    out = args.out or args.run_dir / "hub"
    try:
        assemble(args.run_dir, out, args.repo_id, license=args.license, onnx=not args.no_onnx,
                 video=not args.no_video, video_steps=args.video_steps)  # fmt: skip
    except (FolderError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {out}: {', '.join(sorted(p.name for p in out.iterdir()))}")
    if args.dry_run:
        print("dry run: nothing pushed")
        return 0
    results = CardSource.from_folder(out).results
    message = (
        f"Upload {args.repo_id.split('/')[1]}: mean_reward {results['mean']:.2f} +/- {results['std']:.2f}"
    )
    try:
        url = push(out, args.repo_id, private=args.private, commit_message=message)
    except Exception as err:  # network, auth, permissions, server errors: all leave `out` as written
        print(f"error: push to {args.repo_id} failed: {type(err).__name__}: {err}", file=sys.stderr)
        print(f"the folder {out} is intact; retry the push when the cause is fixed", file=sys.stderr)
        return 1
    print(f"pushed {args.repo_id} in one commit: {url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
