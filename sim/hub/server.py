"""An HTTP server that answers the Hugging Face Hub routes `huggingface_hub` calls, from the shipped
snapshot: model info (`/api/models/<repo>[/revision/<rev>]`) and file resolution
(`HEAD`/`GET /<repo>/resolve/<rev>/<file>` with X-Repo-Commit, ETag, Content-Length and Range).

Gated repos admit only tokens granted access; errors carry `X-Error-Code` the way the Hub does, so
the real client raises its real exception types.

Commits made here (`POST /_sim/commit/...`, `move_branch`) are the Hub's own history: with a home
they are kept in `<home>/commits.json` (a journal, written atomically after each one) and replayed when
a Hub starts on the same home, so a restarted plane still finds the revisions its workloads run.
`GET /_sim/repos` lists every repo, where main points, and the commits made here."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from sim.hub.faults import Faults
from sim.hub.snapshot import load_snapshot

# Shards carry no payload in the snapshot; ranged reads (safetensors headers) get zeros, up to this.
MAX_SYNTHETIC_BODY = 64 * 1024 * 1024


@dataclass
class HubState:
    models: dict[str, dict]
    faults: Faults = field(default_factory=Faults)
    # repo_id → tokens with access to a gated repo; "*" grants every gated repo.
    grants: dict[str, set[str]] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)
    journal_path: Path | None = None  # where the commits made here are kept; None keeps them in memory
    journal: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.RLock = field(default_factory=threading.RLock)

    def replay(self) -> None:
        """Make again the commits a previous Hub on this home made (same shas: they derive from content)."""
        if self.journal_path is None or not self.journal_path.exists():
            return
        for entry in json.loads(self.journal_path.read_text()):
            if entry["op"] == "commit":
                self.commit(entry["repo"], entry["set"], at=entry.get("at"))
            elif entry["op"] == "move":
                self.move(entry["repo"], entry["sha"])

    def _record(self, entry: dict[str, Any]) -> None:
        self.journal.append(entry)
        if self.journal_path is None:
            return
        self.journal_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.journal_path.with_name(f".{self.journal_path.name}.tmp")
        with open(tmp, "w") as fh:
            json.dump(self.journal, fh, indent=1)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.journal_path)

    def move(self, repo_id: str, sha: str) -> None:
        """Point `main` at a commit (serving the same files), as a push to the repo would."""
        with self._lock:
            model = self.lookup(repo_id)
            if model is None:
                raise KeyError(repo_id)
            model.setdefault("_commits", {model["sha"]}).add(sha)
            model["sha"] = sha
            self._record({"op": "move", "repo": model["id"], "sha": sha})

    def listing(self) -> list[dict[str, Any]]:
        """Every repo with where main points and the commits made here, oldest first."""
        with self._lock:
            made: dict[str, list[dict[str, Any]]] = {}
            for entry in self.journal:
                made.setdefault(entry["repo"], []).append({k: v for k, v in entry.items() if k != "repo"})
            return [{"id": m["id"], "sha": m["sha"], "commits": made.get(m["id"], [])}
                    for _, m in sorted(self.models.items(), key=lambda item: item[0].lower())]

    def lookup(self, repo_id: str) -> dict | None:
        model = self.models.get(repo_id)
        if model is None:  # the Hub matches repo ids case-insensitively
            model = next((m for k, m in self.models.items() if k.lower() == repo_id.lower()), None)
        return model

    def commit_for(self, model: dict, revision: str) -> str | None:
        commits = model.setdefault("_commits", {model["sha"]})
        if revision == "main":
            return model["sha"]
        return revision if revision in commits else None

    def files_at(self, model: dict, commit: str) -> list[dict]:
        """The files as they were at this commit (older commits keep theirs after a new one)."""
        return model.get("_files_at", {}).get(commit, model["files"])

    def commit(self, repo_id: str, changes: dict[str, Any], *, at: str | None = None) -> str:
        """A new commit on `main` whose config.json has these keys set (dotted keys reach into
        objects), as a push to the repo would; the older commit keeps serving its own files."""
        with self._lock:
            model = self.lookup(repo_id)
            if model is None:
                raise KeyError(repo_id)
            old_sha = model["sha"]
            entry = _file(model["files"], "config.json")
            if entry is None or "content" not in entry:
                raise ValueError(f"{model['id']} has no config.json to change")
            config = json.loads(entry["content"])
            for key, value in changes.items():
                *path, last = key.split(".")
                target = config
                for part in path:
                    if target.get(part) is None:
                        target[part] = {}
                    target = target[part]
                    if not isinstance(target, dict):
                        raise ValueError(f"{key}: {part} is not an object in config.json")
                target[last] = value
            content = json.dumps(config, indent=2) + "\n"
            data = content.encode()
            blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
            model.setdefault("_files_at", {})[old_sha] = model["files"]
            model["files"] = [{**f, "content": content, "size": len(data), "blob_id": blob}
                              if f["path"] == "config.json" else f for f in model["files"]]
            sha = hashlib.sha1(f"{old_sha}:{blob}".encode()).hexdigest()
            model.setdefault("_commits", {old_sha}).add(sha)
            model["sha"] = sha
            model["lastModified"] = at or time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
            self._record({"op": "commit", "repo": model["id"], "sha": sha, "parent": old_sha, "set": changes,
                          "at": model["lastModified"]})
            return sha

    def has_access(self, repo_id: str, token: str | None) -> bool:
        return token is not None and (token in self.grants.get(repo_id, set()) or token in self.grants.get("*", set()))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; with Nagle on, each answer waits for a delayed ACK.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, *_args) -> None:  # quiet: tests read the request log instead
        pass

    def do_GET(self) -> None:
        self._dispatch(head=False)

    def do_HEAD(self) -> None:
        self._dispatch(head=True)

    def do_POST(self) -> None:
        """`POST /_sim/commit/<org>/<name>` `{"set": {key: value}}`: a new commit on main (local callers
        only: the real Hub has no such route, and nobody else may move a branch here)."""
        raw = [unquote(p) for p in urlsplit(self.path).path.split("/") if p]
        if self.client_address[0] not in ("127.0.0.1", "::1"):
            return self._error(403, None, "commits are taken from this machine only", False)
        if len(raw) != 4 or raw[:2] != ["_sim", "commit"]:
            return self._error(404, None, f"no route for {self.path}", False)
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            changes = body.get("set") if isinstance(body, dict) else None
            if not isinstance(changes, dict) or not changes:
                return self._error(400, None, 'send {"set": {"<config key>": <value>, ...}}', False)
            sha = self.server.state.commit(f"{raw[2]}/{raw[3]}", changes)
        except KeyError:
            return self._error(404, "RepoNotFound", "Repository not found", False)
        except ValueError as exc:
            return self._error(400, None, str(exc), False)
        self._json(200, {"id": self.server.state.lookup(f"{raw[2]}/{raw[3]}")["id"], "sha": sha,
                         "changed": sorted(changes)}, False)

    # -- routing -------------------------------------------------------------------------------
    def _dispatch(self, head: bool) -> None:
        state = self.server.state
        parts = urlsplit(self.path)
        raw = [p for p in parts.path.split("/") if p]
        with state._lock:
            state.requests.append((self.command, parts.path))
        try:
            if len(raw) >= 4 and raw[0] == "api" and raw[1] == "models":
                repo_id = f"{unquote(raw[2])}/{unquote(raw[3])}"
                revision = "main"
                if len(raw) == 6 and raw[4] == "revision":
                    revision = unquote(raw[5])
                elif len(raw) != 4:
                    return self._error(404, "EntryNotFound", "unknown API route", head)
                return self._model_info(repo_id, revision, parse_qs(parts.query), head)
            if raw == ["_sim", "repos"]:
                return self._json(200, state.listing(), head)
            if len(raw) >= 5 and raw[2] == "resolve":
                repo_id = f"{unquote(raw[0])}/{unquote(raw[1])}"
                return self._resolve(repo_id, unquote(raw[3]), unquote("/".join(raw[4:])), head)
            return self._error(404, None, f"no route for {parts.path}", head)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _token(self) -> str | None:
        scheme, _, value = self.headers.get("Authorization", "").partition(" ")
        return value.strip() or None if scheme.lower() == "bearer" else None

    def _faulted(self, repo_id: str, route: str, head: bool) -> bool:
        state = self.server.state
        plan = state.faults.plan(repo_id)
        if plan.latency and plan.scope in (route, "all"):
            time.sleep(plan.latency)
        taken = state.faults.take(repo_id, route)
        if taken is None:
            return False
        kind, plan = taken
        if kind == "rate_limited":
            reset = plan.rate_limit_reset
            self._error(429, None, "rate limit reached", head, headers={
                "RateLimit": f'"api";r=0;t={reset}',
                "RateLimit-Policy": '"fixed window";"api";q=500;w=300',
                "Retry-After": str(reset)})
        else:
            self._error(plan.server_error_status, None, "internal error (injected)", head)
        return True

    def _repo(self, repo_id: str, revision: str, head: bool) -> tuple[dict, str] | None:
        state = self.server.state
        model = state.lookup(repo_id)
        if model is None:
            self._error(404, "RepoNotFound", "Repository not found", head)
            return None
        commit = None if state.faults.plan(repo_id).missing_revision else state.commit_for(model, revision)
        if commit is None:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}", head)
            return None
        return model, commit

    # -- routes --------------------------------------------------------------------------------
    def _model_info(self, repo_id: str, revision: str, query: dict, head: bool) -> None:
        if self._faulted(repo_id, "api", head):
            return
        found = self._repo(repo_id, revision, head)
        if found is None:
            return
        model, commit = found
        files = self.server.state.files_at(model, commit)
        blobs = query.get("blobs", ["false"])[0].lower() == "true" \
            and not self.server.state.faults.plan(repo_id).hide_file_sizes
        gated = model["gated"] or ("manual" if self.server.state.faults.plan(repo_id).gated else False)
        body = {
            "_id": commit[:24], "id": model["id"], "modelId": model["id"], "author": model["author"],
            "sha": commit, "private": model["private"], "gated": gated, "disabled": model["disabled"],
            "pipeline_tag": model["pipeline_tag"], "library_name": model["library_name"], "tags": model["tags"],
            "cardData": model["cardData"], "createdAt": model["createdAt"], "lastModified": model["lastModified"],
            "config": _config_summary(_file(files, "config.json")["content"]),
            "siblings": [_sibling(f, blobs) for f in files],
            "spaces": [], "usedStorage": sum(f["size"] for f in files),
        }
        if model.get("safetensors"):
            body["safetensors"] = model["safetensors"]
        self._json(200, body, head)

    def _resolve(self, repo_id: str, revision: str, path: str, head: bool) -> None:
        state = self.server.state
        if self._faulted(repo_id, "files", head):
            return
        found = self._repo(repo_id, revision, head)
        if found is None:
            return
        model, commit = found
        gated = model["gated"] or state.faults.plan(repo_id).gated
        if gated and (state.faults.plan(repo_id).gated or not state.has_access(model["id"], self._token())):
            if self._token() is None:
                return self._error(401, "GatedRepo", f"Access to model {model['id']} is restricted. You must have "
                                   "access to it and be authenticated to access it. Please log in.", head)
            return self._error(403, "GatedRepo", f"Access to model {model['id']} is restricted and you are not in "
                               "the authorized list.", head)
        entry = _file(state.files_at(model, commit), path)
        if entry is None:
            return self._error(404, "EntryNotFound", f"{path} does not exist at {commit}", head)
        size = entry["size"]
        etag = entry.get("lfs_sha256") or entry["blob_id"]
        headers = {"X-Repo-Commit": commit, "ETag": f'"{etag}"', "Accept-Ranges": "bytes",
                   "Content-Type": "application/json" if path.endswith(".json") else "application/octet-stream"}
        if entry.get("lfs_sha256"):
            headers["X-Linked-Etag"] = f'"{etag}"'
            headers["X-Linked-Size"] = str(size)
        start, end = 0, size - 1
        status = 200
        rng = self.headers.get("Range")
        if rng:
            parsed = _parse_range(rng, size)
            if parsed is None:
                return self._error(416, None, f"unsatisfiable range {rng}", head,
                                   headers={"Content-Range": f"bytes */{size}"})
            start, end = parsed
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        length = end - start + 1
        if "content" in entry:
            body = entry["content"].encode()[start:end + 1]
        elif head:
            body = b""
        elif length > MAX_SYNTHETIC_BODY:
            return self._error(403, None, "the offline snapshot holds no tensor payloads; "
                               "request a Range of at most 64 MiB", head)
        else:
            body = bytes(length)
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    # -- answers -------------------------------------------------------------------------------
    def _json(self, status: int, body: Any, head: bool, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if not head:
            self.wfile.write(data)

    def _error(self, status: int, code: str | None, message: str, head: bool,
               headers: dict[str, str] | None = None) -> None:
        extra = dict(headers or {})
        if code:
            extra["X-Error-Code"] = code
        extra["X-Error-Message"] = message
        self._json(status, {"error": message}, head, extra)


def _file(files: list[dict], path: str) -> dict | None:
    return next((f for f in files if f["path"] == path), None)


def _sibling(entry: dict, blobs: bool) -> dict:
    out: dict[str, Any] = {"rfilename": entry["path"]}
    if blobs:
        out["size"] = entry["size"]
        out["blobId"] = entry["blob_id"]
        if entry.get("lfs_sha256"):
            out["lfs"] = {"size": entry["size"], "sha256": entry["lfs_sha256"], "pointerSize": 134}
    return out


def _parse_range(header: str, size: int) -> tuple[int, int] | None:
    unit, _, spec = header.partition("=")
    if unit.strip() != "bytes" or "," in spec:
        return None
    first, _, last = spec.strip().partition("-")
    try:
        if first == "":
            n = int(last)
            return (max(0, size - n), size - 1) if n > 0 else None
        start = int(first)
        end = min(int(last), size - 1) if last else size - 1
    except ValueError:
        return None
    return (start, end) if start <= end and start < size else None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: HubState


@dataclass
class HubServerHandle:
    url: str
    state: HubState
    _server: _Server
    _thread: threading.Thread

    @property
    def faults(self) -> Faults:
        return self.state.faults

    @property
    def requests(self) -> list[tuple[str, str]]:
        return self.state.requests

    def request_count(self, repo_id: str | None = None) -> int:
        """Requests seen so far (for one repo: its model-info and file routes)."""
        if repo_id is None:
            return len(self.state.requests)
        return sum(1 for _m, p in list(self.state.requests)
                   if p.startswith((f"/api/models/{repo_id}", f"/{repo_id}/resolve/")))

    def grant(self, repo_id: str, token: str) -> None:
        """Give a token access to a gated repo ("*": to every gated repo)."""
        self.state.grants.setdefault(repo_id, set()).add(token)

    def move_branch(self, repo_id: str, sha: str) -> None:
        """Point `main` at a new commit (serving the same files), as a push to the repo would."""
        self.state.move(repo_id, sha)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> HubServerHandle:
        return self

    def __exit__(self, *_exc) -> None:
        self.stop()


def _config_summary(content: str) -> dict:
    """The few config.json keys the Hub copies into model info. A config that is not a JSON object is
    served as a file all the same (the Hub does not validate it); model info then carries none."""
    try:
        config = json.loads(content)
    except ValueError:
        return {}
    if not isinstance(config, dict):
        return {}
    return {k: v for k, v in config.items() if k in ("architectures", "model_type", "quantization_config")}


def start_hub_server(port: int = 0, snapshot: Path | str | dict | None = None, faults: Faults | None = None,
                     *, host: str = "127.0.0.1", grants: dict[str, set[str]] | None = None,
                     home: Path | str | None = None) -> HubServerHandle:
    """Serve the snapshot on a background thread; `port=0` picks a free port (see `handle.url`).
    With `home`, the commits made here are kept there and those of an earlier Hub replayed."""
    data = snapshot if isinstance(snapshot, dict) else load_snapshot(snapshot)
    state = HubState(models=data["models"], faults=faults or Faults(),
                     grants={k: set(v) for k, v in (grants or {}).items()},
                     journal_path=Path(home) / "commits.json" if home is not None else None)
    state.replay()
    server = _Server((host, port), _Handler)
    server.state = state
    thread = threading.Thread(target=server.serve_forever, name="wingsmith-hub-snapshot", daemon=True)
    thread.start()
    return HubServerHandle(url=f"http://{host}:{server.server_address[1]}", state=state,
                           _server=server, _thread=thread)
