"""The fake Hub driven through the real huggingface_hub client: everything the Hub tests rely on."""

import json
import re
import struct
from pathlib import Path

import huggingface_hub
import pytest
from fake_hub import FakeHub, point_client_at
from huggingface_hub import HfApi, ModelCard, _upload_pipeline, constants, hf_hub_download, snapshot_download
from huggingface_hub.errors import (
    EntryNotFoundError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils._runtime import is_xet_available

REPO = "org/policy"
README = "---\nlicense: apache-2.0\nlibrary_name: gsbpolicy\ntags:\n- reinforcement-learning\n---\n# Policy\n"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))  # NUL and non-UTF-8 bytes on purpose


def safetensors_bytes(values: list[float]) -> bytes:
    data = struct.pack(f"<{len(values)}f", *values)
    header = json.dumps({"w": {"dtype": "F32", "shape": [len(values)], "data_offsets": [0, len(data)]}})
    return struct.pack("<Q", len(header)) + header.encode() + data


def read_tree(folder) -> dict[str, bytes]:
    folder = Path(folder)
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture(autouse=True)
def plain_http_client(monkeypatch, tmp_path):
    """Keep the client on plain HTTP: with hf_xet installed, upload_folder would start a Xet session."""
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    # A Xet session (see the one test that turns Xet back on) logs to HF_XET_CACHE/logs, default ~/.cache.
    monkeypatch.setenv("HF_XET_CACHE", str(tmp_path / "xet"))


@pytest.fixture
def hub():
    with FakeHub() as hub:
        yield hub


@pytest.fixture
def api(hub):
    return HfApi(endpoint=hub.endpoint, token="fake-token")


@pytest.fixture
def folder(tmp_path):
    folder = tmp_path / "upload"
    (folder / "assets").mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(safetensors_bytes([1.0, -2.5, 3.25]))
    (folder / "README.md").write_text(README)
    (folder / "assets" / "curve.png").write_bytes(PNG)
    return folder


@pytest.fixture
def v1(api, folder):
    """`folder` pushed as one commit, the way the project publishes a policy."""
    api.create_repo(REPO, exist_ok=True, private=True)
    return api.upload_folder(repo_id=REPO, folder_path=folder, commit_message="v1")


def test_create_repo_is_idempotent_with_exist_ok(hub, api):
    url = api.create_repo(REPO, exist_ok=True, private=True)
    assert (url.repo_id, url.endpoint) == (REPO, hub.endpoint)
    assert api.create_repo(REPO, exist_ok=True) == url
    with pytest.raises(HfHubHTTPError) as conflict:
        api.create_repo(REPO)
    assert conflict.value.response.status_code == 409
    info = api.model_info(REPO)
    assert info.private and info.siblings == [] and re.fullmatch("[0-9a-f]{40}", info.sha)


def test_upload_folder_then_download_gives_identical_bytes(hub, api, folder, v1, tmp_path):
    expected = read_tree(folder)
    assert re.fullmatch("[0-9a-f]{40}", v1.oid) and hub.commits(REPO)[-1] == v1.oid
    assert hub.files(REPO) == expected
    assert sorted(api.list_repo_files(REPO)) == sorted(expected)
    assert {(type(e).__name__, e.path) for e in api.list_repo_tree(REPO)} == {
        ("RepoFile", "README.md"),
        ("RepoFile", "model.safetensors"),
        ("RepoFolder", "assets"),
    }
    info = api.model_info(REPO)
    assert info.sha == v1.oid and sorted(s.rfilename for s in info.siblings) == sorted(expected)
    for revision in (None, "main", v1.oid):
        cache = tmp_path / f"cache-{revision}"
        for name, data in expected.items():
            path = hf_hub_download(REPO, name, revision=revision, endpoint=hub.endpoint, cache_dir=cache)
            assert Path(path).read_bytes() == data
    snapshot = snapshot_download(REPO, endpoint=hub.endpoint, cache_dir=tmp_path / "snapshot")
    assert Path(snapshot).name == v1.oid and read_tree(snapshot) == expected


def test_upload_folder_on_the_default_xet_pipeline_path_still_sends_plain_files(
    hub, api, folder, monkeypatch
):
    # What a test that does not disable Xet gets: since preupload answers "regular" for every file, the
    # pipelined upload sends them all inline in the commit (the fake has no Xet endpoint to fall back on).
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", False)
    if not is_xet_available():
        pytest.skip("hf_xet is not installed: upload_folder always makes a plain commit")
    pipelined = []
    real_pipelined_upload = _upload_pipeline.pipelined_upload

    def spy(*args, **kwargs):
        pipelined.append(True)
        return real_pipelined_upload(*args, **kwargs)

    monkeypatch.setattr(_upload_pipeline, "pipelined_upload", spy)
    api.create_repo(REPO)
    commit = api.upload_folder(repo_id=REPO, folder_path=folder)
    assert pipelined and hub.commits(REPO)[-1] == commit.oid and hub.files(REPO) == read_tree(folder)


def test_new_commit_gets_new_sha_and_old_revision_stays_downloadable(hub, api, v1, tmp_path):
    new_weights = safetensors_bytes([0.5, 0.25])
    v2 = api.upload_file(
        path_or_fileobj=new_weights, path_in_repo="model.safetensors", repo_id=REPO, commit_message="v2"
    )
    assert v2.oid != v1.oid and hub.commits(REPO)[-2:] == [v1.oid, v2.oid]
    assert api.model_info(REPO).sha == v2.oid and api.model_info(REPO, revision=v1.oid).sha == v1.oid

    def download(revision):
        kwargs = {"revision": revision, "endpoint": hub.endpoint, "cache_dir": tmp_path / "cache"}
        return Path(hf_hub_download(REPO, "model.safetensors", **kwargs)).read_bytes()

    assert download(v1.oid) == safetensors_bytes([1.0, -2.5, 3.25])
    assert download("main") == download(v2.oid) == new_weights
    # Re-uploading identical content: the client drops the unchanged file and makes no commit, as on the Hub.
    again = api.upload_file(path_or_fileobj=new_weights, path_in_repo="model.safetensors", repo_id=REPO)
    assert again.oid == v2.oid and hub.commits(REPO)[-1] == v2.oid


def test_deletions_make_new_commits_and_leave_old_revisions_intact(hub, api, folder, v1):
    api.delete_file("README.md", repo_id=REPO)
    api.delete_folder("assets", repo_id=REPO)
    assert api.list_repo_files(REPO) == ["model.safetensors"]
    assert hub.files(REPO, revision=v1.oid) == read_tree(folder) and len(hub.commits(REPO)) == 4


def test_dataset_repos_work_too(hub, api, tmp_path):
    api.create_repo(REPO, repo_type="dataset")
    api.upload_file(path_or_fileobj=b"a,b\n1,2\n", path_in_repo="data.csv", repo_id=REPO, repo_type="dataset")
    path = hf_hub_download(REPO, "data.csv", repo_type="dataset", endpoint=hub.endpoint, cache_dir=tmp_path)
    assert Path(path).read_bytes() == b"a,b\n1,2\n"
    with pytest.raises(RepositoryNotFoundError):  # same id, other repo type
        api.model_info(REPO)


def test_missing_repo_file_or_revision_raise_the_client_exceptions(hub, api, v1, tmp_path):
    kwargs = {"endpoint": hub.endpoint, "cache_dir": tmp_path / "cache"}
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download("org/missing", "README.md", **kwargs)
    with pytest.raises(RepositoryNotFoundError):
        api.model_info("org/missing")
    with pytest.raises(RepositoryNotFoundError):
        api.list_repo_files("org/missing")
    with pytest.raises(EntryNotFoundError):
        hf_hub_download(REPO, "missing.bin", **kwargs)
    with pytest.raises(RevisionNotFoundError):
        hf_hub_download(REPO, "README.md", revision="0" * 40, **kwargs)
    with pytest.raises(RevisionNotFoundError):
        api.list_repo_files(REPO, revision="dev")


def test_default_endpoint_recipe_for_model_card_and_top_level_functions(hub, folder, monkeypatch, tmp_path):
    point_client_at(monkeypatch, hub.endpoint, cache_dir=tmp_path / "cache")
    huggingface_hub.create_repo(REPO, token="fake-token")  # bound to an HfApi made at import time
    huggingface_hub.upload_folder(repo_id=REPO, folder_path=folder, token="fake-token")  # plain commit path
    card = ModelCard.load(REPO)  # downloads README.md with no endpoint= and no cache_dir=
    assert card.data.license == "apache-2.0" and card.data.tags == ["reinforcement-learning"]
    assert card.data.library_name == "gsbpolicy" and "# Policy" in card.text
    assert Path(hf_hub_download(REPO, "README.md")).is_relative_to(tmp_path / "cache")
    assert HfApi().whoami(token="fake-token")["name"] == "fake-user"


def test_cache_is_used_after_server_stops(hub, folder, v1, tmp_path):
    kwargs = {"endpoint": hub.endpoint, "cache_dir": tmp_path / "cache"}
    paths = {name: hf_hub_download(REPO, name, **kwargs) for name in read_tree(folder)}
    snapshot = snapshot_download(REPO, **kwargs)
    hub.stop()
    for name, path in paths.items():
        assert hf_hub_download(REPO, name, local_files_only=True, **kwargs) == path
        assert hf_hub_download(REPO, name, revision=v1.oid, local_files_only=True, **kwargs) == path
    assert snapshot_download(REPO, local_files_only=True, **kwargs) == snapshot
    # Without the flag the connection is refused, and the client falls back to its cache by itself.
    assert hf_hub_download(REPO, "README.md", **kwargs) == paths["README.md"]
    with pytest.raises(LocalEntryNotFoundError):
        hf_hub_download(REPO, "never-downloaded.bin", local_files_only=True, **kwargs)
    hub.start()  # same port, same data
    assert hf_hub_download(REPO, "README.md", force_download=True, **kwargs) == paths["README.md"]


def test_offline_mode_serves_cached_files_without_requests(hub, api, v1, monkeypatch, tmp_path):
    kwargs = {"endpoint": hub.endpoint, "cache_dir": tmp_path / "cache"}
    path = hf_hub_download(REPO, "README.md", **kwargs)
    # What HF_HUB_OFFLINE=1 does; setting the variable now would be too late (it is read at import).
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert hf_hub_download(REPO, "README.md", **kwargs) == path
    assert hf_hub_download(REPO, "README.md", revision=v1.oid, **kwargs) == path
    with pytest.raises(LocalEntryNotFoundError):  # not cached, and the server (still up) is not asked
        hf_hub_download(REPO, "model.safetensors", **kwargs)
    with pytest.raises(OfflineModeIsEnabled):
        api.model_info(REPO)
