"""`liveplex fetch-model`: sources and checksums parsed with the parameter named, a repository
fetched from a loopback Hub (`HF_ENDPOINT`) once and only once, verified, all or nothing, gated
repositories and bad revisions refused with a reason, archives over real TLS unpacked safely."""

from __future__ import annotations

import contextlib
import io
import ssl
import subprocess
import sys
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from liveplex import fetch_model
from liveplex.fetch_model import ArchiveSource, FetchError, HubSource
from tests.support import hub

FILES = {"model.safetensors": b"w" * 4096, "tokenizer.model": b"spm", "voices/NATF0.pt": b"v" * 2000}
QUIET = lambda line: None  # noqa: E731


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> Iterator[hub.Hub]:
    with hub.serving(hub.Hub({"org/tiny": dict(FILES)})) as h:
        monkeypatch.setenv("HF_ENDPOINT", h.url)
        yield h


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and p.name != fetch_model.MARKER}


@pytest.mark.parametrize(("text", "parsed"), [
    ("hf://nvidia/personaplex-7b-v1", HubSource("nvidia/personaplex-7b-v1", "main")),
    ("hf://nvidia/personaplex-7b-v1@3f1c2a9", HubSource("nvidia/personaplex-7b-v1", "3f1c2a9")),
    ("hf://org/repo@refs/pr/3", HubSource("org/repo", "refs/pr/3")),
    ("https://w.example/ck.tar.gz?sig=1", ArchiveSource("https://w.example/ck.tar.gz?sig=1", "tar")),
    ("https://w.example/ck.zip", ArchiveSource("https://w.example/ck.zip", "zip")),
])
def test_sources_parse(text: str, parsed: object) -> None:
    assert fetch_model.parse_source(text) == parsed


@pytest.mark.parametrize("text", ["hf://org", "hf://org/repo/extra", "http://w.example/ck.tar", "https://w.example/ck",
                                  "s3://bucket/ck.tar", "/models/ck"])
def test_bad_sources_are_named(text: str) -> None:
    with pytest.raises(FetchError) as info:
        fetch_model.parse_source(text)
    assert (info.value.code, info.value.parameter) == ("bad_source", "source")


@pytest.mark.parametrize("item", ["model.safetensors", "=ab", "../x=" + "a" * 64, "/etc/x=" + "a" * 64,
                                  "x=" + "A" * 64, "x=abc"])
def test_bad_checksums_are_named(item: str) -> None:
    with pytest.raises(FetchError) as info:
        fetch_model.parse_checksums([item])
    assert (info.value.code, info.value.parameter) == ("bad_checksum", "--sha256")


def test_a_repository_is_fetched_verified_and_not_fetched_again(served: hub.Hub, tmp_path: Path) -> None:
    dest, sums = tmp_path / "ck", {"tokenizer.model": hub.sha256(b"spm")}
    lines: list[str] = []
    assert fetch_model.fetch("hf://org/tiny", dest, sums, None, progress=lines.append)
    assert _tree(dest) == FILES
    assert len(served.downloads) == len(FILES)
    assert any("file 3/3" in line for line in lines) and "verified 3/3: voices/NATF0.pt" in lines  # 2 LFS + given
    assert not fetch_model.fetch("hf://org/tiny", dest, sums, None, progress=QUIET)  # a second pod
    assert len(served.downloads) == len(FILES)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".ck.lock", "ck"]  # no staging left behind


def test_a_checksum_mismatch_fails_naming_the_file_and_leaves_the_old_checkpoint(served: hub.Hub,
                                                                               tmp_path: Path) -> None:
    dest = tmp_path / "ck"
    fetch_model.fetch("hf://org/tiny", dest, {}, None, progress=QUIET)
    with pytest.raises(FetchError) as info:
        fetch_model.fetch("hf://org/tiny", dest, {"tokenizer.model": "0" * 64}, None, progress=QUIET)
    assert (info.value.code, info.value.parameter) == ("checksum_mismatch", "--sha256 tokenizer.model")
    assert f"is {hub.sha256(b'spm')}, expected {'0' * 64}" in info.value.message
    assert _tree(dest) == FILES and sorted(p.name for p in tmp_path.iterdir()) == [".ck.lock", "ck"]
    with pytest.raises(FetchError, match="missing_file"):
        fetch_model.fetch("hf://org/tiny", dest, {"absent.bin": "0" * 64}, None, progress=QUIET)


def test_a_gated_repository_needs_the_token(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with hub.serving(hub.Hub({"org/tiny": dict(FILES)}, token="hf_secret")) as h:
        monkeypatch.setenv("HF_ENDPOINT", h.url)
        for token, why in ((None, "none was given"), ("hf_wrong", "this one has no access")):
            with pytest.raises(FetchError) as info:
                fetch_model.fetch("hf://org/tiny", tmp_path / "ck", {}, token, progress=QUIET)
            assert (info.value.code, info.value.parameter) == ("unauthorized", "tokenSecret")
            assert "accept its licence" in info.value.message and why in info.value.message
        assert fetch_model.fetch("hf://org/tiny", tmp_path / "ck", {}, "hf_secret", progress=QUIET)


@pytest.mark.parametrize(("source", "says"), [("hf://org/tiny@v9", "no revision 'v9'"),
                                              ("hf://org/other", "org/other does not exist")])
def test_missing_repositories_and_revisions_are_not_found(served: hub.Hub, tmp_path: Path, source: str,
                                                          says: str) -> None:
    with pytest.raises(FetchError) as info:
        fetch_model.fetch(source, tmp_path / "ck", {}, None, progress=QUIET)
    assert info.value.code == "not_found" and says in info.value.message
    assert list(tmp_path.iterdir()) == [tmp_path / ".ck.lock"]


def test_pods_starting_together_download_once(served: hub.Hub, tmp_path: Path) -> None:
    results: list[bool] = []
    threads = [threading.Thread(target=lambda: results.append(
        fetch_model.fetch("hf://org/tiny", tmp_path / "ck", {}, None, progress=QUIET))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(results) == [False, False, True] and len(served.downloads) == len(FILES)


def test_the_command_reports_one_reason_line_and_fails(served: hub.Hub, tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "liveplex.cli", "fetch-model", "hf://org/tiny@nope",
                           "--dest", str(tmp_path / "ck")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == \
        "fetch-model: not_found (source): org/tiny has no revision 'nope'"
    ok = subprocess.run([sys.executable, "-m", "liveplex.cli", "fetch-model", "hf://org/tiny",
                         "--dest", str(tmp_path / "ck"), "--sha256", f"tokenizer.model={hub.sha256(b'spm')}"],
                        capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert "fetch-model: fetched hf://org/tiny" in ok.stdout and _tree(tmp_path / "ck") == FILES


def test_the_dest_volume_must_exist(tmp_path: Path) -> None:
    with pytest.raises(FetchError) as info:
        fetch_model.fetch("hf://org/tiny", tmp_path / "absent" / "ck", {}, None, progress=QUIET)
    assert (info.value.code, info.value.parameter) == ("bad_dest", "--dest")


# Archives: unpacked safely, a lone top directory taken as the checkpoint, served over real TLS.

def _tar(members: dict[str, bytes], top: str = "") -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(f"{top}{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def test_archives_unpack_into_the_checkpoint_and_refuse_escapes(tmp_path: Path) -> None:
    (tmp_path / "a.tar.gz").write_bytes(_tar(FILES, top="personaplex-7b/"))
    (tmp_path / "a").mkdir()
    root = fetch_model.extract(tmp_path / "a.tar.gz", "tar", tmp_path / "a")
    assert root == tmp_path / "a" / "personaplex-7b" and _tree(root) == FILES
    (tmp_path / "b.tar.gz").write_bytes(_tar({"../evil": b"x"}))
    (tmp_path / "b").mkdir()
    with pytest.raises(FetchError, match="bad_archive"):
        fetch_model.extract(tmp_path / "b.tar.gz", "tar", tmp_path / "b")
    with zipfile.ZipFile(tmp_path / "c.zip", "w") as z:
        for name, data in FILES.items():
            z.writestr(name, data)
    (tmp_path / "c").mkdir()
    assert _tree(fetch_model.extract(tmp_path / "c.zip", "zip", tmp_path / "c")) == FILES
    (tmp_path / "d.zip").write_bytes(b"not a zip")
    (tmp_path / "d").mkdir()
    with pytest.raises(FetchError, match="bad_archive"):
        fetch_model.extract(tmp_path / "d.zip", "zip", tmp_path / "d")


@contextlib.contextmanager
def _https(tmp_path: Path, body: bytes, token: str) -> Iterator[str]:
    """A loopback HTTPS server (a self-signed certificate for 127.0.0.1) serving `body` to `token`."""
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            ok = self.headers.get("Authorization") == f"Bearer {token}"
            self.send_response(200 if ok else 403)
            self.send_header("Content-Length", str(len(body) if ok else 0))
            self.end_headers()
            if ok:
                self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_an_https_archive_is_fetched_with_its_bearer_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with _https(tmp_path, _tar(FILES, top="ck/"), "s3cret") as base:
        monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "cert.pem"))  # trust the loopback server only
        url, dest = f"{base}/weights/personaplex.tar.gz", tmp_path / "vol" / "ck"
        dest.parent.mkdir()
        with pytest.raises(FetchError) as info:
            fetch_model.fetch(url, dest, {}, None, progress=QUIET)
        assert (info.value.code, info.value.parameter) == ("unauthorized", "tokenSecret")
        assert fetch_model.fetch(url, dest, {"tokenizer.model": hub.sha256(b"spm")}, "s3cret", progress=QUIET)
    assert _tree(dest) == FILES and sorted(p.name for p in dest.parent.iterdir()) == [".ck.lock", "ck"]


def test_an_unreachable_hub_is_a_network_failure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from tests.support.pods import free_port
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    with pytest.raises(FetchError) as info:
        fetch_model.fetch("hf://org/tiny", tmp_path / "ck", {}, None, progress=QUIET)
    assert (info.value.code, info.value.parameter) == ("network", "source")
