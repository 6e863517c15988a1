"""The Hugging Face Hub side of a policy: which names can be a folder or a repo id, downloading a policy's
files through huggingface_hub's cache and uploading a policy folder, each failure as one line.
`GSBPolicy.from_pretrained` and `GSBPolicy.push_to_hub` (gsbpolicy/gsb_policy.py) are built on it;
huggingface_hub itself is imported by the functions that need it."""

import logging
import os
import shutil
import tempfile
import urllib.parse
from collections.abc import Callable
from pathlib import Path

from ._hub_requests import HubRequestError, hub_requests, hub_timeout, network_problem
from ._io import CONFIG_NAME, WEIGHTS_NAME


def _looks_like_local_path(name: str) -> bool:
    return name.startswith((".", "/", "~")) or name.count("/") > 1 or os.sep in name.replace("/", "")


def check_policy_name(name: str, what: str = "expected a policy folder or a Hub repo id ORG/NAME") -> None:
    """Refuse, before anything is looked up, the names that can be neither a folder nor a repo id: an empty
    string (which would name the current folder) and a URL (say which repo id it means)."""
    if not name.strip():
        raise ValueError(f"{what}, got an empty string")
    if "://" in name or name.startswith(("http:", "https:", "hf.co/", "huggingface.co/")):
        path = urllib.parse.urlsplit(name if "://" in name else f"https://{name}").path.strip("/").split("/")
        hint = f" ({'/'.join(path[:2])!r})" if len(path) >= 2 and all(path[:2]) else ""
        raise ValueError(f"{what}, got the URL {name!r}: pass the repo id{hint} or a local folder")


def _check_repo_id(repo_id: str) -> None:
    """huggingface_hub's own rules, checked before any request (its message is already one line)."""
    from huggingface_hub.utils import validate_repo_id

    validate_repo_id(repo_id)


def _staged_extra_files(extra_files: dict, staging: Path) -> list[tuple[Path, Path]]:
    """(source, destination) pairs for `extra_files`, every one checked before anything is uploaded.

    A name may not leave the staging folder nor replace the policy's own files, and a source that is a
    symlink must stay inside its own folder: a link in a policy folder must not publish what it points to.
    """
    pairs = []
    for name, source in extra_files.items():
        parts = Path(name).parts
        if not parts or Path(name).is_absolute() or ".." in parts or name.startswith("~"):
            raise ValueError(f"extra_files name {name!r} must be a relative path inside the repo")
        if parts[0] in (CONFIG_NAME, WEIGHTS_NAME):
            raise ValueError(f"extra_files name {name!r} would replace the policy's own {parts[0]}")
        source = Path(source)
        if not source.is_file():
            raise FileNotFoundError(f"extra_files[{name!r}]: no such file {source}")
        folder = source.parent.resolve()
        if not source.resolve().is_relative_to(folder):
            raise ValueError(
                f"extra_files[{name!r}]: {source} is a symlink to {source.resolve()}, outside {folder}; "
                "copy the file in instead"
            )
        pairs.append((source, staging / name))
    return pairs


def local_policy_folder(name: str) -> Path | None:
    """The policy folder `name` names, or None when it is a Hub repo id (checked by huggingface_hub's rules).
    ValueError or FileNotFoundError for a name that is neither: a URL, a file, a missing local path."""
    check_policy_name(name)
    if Path(name).expanduser().is_dir():
        return Path(name).expanduser()
    if Path(name).expanduser().is_file():
        raise ValueError(
            f"{name} is a file; expected a policy folder (config.json + model.safetensors) or a "
            "Hub repo id ORG/NAME"
        )
    if Path(name).exists() or _looks_like_local_path(name):
        raise FileNotFoundError(f"policy folder not found: {name}")
    _check_repo_id(name)
    return None


def download_policy_files(repo_id: str, options: dict, timeout: float | None) -> list[str]:
    """The local paths of the config and weights of the policy repo `repo_id`, through huggingface_hub's cache.

    `options`: `hf_hub_download`'s revision, cache_dir, force_download, local_files_only and token; `timeout`
    as `hub_timeout` reads it. A Hub that fails is a `HubRequestError` naming the repo and its answer."""
    timeout = hub_timeout(timeout)
    revision = options["revision"]
    at = f"Hub policy {repo_id!r}" + (f" at revision {revision!r}" if revision else "")
    options = {**options, "etag_timeout": timeout}
    with hub_requests(timeout, at):
        return [_fetch(repo_id, filename, at, options) for filename in (CONFIG_NAME, WEIGHTS_NAME)]


def upload_policy(
    save: Callable[[str], Path],
    repo_id: str,
    extra_files: dict,
    *,
    private: bool | None,
    token: str | None,
    timeout: float | None,
    **options,
):
    """Create the model repo `repo_id` if needed and upload, in one commit, the folder `save` writes into a
    staging folder, with `extra_files` ({name in repo: local path}). `options`: `upload_folder`'s
    commit_message, revision and create_pr. Returns huggingface_hub's `CommitInfo`."""
    from huggingface_hub import HfApi

    check_policy_name(repo_id, "expected a Hub repo id ORG/NAME")
    _check_repo_id(repo_id)
    timeout = hub_timeout(timeout)
    with tempfile.TemporaryDirectory() as tmp:
        copies = _staged_extra_files(extra_files, Path(tmp))
        save(tmp)
        for source, destination in copies:
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, destination)
        api = HfApi(token=token)
        with hub_requests(timeout, f"push to {repo_id!r}"):
            api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
            return api.upload_folder(repo_id=repo_id, folder_path=tmp, **options)


def _fetch(repo_id: str, filename: str, at: str, options: dict) -> str:
    """`hf_hub_download` of one file of a policy repo, its failures as one line each. huggingface_hub's messages
    run over several lines and do not always name the repo or what went wrong; these keep its exception types
    where the cause is the repo (missing, private, not cached) and are `HubRequestError` where it is the Hub."""
    from huggingface_hub import constants, hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    try:
        return hf_hub_download(repo_id, filename, **options)
    except (HubRequestError, LocalEntryNotFoundError) as err:
        problem = network_problem(err)
        if problem is None:
            pass
        elif options["force_download"] or options["local_files_only"]:
            raise HubRequestError(f"{at}: {filename}: {problem}") from None
        else:  # the Hub failed: a cached copy stands in, as huggingface_hub's own fallback would have it
            try:
                path = hf_hub_download(repo_id, filename, **{**options, "local_files_only": True})
            except LocalEntryNotFoundError:
                raise HubRequestError(f"{at}: {filename} is not in the local cache, and {problem}") from None
            logging.getLogger("gsbpolicy").warning("%s: %s; using the cached %s", at, problem, filename)
            return path
        offline = options["local_files_only"] or constants.HF_HUB_OFFLINE
        why = "offline mode is on" if offline else "no connection"
        raise LocalEntryNotFoundError(
            f"{at}: {filename} is not in the local cache and {why}; download it once online"
        ) from None
    except HfHubHTTPError as err:
        if err.response is None or err.response.status_code not in (401, 404):
            raise
        raise type(err)(
            f"{at}: {filename} not found (a missing, private or gated repo, revision or file; for a private "
            "repo pass token= or run `hf auth login`)",
            response=err.response,
        ) from None
