"""Payload codecs: the journal stores encoded values and hands back the same values."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from surefoot import FakeClock
from surefoot.durable import App, Worker, ZlibCodec
from surefoot.errors import ConfigError

SECRET = "the quick brown fox " * 20


class XorKey:
    """A keyed test codec (XOR with a SHA-256 key stream): NOT encryption, only a stand-in
    that a wrong key cannot read back."""

    def __init__(self, key: str) -> None:
        self.name = "xor-test"
        self.key = key

    def _stream(self, n: int) -> bytes:
        out = b""
        i = 0
        while len(out) < n:
            out += hashlib.sha256(f"{self.key}:{i}".encode()).digest()
            i += 1
        return out[:n]

    def encode(self, data: bytes) -> bytes:
        return bytes(a ^ b for a, b in zip(data, self._stream(len(data)), strict=True))

    decode = encode


def _register(app: App) -> None:
    @app.step
    async def shout(text: str) -> str:
        return text.upper()

    @app.workflow
    async def kid(text: str) -> str:
        return await shout(text)

    @app.workflow
    async def flow(text: str) -> dict[str, Any]:
        loud = await app.child(kid, text)
        note = await app.wait_for("note")
        return {"loud": loud, "note": note}


def _raw(app: App) -> list[str]:
    d: Any = app.journal.wrapped.d
    out = [r[0] for r in d.read("SELECT args FROM durable_runs")]
    out += [r[0] for r in d.read("SELECT result FROM durable_runs WHERE result IS NOT NULL")]
    out += [r[0] for r in d.read("SELECT result FROM durable_steps WHERE result IS NOT NULL")]
    out += [r[0] for r in d.read("SELECT payload FROM durable_signals WHERE payload <> 'null'")]
    return out


@pytest.mark.parametrize("make", [ZlibCodec, lambda: XorKey("k1")])
def test_values_are_stored_encoded_and_read_back(db_url: str, clock: FakeClock, make: Any) -> None:
    """Arguments, step results, child results, signal payloads and the run's result are
    stored encoded (no plaintext in the journal) and come back unchanged."""
    codec = make()
    app = App(db_url, clock=clock, poll=0.01, payload_codec=codec)
    _register(app)
    try:
        h = app.enqueue("flow", SECRET, run_id="r")
        w = Worker(app)
        for _ in range(200):  # until the parent has its child's result and waits
            w.run_once(timeout=10)
            run = app.show("r").run
            if run.status == "sleeping" and run.waiting_for == "note":
                break
        app.signal("r", "note", {"secret": SECRET})
        for _ in range(50):
            w.run_once(timeout=10)
            if h.status() == "succeeded":
                break
        assert h.result(timeout=5) == {"loud": SECRET.upper(), "note": {"secret": SECRET}}
        assert app.show("r").run.args == [SECRET]
        stored = _raw(app)
        assert len(stored) >= 6
        assert all(v.startswith(f"sfc:{codec.name}:") for v in stored), stored
        assert not any("quick" in v or "QUICK" in v for v in stored)
    finally:
        app.close()


def test_a_wrong_key_is_a_clear_error(db_url: str, clock: FakeClock) -> None:
    """Reading with another key (or another codec) fails with a ConfigError that says so."""
    a = App(db_url, clock=clock, payload_codec=XorKey("right"))
    _register(a)
    a.enqueue("flow", SECRET, run_id="r")
    a.close()
    b = App(db_url, clock=clock, payload_codec=XorKey("wrong"))
    try:
        with pytest.raises(ConfigError, match="same codec and key"):
            b.show("r")
    finally:
        b.close()
    c = App(db_url, clock=clock, payload_codec=ZlibCodec())
    try:
        with pytest.raises(ConfigError, match="xor-test"):
            c.show("r")
    finally:
        c.close()


def test_values_stored_before_the_codec_stay_readable(db_url: str, clock: FakeClock) -> None:
    """A run journalled without a codec is read as it is once a codec is set."""

    plain = App(db_url, clock=clock)

    @plain.workflow
    def echo(x: str) -> str:
        return x

    plain.start(echo, "hello", run_id="old").result(timeout=5)
    plain.close()
    coded = App(db_url, clock=clock, payload_codec=ZlibCodec())
    try:
        assert coded.show("old").run.result == "hello"
    finally:
        coded.close()


def test_a_bad_codec_is_refused() -> None:
    """An object without encode/decode, or a name with ':', is a ConfigError."""
    with pytest.raises(ConfigError, match="payload_codec"):
        App("sqlite://", payload_codec=object())
    bad = XorKey("k")
    bad.name = "a:b"
    with pytest.raises(ConfigError, match="':'"):
        App("sqlite://", payload_codec=bad)
    with pytest.raises(ConfigError, match="level"):
        ZlibCodec(level=0)
