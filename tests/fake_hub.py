"""In-process fake of the Hugging Face Hub HTTP API for tests (stdlib only, no network).

Enough of the Hub protocol for the *unmodified* ``huggingface_hub`` client (checked against 2.4.0):
``create_repo``, ``upload_folder`` / ``upload_file`` / ``create_commit``, ``model_info`` / ``repo_info``,
``list_repo_files`` / ``list_repo_tree``, ``hf_hub_download``, ``snapshot_download``, ``ModelCard.load``.
Files always travel inline (base64 in the commit, plain GET on download): never LFS, never Xet. Storage is in
memory: each repo is a chain of immutable commits (sha -> {path: bytes}); only the ``main`` branch exists and
every older commit stays downloadable by its full 40-hex sha. Repo ids must be namespaced (``"org/name"``);
model, dataset and space repos work; tokens are accepted (or absent) and never checked.

Usage, passing the endpoint explicitly::

    with FakeHub() as hub:  # or: hub = FakeHub().start() ... hub.stop()
        api = HfApi(endpoint=hub.endpoint, token="fake-token")
        api.create_repo("org/policy", exist_ok=True)
        api.upload_folder(repo_id="org/policy", folder_path=folder, commit_message="v1")
        path = hf_hub_download("org/policy", "model.safetensors", endpoint=hub.endpoint, cache_dir=tmp_path)

Or making it the default for code that passes no endpoint:
``point_client_at(monkeypatch, hub.endpoint, cache_dir=tmp_path)``. Why each patch is needed:
``HF_ENDPOINT`` / ``HF_HUB_OFFLINE`` are read once, at import, into ``huggingface_hub.constants``, so
setting the environment variables inside a test is too late; the client does read these module attributes
at call time:

* ``constants.ENDPOINT``: default of every ``HfApi()`` created afterwards (HfApi instances created before the
  patch, e.g. at import of your own module, keep the old endpoint) and of ``RepoCard.validate``.
* ``constants.HUGGINGFACE_CO_URL_TEMPLATE``: built from ENDPOINT at import and used by ``hf_hub_url``,
  hence by ``hf_hub_download(endpoint=None)`` and ``ModelCard.load``: patching ENDPOINT alone is NOT
  enough for those.
* ``huggingface_hub.hf_api.api.endpoint``: the top-level shortcuts (``huggingface_hub.create_repo``,
  ``upload_folder``, ``model_info``, ...) are bound methods of one ``HfApi`` made at import.
* ``constants.HF_HUB_DISABLE_XET = True``: with ``hf_xet`` installed, ``upload_folder`` otherwise takes
  its Xet "pipelined" path (which also works here, as every file is answered ``uploadMode: regular``, but
  starts a Xet session); disabled, it makes one plain ``create_commit``.
* ``constants.HF_HUB_CACHE``: default ``cache_dir``, read at call time (``ModelCard.load`` has no cache_dir).
* Offline mode: ``monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)`` is honoured at request time
  (every request raises ``OfflineModeIsEnabled``), so downloads come from the cache as with HF_HUB_OFFLINE=1.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

_URL_TYPES = {"models": "model", "datasets": "dataset", "spaces": "space"}
_URL_PREFIX = {"model": "", "dataset": "datasets/", "space": "spaces/"}


def git_blob_oid(data: bytes) -> str:
    """Git blob sha1: the Hub's ETag of non-LFS files; the client compares it to skip unchanged files."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())  # the only date format the client parses


def point_client_at(monkeypatch, endpoint: str, cache_dir=None) -> None:
    """Make huggingface_hub calls without ``endpoint=`` go to `endpoint` (the module docstring says why)."""
    from huggingface_hub import constants, hf_api

    monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    template = endpoint + "/{repo_id}/resolve/{revision}/{filename}"
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", template)
    monkeypatch.setattr(hf_api.api, "endpoint", endpoint)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    # The environment as well, for subprocesses (a fresh interpreter reads it at import).
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    if cache_dir is not None:
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache_dir))
        monkeypatch.setenv("HF_HUB_CACHE", str(cache_dir))


class HubError(Exception):
    """An error answer. The client maps the X-Error-Code header onto its exception classes."""

    def __init__(self, status: int, code: str | None, message: str, headers=None, body=None):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.headers, self.body = headers or {}, {"error": message, **(body or {})}


class _Repo:
    def __init__(self, private: bool):
        self.private = private
        self.created_at = self.last_modified = _now()
        self.commits: dict[str, dict[str, bytes]] = {}  # sha -> complete file tree, in commit order
        self.head = ""


class FakeHub:
    """Hub-compatible HTTP server on 127.0.0.1 (free port): ``start()`` / ``stop()`` or a context manager."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        self.host, self.port = host, port
        self.repos: dict[tuple[str, str], _Repo] = {}  # (repo_type, repo_id) -> repo
        self.lock = threading.Lock()  # every request holds it: handlers run in one thread per connection
        self.fault: str | None = None
        """A fault every request meets while set: "hang" (never answered, until stop()), "error" (500) or
        "garbage" (200 with an HTML page instead of the Hub's answer)."""
        self._released = threading.Event()  # ends the hung requests at stop()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> FakeHub:
        # A restart after stop() binds the same port again: the endpoint stays valid and the data is kept.
        self._server = ThreadingHTTPServer((self.host, self.port), _Handler)
        self._server.hub = self  # type: ignore[attr-defined]
        self.port = self._server.server_address[1]
        self._released.clear()
        # shutdown() waits for serve_forever to poll its flag: the default 0.5 s interval is felt in every test.
        serve, poll = self._server.serve_forever, {"poll_interval": 0.01}
        self._thread = threading.Thread(target=serve, kwargs=poll, name="fake-hub", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._released.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join()
            self._server = self._thread = None

    def __enter__(self) -> FakeHub:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def commits(self, repo_id: str, repo_type: str = "model") -> list[str]:
        """Commit shas, oldest first; the first one is the empty commit made by create_repo."""
        with self.lock:
            return list(self._repo(repo_type, repo_id).commits)

    def files(self, repo_id: str, revision: str = "main", repo_type: str = "model") -> dict[str, bytes]:
        with self.lock:
            return dict(self._tree(self._repo(repo_type, repo_id), revision)[1])

    # The helpers below expect self.lock to be held.
    def _repo(self, repo_type: str, repo_id: str) -> _Repo:
        if (repo_type, repo_id) not in self.repos:
            raise HubError(404, "RepoNotFound", f"Repository not found: {repo_id}")
        return self.repos[(repo_type, repo_id)]

    def _tree(self, repo: _Repo, revision: str) -> tuple[str, dict[str, bytes]]:
        sha = repo.head if revision == "main" else revision
        if sha not in repo.commits:
            raise HubError(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        return sha, repo.commits[sha]

    def _commit(self, repo_type: str, repo_id: str, message: str, tree: dict[str, bytes]) -> str:
        repo = self.repos[(repo_type, repo_id)]
        # Hashing the parent in (as git does) gives every commit a new sha, even one with an identical tree.
        listing = sorted((path, git_blob_oid(data)) for path, data in tree.items())
        sha = hashlib.sha1(json.dumps([repo_type, repo_id, repo.head, message, listing]).encode()).hexdigest()
        repo.commits[sha], repo.head, repo.last_modified = tree, sha, _now()
        return sha


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.0 closes the connection after each answer: no keep-alive connection pooled by the client can
    # outlive stop(), so requests after it fail with a plain ConnectError (-> the client's cache fallback).
    protocol_version = "HTTP/1.0"

    def log_message(self, format, *args) -> None:  # no per-request line on stderr
        pass

    def _dispatch(self) -> None:
        method, hub = self.command, self.server.hub  # type: ignore[attr-defined]
        if hub.fault is not None:
            self._fault(hub, method)
            return
        url = urlsplit(self.path)
        # Split before unquoting: the client sends revisions quoted with safe="" ("refs%2Fpr%2F1").
        segs = [unquote(s) for s in url.path.strip("/").split("/")]
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        status, headers = 200, {}
        try:
            with hub.lock:
                body = self._route(hub, method, segs, query)
        except HubError as e:
            status, body = e.status, e.body
            headers = {"X-Error-Code": e.code, "X-Error-Message": e.message, **e.headers}
        if isinstance(body, tuple):  # a file: (bytes, headers)
            body, headers = body
        else:
            body, headers = json.dumps(body).encode(), {"Content-Type": "application/json", **headers}
        self.send_response(status)
        for key, value in headers.items():
            if value is not None:
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if method != "HEAD":
            self.wfile.write(body)

    do_GET = do_HEAD = do_POST = _dispatch

    def _fault(self, hub: FakeHub, method: str) -> None:
        if hub.fault == "hang":
            hub._released.wait()
            return
        if hub.fault == "error":
            status, kind, body = 500, "application/json", b'{"error": "Internal Error"}'
        else:
            status, kind, body = 200, "text/html", b"<html><body>Sign in to continue</body></html>"
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if method != "HEAD":
            self.wfile.write(body)

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _route(self, hub: FakeHub, method: str, segs: list[str], query: dict):
        if method == "POST" and segs == ["api", "repos", "create"]:
            return self._create_repo(hub, json.loads(self._body()))
        if method == "POST" and segs == ["api", "validate-yaml"]:  # README.md metadata check before a commit
            return {"errors": [], "warnings": []}
        if segs == ["api", "whoami-v2"]:
            if not self.headers.get("Authorization"):
                raise HubError(401, None, "Invalid credentials in Authorization header")
            return {"type": "user", "name": "fake-user", "orgs": [], "auth": {"type": "access_token"}}
        if len(segs) >= 4 and segs[0] == "api" and segs[1] in _URL_TYPES:
            repo_type, repo_id, action, rest = _URL_TYPES[segs[1]], "/".join(segs[2:4]), segs[4:5], segs[5:]
            repo = hub._repo(repo_type, repo_id)
            if method == "GET" and (not action or (action == ["revision"] and len(rest) == 1)):
                return self._info(hub, repo_id, repo, rest[0] if rest else "main")
            if method == "GET" and action == ["tree"] and rest:
                return self._list_tree(hub, repo, rest[0], "/".join(rest[1:]), query)
            if method == "POST" and action == ["preupload"] and len(rest) == 1:
                return self._preupload(hub, repo, rest[0])
            if method == "POST" and action == ["commit"] and len(rest) == 1:
                return self._create_commit(hub, repo_type, repo_id, repo, rest[0])
        elif method in ("GET", "HEAD") and len(segs) >= 5:  # [datasets/|spaces/]org/name/resolve/rev/path
            repo_type = segs.pop(0)[:-1] if segs[0] in ("datasets", "spaces") else "model"
            if segs[2] == "resolve":
                repo = hub._repo(repo_type, "/".join(segs[:2]))
                return self._resolve(hub, repo, segs[3], "/".join(segs[4:]))
        # Anything else (e.g. the client's /api/agent-harnesses lookup) is a plain 404, which it tolerates.
        raise HubError(404, None, f"FakeHub does not implement {method} {self.path}")

    def _create_repo(self, hub: FakeHub, payload: dict):
        if not payload.get("organization"):
            raise HubError(400, None, "FakeHub needs namespaced repo ids ('org/name')")
        repo_type, repo_id = payload.get("type") or "model", f"{payload['organization']}/{payload['name']}"
        url = f"{hub.endpoint}/{_URL_PREFIX[repo_type]}{repo_id}"
        if (repo_type, repo_id) in hub.repos:  # exist_ok=True: the client swallows the 409 but reads its url
            raise HubError(409, None, "You already created this repo", body={"url": url})
        hub.repos[(repo_type, repo_id)] = _Repo(private=payload.get("visibility") == "private")
        hub._commit(repo_type, repo_id, "initial commit", {})  # so that "main" resolves, as on the Hub
        return {"url": url, "name": repo_id, "id": repo_id}

    def _preupload(self, hub: FakeHub, repo: _Repo, revision: str):
        sha, tree = hub._tree(repo, revision)
        # "regular" makes the client inline every file, base64, in the commit payload: no LFS, no Xet.
        # The oid of the current blob lets the client drop unchanged files from the commit, as on the Hub.
        paths = [file["path"] for file in json.loads(self._body())["files"]]
        oids = {path: git_blob_oid(tree[path]) if path in tree else None for path in paths}
        files = [{"path": p, "uploadMode": "regular", "shouldIgnore": False, "oid": oids[p]} for p in paths]
        return {"files": files, "commitOid": sha}

    def _create_commit(self, hub: FakeHub, repo_type: str, repo_id: str, repo: _Repo, revision: str):
        if revision != "main":
            raise HubError(404, "RevisionNotFound", "FakeHub only commits to 'main'")
        tree, message = dict(repo.commits[repo.head]), ""
        for line in self._body().splitlines():  # NDJSON: a header, then one operation per line
            item = json.loads(line)
            key, value = item["key"], item["value"]
            if key == "header":
                message = value["summary"]
                if value.get("parentCommit") not in (None, repo.head):
                    raise HubError(412, None, "A commit has happened since. Please refresh and try again.")
            elif key == "file":  # the client always sends base64
                tree[value["path"]] = base64.b64decode(value["content"])
            elif key == "deletedFile":
                if tree.pop(value["path"], None) is None:
                    raise HubError(404, "EntryNotFound", "A file with this name doesn't exist")
            elif key == "deletedFolder":
                prefix = value["path"].rstrip("/") + "/"
                tree = {path: data for path, data in tree.items() if not path.startswith(prefix)}
            else:  # "lfsFile": never sent, since preupload answers "regular" for every file
                raise HubError(400, None, f"FakeHub does not support commit operation {key!r}")
        sha = hub._commit(repo_type, repo_id, message, tree)
        commit_url = f"{hub.endpoint}/{_URL_PREFIX[repo_type]}{repo_id}/commit/{sha}"
        return {"success": True, "commitOid": sha, "commitUrl": commit_url, "pullRequestUrl": None}

    def _info(self, hub: FakeHub, repo_id: str, repo: _Repo, revision: str):
        sha, tree = hub._tree(repo, revision)
        siblings = [{"rfilename": p, "size": len(d), "blobId": git_blob_oid(d)} for p, d in tree.items()]
        dates = {"createdAt": repo.created_at, "lastModified": repo.last_modified}
        return {"id": repo_id, "sha": sha, "private": repo.private, "tags": [], "siblings": siblings, **dates}

    def _list_tree(self, hub: FakeHub, repo: _Repo, revision: str, path: str, query: dict):
        tree = hub._tree(repo, revision)[1]
        prefix = path.strip("/") + "/" if path.strip("/") else ""
        recursive = query.get("recursive", "").lower() in ("1", "true")
        entries: dict[str, dict] = {}
        for file_path, data in sorted(tree.items()):
            if not file_path.startswith(prefix):
                continue
            parts = file_path[len(prefix) :].split("/")
            # The folders between `prefix` and the file: all of them if recursive, else the first level only.
            for depth in range(1, len(parts) if recursive else min(len(parts), 2)):
                folder = prefix + "/".join(parts[:depth])
                entries.setdefault(folder, {"type": "directory", "path": folder, "oid": git_blob_oid(b"")})
            if recursive or len(parts) == 1:
                entry = {"type": "file", "path": file_path, "size": len(data), "oid": git_blob_oid(data)}
                entries[file_path] = entry
        if prefix and not entries:
            raise HubError(404, "EntryNotFound", f"{path} does not exist at {revision}")
        return list(entries.values())

    def _resolve(self, hub: FakeHub, repo: _Repo, revision: str, path: str):
        sha, tree = hub._tree(repo, revision)
        if path not in tree:
            # With X-Repo-Commit the client records the absence in its cache (.no_exist/), as on the Hub.
            headers = {"X-Repo-Commit": sha}
            raise HubError(404, "EntryNotFound", f"{path} does not exist at {revision}", headers)
        # ETag + X-Repo-Commit are what the client caches by. No X-Xet-Hash / X-Linked-* / Location
        # headers, so the client downloads with a plain GET of this same URL.
        etag = f'"{git_blob_oid(tree[path])}"'
        return tree[path], {"X-Repo-Commit": sha, "ETag": etag, "Content-Type": "application/octet-stream"}
