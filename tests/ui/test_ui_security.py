"""Untrusted values render inert; nothing binds beyond loopback without a token."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from ui_support import make_client, need_ui_extra

from surefoot.errors import ConfigError


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A journal and store full of script, HTML and javascript: payloads, and a client."""
    import demo_journal

    d = tmp_path_factory.mktemp("hostile")
    db, store = f"sqlite:///{d / 'runs.db'}", f"sqlite:///{d / 'team.db'}"
    demo_journal.build_hostile(db, store)
    return {"db": db, "store": store, "client": make_client(db, store)}


def _pages(c: Any) -> dict[str, str]:
    from urllib.parse import quote, urlencode

    import demo_journal

    rid = quote(demo_journal.PAYLOADS["run_id"])
    urls = [
        "/runs",
        f"/run?id={rid}",
        "/run?id=gate-1",
        "/run?id=answer-x",
        "/state",
        f"/run/confirm?id={rid}&do=fork",
        "/streams",
        "/streams/confirm?"
        + urlencode({"stream": demo_journal.PAYLOADS["stream"], "consumer": "x", "seq": "1"}),
    ]
    return {u: c.get(u).text for u in urls}


class _Tags(HTMLParser):
    """Every element and attribute a browser would build from a page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attrs: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attrs += [(k, v or "") for k, v in attrs]


OUR_TAGS = {
    "html", "head", "meta", "title", "link", "body", "header", "span", "b", "nav", "a", "main",
    "footer", "h1", "h2", "h3", "p", "div", "section", "dl", "dt", "dd", "pre", "code",
    "details", "summary", "table", "thead", "tbody", "tr", "th", "td", "ul", "li", "form",
    "label", "input", "select", "option", "button", "textarea",
    "svg", "rect", "line", "text",  # the run's waterfall (inline SVG, attributes only)
}  # fmt: skip


def test_payloads_are_escaped_in_every_page(hostile: dict[str, Any]) -> None:
    """No payload builds an element or attribute; each one is on the page as escaped text."""
    pages = _pages(hostile["client"])
    for url, html in pages.items():
        p = _Tags()
        p.feed(html)
        assert p.tags <= OUR_TAGS, (url, p.tags - OUR_TAGS)
        assert not [k for k, _ in p.attrs if k.startswith("on")], url
        assert not [v for _, v in p.attrs if "javascript:" in v.lower()], url
        assert "id" not in {k for k, _ in p.attrs}, url  # <b id=injected> stayed text
    run_page = next(h for u, h in pages.items() if u.startswith("/run?id=%3C"))
    assert "&lt;script&gt;alert(&#39;result&#39;)&lt;/script&gt;" in run_page
    everything = "".join(pages.values())
    assert "&lt;img src=x onerror=" in everything
    assert "&lt;b id=injected&gt;run&lt;/b&gt;" in pages["/runs"]
    assert "javascript:alert(&#39;signal&#39;)" in pages["/run?id=gate-1"]
    assert (
        "&lt;iframe src=" in pages["/state"] and "[click](javascript:alert(2))" in pages["/state"]
    )
    assert "&lt;script&gt;alert(&#39;key&#39;)&lt;/script&gt;" in pages["/state"]
    streams = pages["/streams"]  # stream, group, message id, reason and payload: all text
    assert "<h2>&lt;script&gt;alert(&#39;stream&#39;)&lt;/script&gt; <span" in streams
    assert "<td>&lt;img src=x onerror=&#34;alert(&#39;group&#39;)&#34;&gt;</td>" in streams
    assert streams.count("&lt;a href=&#34;javascript:alert(4)&#34;&gt;message&lt;/a&gt;") >= 2
    assert (
        "?stream=%3Cscript%3Ealert%28%27stream%27%29%3C/script%3E&amp;consumer=%3Cimg%20src"
        in streams
    )
    answer = pages["/run?id=answer-x"]  # the marked answer's banner: its text and sources
    assert "<b>This answer is derived from untrusted data</b>: sources <code>&lt;img src=x " in (
        answer
    )
    assert "&lt;script&gt;alert(&#39;answer&#39;)&lt;/script&gt; [ok](javascript:alert(3))" in (
        answer
    )


def test_only_our_own_markup_makes_links(hostile: dict[str, Any]) -> None:
    """Every href on every page is one of the inspector's own relative URLs."""
    for url, html in _pages(hostile["client"]).items():
        for href in re.findall(r'href="([^"]*)"', html):
            assert href.startswith("/"), (url, href)


def test_every_response_forbids_script(hostile: dict[str, Any]) -> None:
    """Each page carries a CSP with no script source, nosniff and no framing."""
    r = hostile["client"].get("/runs")
    csp = r.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp
    assert "frame-ancestors 'none'" in csp
    assert r.headers["x-content-type-options"] == "nosniff"
    assert "<script" not in r.text


def test_other_host_headers_are_refused(hostile: dict[str, Any]) -> None:
    """A loopback server answers only its own Host names (DNS rebinding is refused)."""
    r = hostile["client"].get("/runs", headers={"host": "evil.example:8765"})
    assert r.status_code == 421


def test_token_is_required_when_set(hostile: dict[str, Any]) -> None:
    """With a token, a request without it gets 401; ?token= once sets a cookie and drops it."""
    c = make_client(hostile["db"], token="s3cret-token")
    r = c.get("/runs")
    assert r.status_code == 401 and "access token" in r.text
    assert c.get("/runs", headers={"authorization": "Bearer wrong"}).status_code == 401
    assert c.get("/runs", headers={"authorization": "Bearer s3cret-token"}).status_code == 200
    r = c.get("/runs?token=s3cret-token", follow_redirects=False)
    assert r.status_code == 303 and "token" not in r.headers["location"]
    assert c.get("/runs").status_code == 200  # the cookie carries it now


def test_serve_refuses_remote_without_flag_and_token() -> None:
    """A non-loopback host needs --allow-remote and a token; each refusal says what to do."""
    need_ui_extra()
    from surefoot.ui import Inspector, is_loopback, serve

    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.4")
    src = Inspector("sqlite://")
    with pytest.raises(ConfigError, match="needs --allow-remote and --token"):
        serve(src, host="0.0.0.0", port=1)
    with pytest.raises(ConfigError, match="needs an access token"):
        serve(src, host="0.0.0.0", port=1, allow_remote=True)
    src.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_cli_serves_loopback_and_says_so(hostile: dict[str, Any], tmp_path: Path) -> None:
    """`surefoot ui` binds 127.0.0.1, announces it, serves the runs page; stopped by pid."""
    need_ui_extra()
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "surefoot", "ui", "--db", hostile["db"], "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert f"http://127.0.0.1:{port}/ (loopback only)" in line
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/runs", timeout=5) as r:
                    body = r.read().decode()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        assert "gate-1" in body
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
        if proc.stdout:
            proc.stdout.close()


def test_cli_refuses_remote_host_without_token(hostile: dict[str, Any]) -> None:
    """`surefoot ui --host 0.0.0.0` exits 1 with one line naming the flag to pass."""
    r = subprocess.run(
        [sys.executable, "-m", "surefoot", "ui", "--db", hostile["db"], "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "SUREFOOT_UI_TOKEN"},
    )
    assert r.returncode == 1
    assert "surefoot: error: --host '0.0.0.0' is not a loopback address" in r.stderr


def test_cli_refuses_a_missing_store_file(hostile: dict[str, Any], tmp_path: Path) -> None:
    """A mistyped --store path is refused (exit 1) instead of creating an empty store."""
    missing = tmp_path / "nope.db"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "surefoot",
            "ui",
            "--db",
            hostile["db"],
            "--store",
            f"sqlite:///{missing}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1 and "no store at" in r.stderr
    assert not missing.exists()
