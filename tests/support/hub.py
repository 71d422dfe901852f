"""A Hugging Face Hub stand-in on loopback: the few routes `huggingface_hub` uses to download a
model repository (`/api/models/.../revision/`, `.../tree/`, `/<repo>/resolve/<commit>/<path>`),
with the Hub's error headers (`X-Error-Code`), a gated repository's token check, and a log of the
requests it served. Point `HF_ENDPOINT` at `Hub.url`."""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse

COMMIT = "0123456789abcdef0123456789abcdef01234567"
LFS_FROM = 1024
"""Files of at least this many bytes are served as LFS files (the Hub declares their SHA-256)."""


@dataclass
class Hub:
    repos: dict[str, dict[str, bytes]]
    """repo id -> {path: content}."""
    token: str | None = None
    """Set: the repositories are gated, and only this bearer token may read them."""
    host: str = "127.0.0.1"
    served: list[str] = field(default_factory=list)
    """`METHOD path` of every request answered."""
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def downloads(self) -> list[str]:
        return [r for r in self.served if r.startswith("GET ") and "/resolve/" in r]


def checkpoint_files(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _handler(hub: Hub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _error(self, status: int, code: str, message: str) -> None:
            self.send_response(status)
            self.send_header("X-Error-Code", code)
            self.send_header("X-Error-Message", message)
            self.send_header("Content-Type", "application/json")
            body = json.dumps({"error": message}).encode()
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _json(self, obj: object) -> None:
            body = json.dumps(obj).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _route(self) -> None:
            path = unquote(urlparse(self.path).path)
            hub.served.append(f"{self.command} {path}")
            api = path.startswith("/api/models/")
            parts = path.removeprefix("/api/models/").split("/") if api else path.lstrip("/").split("/")
            repo_id = "/".join(parts[:2])
            if repo_id not in hub.repos:
                return self._error(401, "RepoNotFound", "Repository not found")
            if hub.token is not None and self.headers.get("Authorization") != f"Bearer {hub.token}":
                return self._error(401, "GatedRepo", f"Access to model {repo_id} is restricted.")
            files, rest = hub.repos[repo_id], parts[2:]
            if len(rest) < 2 or rest[1] not in ("main", COMMIT):
                return self._error(404, "RevisionNotFound", "Invalid rev id")
            if api and rest[0] == "revision":
                return self._json({"id": repo_id, "modelId": repo_id, "sha": COMMIT, "private": False,
                                   "siblings": [{"rfilename": p} for p in files]})
            if api and rest[0] == "tree":
                return self._json([{"type": "file", "path": p, "size": len(data), "oid": sha256(data)[:40],
                                    **({"lfs": {"oid": sha256(data), "size": len(data), "pointerSize": 134}}
                                       if len(data) >= LFS_FROM else {})} for p, data in files.items()])
            if not api and rest[0] == "resolve":
                name = "/".join(rest[2:])
                if name not in files:
                    return self._error(404, "EntryNotFound", f"{name} does not exist")
                data = files[name]
                self.send_response(200)
                self.send_header("X-Repo-Commit", COMMIT)
                self.send_header("ETag", f'"{sha256(data)}"')
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command == "GET":
                    self.wfile.write(data)
                return None
            return self._error(404, "EntryNotFound", path)

        do_GET = do_HEAD = _route

    return Handler


@contextlib.contextmanager
def serving(hub: Hub) -> Iterator[Hub]:
    server = ThreadingHTTPServer((hub.host, hub.port), _handler(hub))
    hub.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
