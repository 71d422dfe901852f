"""`liveplex fetch-model SOURCE --dest DIR`: a checkpoint into a volume, once (the engine pods' init container).

SOURCE is `hf://ORG/REPO[@REVISION]` (a Hugging Face model repository, through `huggingface_hub`,
which honours `HF_ENDPOINT`) or an `https://` URL of a `.tar`, `.tar.gz`, `.tgz` or `.zip` archive
of the checkpoint directory. The token, if any, comes from `$LIVEPLEX_FETCH_TOKEN` (the operator
fills it from the LiveEngine's `tokenSecret`).

- **Once**: DIR gets a marker naming the source and checksums it was fetched for; a second pod on
  the same claim finds it and downloads nothing. Pods starting together serialise on a lock file
  beside DIR; the loser of the race then finds the marker.
- **All or nothing**: files land in a staging directory beside DIR, are verified, and only then
  replace DIR by a rename; a failed or killed download leaves DIR as it was.
- **Verified**: every `--sha256 PATH=HEX` given, plus the SHA-256 the Hub declares for its LFS files.
- **Clear failures**: one line `fetch-model: <code> (<parameter>): <why>` on stderr and in
  `/dev/termination-log`, so `kubectl describe pod` shows it; exit status 1.

Pure core (`parse_source`, `parse_checksums`, `marker`, `verify`, `extract`), I/O at the edges
(`fetch_hub`, `fetch_archive`, `fetch`, `main`).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import sys
import tarfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from liveplex import cli

TOKEN_ENV = "LIVEPLEX_FETCH_TOKEN"
MARKER = ".liveplex-fetch.json"
TERMINATION_LOG = Path("/dev/termination-log")
CHUNK = 1 << 20
PROGRESS_EVERY_S = 5.0
LOCK_POLL_S = 1.0
ARCHIVE_KINDS = {".tar": "tar", ".tar.gz": "tar", ".tgz": "tar", ".zip": "zip"}
_HUB = re.compile(r"^hf://(?P<repo>[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*)"
                  r"(@(?P<revision>[A-Za-z0-9][A-Za-z0-9._/-]*))?$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")

Progress = Callable[[str], None]


class FetchError(Exception):
    """Why a fetch failed: a code, the parameter it is about, and what to do."""

    def __init__(self, code: str, parameter: str, message: str) -> None:
        super().__init__(f"{code} ({parameter}): {message}")
        self.code, self.parameter, self.message = code, parameter, message


@dataclass(frozen=True, slots=True)
class HubSource:
    repo: str
    revision: str


@dataclass(frozen=True, slots=True)
class ArchiveSource:
    url: str
    kind: str
    """`tar` (plain or gzip) or `zip`."""


Source = HubSource | ArchiveSource


def parse_source(text: str) -> Source:
    hub = _HUB.match(text)
    if hub:
        return HubSource(hub["repo"], hub["revision"] or "main")
    if text.startswith("https://"):
        path = urllib.parse.urlparse(text).path
        for suffix, kind in ARCHIVE_KINDS.items():
            if path.endswith(suffix):
                return ArchiveSource(text, kind)
        raise FetchError("bad_source", "source", f"{text!r}: an https:// source must end in "
                         f"{', '.join(ARCHIVE_KINDS)} (an archive of the checkpoint directory)")
    raise FetchError("bad_source", "source", f"{text!r} is neither hf://ORG/REPO[@REVISION] nor an https:// archive")


def parse_checksums(items: list[str]) -> dict[str, str]:
    """`PATH=HEX` items -> {path: hex}; paths are relative and stay inside the checkpoint."""
    out: dict[str, str] = {}
    for item in items:
        path, sep, digest = item.partition("=")
        parts = Path(path).parts
        if not sep or not path or Path(path).is_absolute() or ".." in parts:
            raise FetchError("bad_checksum", "--sha256", f"{item!r}: want PATH=HEX with a relative PATH")
        if not _SHA256.match(digest):
            raise FetchError("bad_checksum", "--sha256", f"{item!r}: want 64 lowercase hex digits after '='")
        out[path] = digest
    return out


def marker(source: str, checksums: Mapping[str, str]) -> dict[str, object]:
    """What DIR's marker holds: a fetch with the same source and checksums is already done."""
    return {"source": source, "sha256": dict(sorted(checksums.items()))}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def verify(root: Path, expected: Mapping[str, str], progress: Progress) -> None:
    """Every expected file exists under `root` with its SHA-256; raises naming the first that does not."""
    for i, (path, want) in enumerate(sorted(expected.items()), 1):
        file = root / path
        if not file.is_file():
            raise FetchError("missing_file", f"--sha256 {path}", f"{path} is not in the fetched checkpoint")
        got = _sha256(file)
        if got != want:
            raise FetchError("checksum_mismatch", f"--sha256 {path}",
                             f"{path}: SHA-256 is {got}, expected {want} (a corrupt or substituted file)")
        progress(f"verified {i}/{len(expected)}: {path}")


def extract(archive: Path, kind: str, into: Path) -> Path:
    """Unpack `archive` into `into` (no member may land outside it) and return the checkpoint
    directory: `into`, or its only entry when the archive holds one top-level directory."""
    def outside(name: str) -> bool:
        return Path(name).is_absolute() or ".." in Path(name).parts

    try:
        if kind == "tar":
            with tarfile.open(archive) as tar:
                members = tar.getmembers()
                bad = [m.name for m in members if outside(m.name) or not (m.isfile() or m.isdir())]
                if bad:
                    raise FetchError("bad_archive", "source", f"members {bad[:3]} are links, devices or land "
                                     "outside the checkpoint directory: only files and directories are unpacked")
                # Python 3.11.4+ has tarfile's data filter (the same rules); Debian 12's 3.11.2 has not
                if hasattr(tarfile, "data_filter"):
                    tar.extractall(into, members=members, filter="data")
                else:
                    tar.extractall(into, members=members)
        else:
            with zipfile.ZipFile(archive) as z:
                bad = [name for name in z.namelist() if outside(name)]
                if bad:
                    raise FetchError("bad_archive", "source",
                                     f"members {bad[:3]} land outside the checkpoint directory")
                z.extractall(into)
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError) as exc:
        raise FetchError("bad_archive", "source", f"cannot unpack the archive: {exc}") from exc
    entries = list(into.iterdir())
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else into


class _Meter:
    """Progress lines at most every PROGRESS_EVERY_S seconds: bytes done of the total."""

    def __init__(self, progress: Progress, what: str, total: int | None) -> None:
        self.progress, self.what, self.total, self.done, self.last = progress, what, total, 0, 0.0

    def add(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if now - self.last >= PROGRESS_EVERY_S:
            self.last = now
            share = f" of {_size(self.total)} ({100 * self.done // self.total} %)" if self.total else ""
            self.progress(f"{self.what}: {_size(self.done)}{share}")


def _size(n: int | None) -> str:
    value = float(n or 0)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{int(value)} B"
        value /= 1000
    raise AssertionError("unreachable")


def fetch_archive(source: ArchiveSource, staging: Path, token: str | None, progress: Progress) -> Path:
    """Download and unpack the archive; the checkpoint directory inside `staging`."""
    request = urllib.request.Request(source.url, headers={"Authorization": f"Bearer {token}"} if token else {})
    archive = staging.with_name(staging.name + ".download")
    try:
        with urllib.request.urlopen(request, timeout=60) as response, open(archive, "wb") as out:
            length = response.headers.get("Content-Length")
            meter = _Meter(progress, "downloaded", int(length) if length else None)
            while block := response.read(CHUNK):
                out.write(block)
                meter.add(len(block))
        progress(f"downloaded {_size(archive.stat().st_size)}; unpacking")
        return extract(archive, source.kind, staging)
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            raise FetchError("unauthorized", "tokenSecret", f"{source.url} answered {exc.code}: "
                             f"{'no token was given' if not token else 'the token was refused'}") from exc
        code = "not_found" if exc.code == 404 else "http_error"
        raise FetchError(code, "source", f"{source.url} answered {exc.code} {exc.reason}") from exc
    except urllib.error.URLError as exc:
        raise FetchError("network", "source", f"cannot reach {source.url}: {exc.reason}") from exc
    finally:
        archive.unlink(missing_ok=True)


@contextlib.contextmanager
def _watching(staging: Path, total: int, progress: Progress) -> Iterator[None]:
    """Bytes on disk under `staging` every PROGRESS_EVERY_S seconds while the block runs: a 15 GB
    file takes minutes, and huggingface_hub's own bars are off (they are `\r` lines in pod logs)."""
    stop = threading.Event()

    def report() -> None:
        while not stop.wait(PROGRESS_EVERY_S):
            done = 0
            for path in staging.rglob("*"):
                with contextlib.suppress(OSError):  # huggingface_hub renames its .incomplete files
                    done += path.stat().st_size if path.is_file() else 0
            progress(f"downloaded {_size(done)} of {_size(total)} ({100 * done // max(total, 1)} %)")

    thread = threading.Thread(target=report, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def fetch_hub(source: HubSource, staging: Path, token: str | None, progress: Progress) -> dict[str, str]:
    """Every file of the repository at the revision into `staging`; the Hub's SHA-256 of its LFS files."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # our lines instead of \r bars in pod logs
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    with cli.needs("fetch"):
        from httpx2 import TransportError  # huggingface_hub 2's HTTP client
        from huggingface_hub import HfApi, hf_hub_download
        from huggingface_hub.errors import (
            GatedRepoError,
            HfHubHTTPError,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )
        from huggingface_hub.hf_api import RepoFile

    endpoint = os.environ.get("HF_ENDPOINT")  # read now: huggingface_hub reads it once, at import
    api = HfApi(endpoint=endpoint, token=token or False)
    try:
        info = api.model_info(source.repo, revision=source.revision)
        commit = info.sha or source.revision
        files = [f for f in api.list_repo_tree(source.repo, revision=commit, recursive=True)
                 if isinstance(f, RepoFile) and not f.path.startswith(".git")]
        total = sum(f.size for f in files)
        progress(f"{source.repo}@{source.revision} is commit {commit}: {len(files)} files, {_size(total)}")
        with _watching(staging, total, progress):
            for i, f in enumerate(files, 1):
                progress(f"file {i}/{len(files)}: {f.path} ({_size(f.size)})")
                hf_hub_download(source.repo, f.path, revision=commit, local_dir=staging, token=token or False,
                                endpoint=endpoint)
    except GatedRepoError as exc:
        raise FetchError("unauthorized", "tokenSecret",
                         f"{source.repo} is gated: accept its licence on the Hub with an account, and give that "
                         f"account's token ({'none was given' if not token else 'this one has no access'})") from exc
    except RevisionNotFoundError as exc:
        raise FetchError("not_found", "source", f"{source.repo} has no revision {source.revision!r}") from exc
    except RepositoryNotFoundError as exc:
        raise FetchError("not_found", "source", f"{source.repo} does not exist, or is private and "
                         f"{'no token was given' if not token else 'the token cannot read it'}") from exc
    except HfHubHTTPError as exc:
        raise FetchError("http_error", "source", f"the Hub answered: {str(exc).splitlines()[0]}") from exc
    except (OSError, TransportError) as exc:
        raise FetchError("network", "source", f"cannot download {source.repo}: {exc}") from exc
    shutil.rmtree(staging / ".cache", ignore_errors=True)  # huggingface_hub's download metadata
    return {f.path: f.lfs.sha256 for f in files if f.lfs is not None}


@contextlib.contextmanager
def _locked(lock: Path, timeout_s: float, progress: Progress) -> Iterator[None]:
    """An exclusive lock on `lock` (pods sharing the claim take turns), waiting up to `timeout_s`."""
    with open(lock, "a") as handle:
        deadline, said = time.monotonic() + timeout_s, False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError as busy:
                if time.monotonic() >= deadline:
                    raise FetchError("lock_timeout", "--lock-timeout-s", f"{lock} stayed locked for {timeout_s:g} s "
                                     "(another pod still downloading?)") from busy
                if not said:
                    progress(f"waiting for {lock}: another pod is fetching into this volume")
                    said = True
                time.sleep(LOCK_POLL_S)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _read_marker(dest: Path) -> object:
    try:
        return json.loads((dest / MARKER).read_text())
    except (OSError, ValueError):
        return None


def fetch(source_text: str, dest: Path, checksums: Mapping[str, str], token: str | None, *,
          lock_timeout_s: float = 3600.0, progress: Progress = print) -> bool:
    """Make `dest` hold the checkpoint of `source_text`; False when it already did (nothing downloaded)."""
    source = parse_source(source_text)
    wanted = marker(source_text, checksums)
    if not dest.parent.is_dir():
        raise FetchError("bad_dest", "--dest", f"{dest.parent} does not exist (is the model volume mounted?)")
    with _locked(dest.parent / f".{dest.name}.lock", lock_timeout_s, progress):
        if _read_marker(dest) == wanted:
            progress(f"{dest} already holds {source_text}: nothing to download")
            return False
        staging = dest.parent / f".{dest.name}.partial"
        shutil.rmtree(staging, ignore_errors=True)  # a previous attempt killed midway
        staging.mkdir()
        try:
            if isinstance(source, HubSource):
                root, declared = staging, fetch_hub(source, staging, token, progress)
            else:
                root, declared = fetch_archive(source, staging, token, progress), {}
            expected = {**declared, **checksums}
            progress(f"verifying {len(expected)} checksums")
            verify(root, expected, progress)
            (root / MARKER).write_text(json.dumps(wanted))
            old = dest.parent / f".{dest.name}.old"
            shutil.rmtree(old, ignore_errors=True)
            if dest.exists():
                dest.rename(old)
            root.rename(dest)
            shutil.rmtree(old, ignore_errors=True)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    progress(f"fetched {source_text} into {dest}")
    return True


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="liveplex fetch-model", description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("source", help="hf://ORG/REPO[@REVISION] or an https:// .tar/.tar.gz/.tgz/.zip archive")
    parser.add_argument("--dest", required=True, type=Path,
                        help="the checkpoint directory to fill; its parent (the volume) must exist")
    parser.add_argument("--sha256", action="append", default=[], metavar="PATH=HEX",
                        help="expected SHA-256 of a file of the checkpoint (repeatable; default: none)")
    parser.add_argument("--lock-timeout-s", type=float, default=3600.0,
                        help="how long to wait for another pod's fetch into the same volume (default 3600)")
    return parser


def _report(error: FetchError) -> None:
    line = f"fetch-model: {error}"
    print(line, file=sys.stderr)
    with contextlib.suppress(OSError):
        if TERMINATION_LOG.exists():
            TERMINATION_LOG.write_text(line)


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        fetch(args.source, args.dest, parse_checksums(args.sha256), os.environ.get(TOKEN_ENV) or None,
              lock_timeout_s=args.lock_timeout_s, progress=lambda line: print(f"fetch-model: {line}", flush=True))
    except FetchError as error:
        _report(error)
        return 1
    return 0
