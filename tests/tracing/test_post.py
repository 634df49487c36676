"""The span writer's OTLP/HTTP post (exai.tracing.post) against collectors on loopback:
one kept connection, a connection the collector closed, retries, TLS and a proxy."""

from __future__ import annotations

import gzip
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from exai.tracing.post import Poster, PostOptions


class _Collector:
    """Answers each POST with the next status of ``answers`` (200 once they run out),
    keeping what arrived: the path, the headers, the body and the client's port."""

    def __init__(self, answers: list[tuple[int, dict[str, str]]] | None = None,
                 keep_alive: bool = True, tls: Any = None) -> None:  # fmt: skip
        self.answers = list(answers or [])
        self.posts: list[tuple[str, dict[str, str], bytes, int]] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                collector.posts.append((self.path, dict(self.headers), body,
                                        self.client_address[1]))  # fmt: skip
                status, headers = collector.answers.pop(0) if collector.answers else (200, {})
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "0")
                self.end_headers()
                if not keep_alive:
                    # Closed after answering, without saying so: an idle timeout's effect.
                    self.close_connection = True

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def collectors() -> Iterator[list[_Collector]]:
    made: list[_Collector] = []
    yield made
    for c in made:
        c.close()


def _poster(url: str, **options: Any) -> Poster:
    return Poster(PostOptions(url=url, **options), "exai-test/1")


def _deadline(s: float = 5.0) -> float:
    return time.monotonic() + s


def test_posts_go_over_one_kept_connection_with_the_collectors_headers(collectors, monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    c = _Collector()
    collectors.append(c)
    poster = _poster(f"http://127.0.0.1:{c.port}/v1/traces", headers={"x-team": "a b"},
                     compression="gzip")  # fmt: skip
    try:
        assert all(poster.post(f"batch {i}".encode(), _deadline()) for i in range(3))
    finally:
        poster.close()
    assert [gzip.decompress(body) for _, _, body, _ in c.posts] == [b"batch 0", b"batch 1",
                                                                    b"batch 2"]  # fmt: skip
    path, headers, _, _ = c.posts[0]
    assert path == "/v1/traces"
    assert headers["Content-Type"] == "application/x-protobuf"
    assert headers["Content-Encoding"] == "gzip"
    assert headers["User-Agent"] == "exai-test/1"
    assert headers["x-team"] == "a b"
    assert len({port for *_, port in c.posts}) == 1


def test_a_connection_the_collector_closed_is_opened_again_and_nothing_is_sent_twice(
    collectors,
):
    c = _Collector(keep_alive=False)
    collectors.append(c)
    poster = _poster(f"http://127.0.0.1:{c.port}/v1/traces")
    try:
        for i in range(3):
            assert poster.post(f"batch {i}".encode(), _deadline())
            time.sleep(0.05)  # the collector's close reaches this end
    finally:
        poster.close()
    assert [body for _, _, body, _ in c.posts] == [b"batch 0", b"batch 1", b"batch 2"]
    assert len({port for *_, port in c.posts}) == 3


def test_a_busy_collector_is_retried_after_what_it_says_and_a_refusal_is_final(collectors):
    c = _Collector(answers=[(503, {"Retry-After": "0"}), (429, {"Retry-After": "0"}),
                            (200, {}), (400, {})])  # fmt: skip
    collectors.append(c)
    poster = _poster(f"http://127.0.0.1:{c.port}/v1/traces")
    try:
        assert poster.post(b"first", _deadline())
        assert poster.last_error is None
        assert not poster.post(b"second", _deadline())
        assert poster.last_error == "HTTP 400"
    finally:
        poster.close()
    assert [body for _, _, body, _ in c.posts] == [b"first", b"first", b"first", b"second"]


def test_a_closed_port_fails_the_post_within_its_deadline(collectors):
    c = _Collector()
    port = c.port
    c.close()
    poster = _poster(f"http://127.0.0.1:{port}/v1/traces")
    start = time.monotonic()
    assert not poster.post(b"lost", _deadline(1.5))
    assert time.monotonic() - start < 3.0
    assert poster.last_error == "ConnectionRefusedError"


def test_tls_trusts_the_collectors_ca_when_given_and_certifis_bundle_otherwise(
    collectors, tmp_path: Path
):
    import ssl

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=tmp_path, check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", "1", "-subj", "/CN=exai test CA")  # fmt: skip
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "srv.key", "-out", "srv.csr",
        "-subj", "/CN=localhost")  # fmt: skip
    (tmp_path / "ext.cnf").write_text("subjectAltName=DNS:localhost\n")
    run("x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "srv.pem", "-days", "1", "-extfile", "ext.cnf")  # fmt: skip
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(tmp_path / "srv.pem", tmp_path / "srv.key")
    c = _Collector(tls=tls)
    collectors.append(c)
    url = f"https://localhost:{c.port}/v1/traces"
    trusting = _poster(url, certificate=str(tmp_path / "ca.pem"))
    stranger = _poster(url)
    try:
        assert trusting.post(b"over tls", _deadline())
        assert not stranger.post(b"untrusted", _deadline(1.0))
    finally:
        trusting.close()
        stranger.close()
    assert [body for _, _, body, _ in c.posts] == [b"over tls"]


def test_a_collector_behind_a_proxy_is_posted_to_through_it(collectors, monkeypatch):
    proxy = _Collector()
    collectors.append(proxy)
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{proxy.port}")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    poster = _poster("http://collector.invalid:4318/v1/traces")
    try:
        assert poster.post(b"via the proxy", _deadline())
    finally:
        poster.close()
    [(path, _, body, _)] = proxy.posts
    assert (path, body) == ("http://collector.invalid:4318/v1/traces", b"via the proxy")
