"""FakeProvider: a local HTTP server speaking the OpenAI and Anthropic wire formats, failing on cue.

Standard library only (``http.server`` in threads). It binds 127.0.0.1 on a free port, answers
``POST /v1/chat/completions`` (OpenAI and compatible servers) and ``POST /v1/messages``
(Anthropic), streaming included, and counts what it receives. Faults are scripted per request,
in order; when the script is empty it answers normally.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ..errors import ConfigError
from ..llm import count_tokens
from ._faults import DropBeforeReply, DropMidReply, Fault, Reply, Status, StreamError
from ._record import RequestLog
from ._wire import anthropic_events, anthropic_message, error_body, openai_chunks, openai_reply

__all__ = ["FakeProvider", "Received"]

_SECRET_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "proxy-authorization"})
_WORDS = tuple(
    [
        "plan",
        "step",
        "tool",
        "result",
        "check",
        "state",
        "note",
        "model",
        "token",
        "answer",
        "draft",
    ]
)


@dataclass(frozen=True, slots=True)
class Received:
    """One request the server received (keys are never kept: auth headers are dropped).

    Attributes:
        number: 1-based arrival order. api: ``openai`` or ``anthropic``. path: the URL path.
        model: the model asked for. stream: a streaming request. messages: what was sent.
        idempotency_key: the ``Idempotency-Key`` header, if any. fault: what was done
            (``ok``, ``429``, ``drop-before``, …). headers: the other request headers
            (lower-case names).
        retry_count: the SDK's ``x-stainless-retry-count`` header (its own retries), if sent.
        status: the HTTP status answered (200 for a reply, a stream, or one cut short; None
            when the connection was closed before a status line). time: when it arrived
            (seconds since the epoch).
    """

    number: int
    api: str
    path: str
    model: str
    stream: bool
    messages: list[Any]
    idempotency_key: str | None
    fault: str
    headers: dict[str, str] = field(default_factory=dict)
    retry_count: int | None = None
    status: int | None = None
    time: float = 0.0


def _status_of(f: Fault, stream: bool) -> int | None:
    if isinstance(f, Status):
        return f.status
    if isinstance(f, DropBeforeReply):
        return None
    if isinstance(f, StreamError) and not stream:
        return f.status()
    return 200


def _fault_name(f: Fault) -> str:
    if isinstance(f, Status):
        return str(f.status) if f.code is None else f"{f.status}:{f.code}"
    if isinstance(f, Reply):
        return "slow" if f.delay else "ok"
    return {DropBeforeReply: "drop-before", DropMidReply: "drop-during"}.get(
        type(f), "stream-error"
    )


class FakeProvider:
    """A provider that fails on cue, for integration tests with the real SDKs.

    ::

        with FakeProvider() as fp:
            fp.script(rate_limited(retry_after=0.01), overloaded())   # then normal replies
            client = openai.OpenAI(base_url=fp.openai_url, api_key="test", max_retries=0)
            ...
            assert fp.count() == 3

    Args:
        port: the port (0: a free one, chosen by the OS).
        responder: ``callable(api, messages) -> str`` for the reply text (default: a short
            deterministic text from the messages).
        headers: extra headers on every successful reply (``x-ratelimit-*`` for instance).
        model: the model name ``GET /v1/models`` reports.
        record: a file to append one JSON line per request to, flushed before the reply is
            sent (fields of ``Received`` but the messages, the caller's ``x-`` headers and
            the last message's text); None: no file.
        tokens_per_second: pace a streamed reply's text pieces (one word each) at this
            rate, as a model generating them would (None: as fast as the socket takes them).

    Attributes:
        url: ``http://127.0.0.1:PORT``. openai_url: ``url + "/v1"`` (OpenAI's base_url).
        anthropic_url: ``url`` (Anthropic's base_url).
        received: every request, in arrival order. completed: replies sent in full.
        answered: the ``number`` of each request whose reply was sent in full.
        billed: replies whose tokens the "model" produced (full, cut mid-reply, or a stream
            that erred after content): what a real provider would charge for.
    """

    def __init__(
        self,
        port: int = 0,
        *,
        responder: Callable[[str, list[Any]], str] | None = None,
        headers: dict[str, str] | None = None,
        model: str = "fake-provider-model",
        record: str | os.PathLike[str] | None = None,
        tokens_per_second: float | None = None,
    ) -> None:
        if not isinstance(port, int) or not 0 <= port <= 65535:
            raise ConfigError(f"port must be 0 (a free port) or 1-65535, got {port!r}")
        self.record = None if record is None else os.fspath(record)
        self._log: RequestLog | None = None
        pace = tokens_per_second
        if pace is not None and (
            isinstance(pace, bool) or not isinstance(pace, int | float) or not pace > 0
        ):
            raise ConfigError(f"tokens_per_second must be a number > 0 or None, got {pace!r}")
        self.tokens_per_second = pace
        self.responder = responder
        self.extra_headers = dict(headers or {})
        self.model = model
        self.received: list[Received] = []
        self.completed = 0
        self.billed = 0
        self.answered: list[int] = []
        self._port = port
        self._closing = threading.Event()
        self._script: deque[Fault] = deque()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> FakeProvider:
        """Bind 127.0.0.1 and serve in a daemon thread. Returns self."""
        if self._server is not None:
            return self
        self._closing.clear()
        handler = type("_BoundHandler", (_Handler,), {"provider": self})
        server = _Server(("127.0.0.1", self._port), handler)
        if self.record is not None:
            try:
                self._log = RequestLog(self.record)
            except BaseException:
                server.server_close()
                raise
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving and release the port."""
        server, self._server = self._server, None
        self._closing.set()  # slow replies stop waiting
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        log, self._log = self._log, None
        if log is not None:
            log.close()

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def port(self) -> int:
        """The bound port (after ``start``)."""
        if self._server is None:
            raise ConfigError("the FakeProvider is not started; use it as `with FakeProvider():`")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_url(self) -> str:
        """The ``base_url`` for OpenAI-compatible clients (``…/v1``)."""
        return self.url + "/v1"

    @property
    def anthropic_url(self) -> str:
        """The ``base_url`` for Anthropic clients."""
        return self.url

    # -- the script and the counts -----------------------------------------------------

    def script(self, *faults: Fault | Iterable[Fault]) -> FakeProvider:
        """Queue what the next requests get, in order (after the script: normal replies)."""
        with self._lock:
            for f in faults:
                if isinstance(f, Reply | Status | DropBeforeReply | DropMidReply | StreamError):
                    self._script.append(f)
                else:
                    self._script.extend(f)
        return self

    def pending(self) -> int:
        """Scripted faults not used yet."""
        with self._lock:
            return len(self._script)

    def count(self, api: str | None = None, *, fault: str | None = None) -> int:
        """Requests received (of one api, and/or that got one fault, when given)."""
        with self._lock:
            return sum(
                1
                for r in self.received
                if (api is None or r.api == api) and (fault is None or r.fault == fault)
            )

    def reset(self) -> None:
        """Forget the counts and the script."""
        with self._lock:
            self.received.clear()
            self.answered.clear()
            self._script.clear()
            self.completed = 0
            self.billed = 0

    def _next(
        self, api: str, path: str, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[Fault, int]:
        with self._lock:
            fault = self._script.popleft() if self._script else Reply()
            retry = headers.get("x-stainless-retry-count")
            stream = bool(body.get("stream"))
            self.received.append(
                Received(
                    number=len(self.received) + 1,
                    api=api,
                    path=path,
                    model=str(body.get("model", "")),
                    stream=stream,
                    messages=list(body.get("messages") or []),
                    idempotency_key=headers.get("idempotency-key"),
                    fault=_fault_name(fault),
                    headers={k: v for k, v in headers.items() if k not in _SECRET_HEADERS},
                    retry_count=int(retry) if retry and retry.isdigit() else None,
                    status=_status_of(fault, stream),
                    time=round(time.time(), 6),
                )
            )
            if self._log is not None:
                self._log.write(self.received[-1])
            return fault, len(self.received)

    def _tally(self, number: int, *, completed: bool = False, billed: bool = False) -> None:
        with self._lock:
            self.completed += completed
            self.billed += billed
            if completed:
                self.answered.append(number)

    def _untally(self, number: int) -> None:
        with self._lock:  # the last write of a counted reply failed: it was not sent
            self.completed -= 1
            self.billed -= 1
            self.answered.remove(number)

    def text_for(self, api: str, messages: list[Any]) -> str:
        """The reply text for ``messages`` (the responder's, or a deterministic default)."""
        if self.responder is not None:
            return str(self.responder(api, messages))
        blob = json.dumps(messages, sort_keys=True, default=str)
        rng = random.Random(int.from_bytes(hashlib.sha256(blob.encode()).digest()[:8], "big"))
        return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 14))) + "."

    def __repr__(self) -> str:
        where = self.url if self._server is not None else "stopped"
        return f"FakeProvider({where}, received={len(self.received)}, pending={self.pending()})"


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that closes its keep-alive connection (or times out) is normal here;
        # anything else is a bug of the fake and keeps its traceback
        exc = sys.exc_info()[1]
        if not isinstance(exc, OSError):
            super().handle_error(request, client_address)


def _chunks(text: str) -> list[str]:
    words = text.split(" ")
    return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]


class _Handler(BaseHTTPRequestHandler):
    provider: FakeProvider
    protocol_version = "HTTP/1.1"
    # headers and body go out in two writes: without TCP_NODELAY, Nagle plus the client's
    # delayed ACK add ~40 ms to every reply on loopback (measured: 44 ms -> well under 1 ms)
    disable_nagle_algorithm = True
    server_version = "surefoot-fake-provider"

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read the counts
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            model = self.provider.model
            data = {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "x"}]}
            self._send_json(200, data, {})
        else:
            self._send_json(404, error_body("openai", 404, "not_found_error", None, "no route"), {})

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        if path.endswith("/chat/completions"):
            api = "openai"
        elif path.endswith("/messages"):
            api = "anthropic"
        else:
            self._read_body()
            self._send_json(404, error_body("openai", 404, "not_found_error", None, path), {})
            return
        try:
            body = json.loads(self._read_body() or b"{}")
        except ValueError:
            self._send_json(
                400, error_body(api, 400, "invalid_request_error", None, "bad JSON"), {}
            )
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        fault, number = self.provider._next(api, path, body, headers)
        try:
            self._serve(api, body, fault, number)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True  # the client gave up (a timeout): nothing to send

    def _read_body(self) -> bytes:
        n = int(self.headers.get("content-length") or 0)
        return self.rfile.read(n) if n else b""

    def _serve(self, api: str, body: dict[str, Any], fault: Fault, n: int) -> None:
        delay = getattr(fault, "delay", 0.0)
        if delay and self.provider._closing.wait(delay):
            self._drop()  # the server is closing: give up on the slow reply
            return
        if isinstance(fault, DropBeforeReply):
            self._drop()
            return
        stream = bool(body.get("stream"))
        if isinstance(fault, Status):
            err = error_body(api, fault.status, fault.kind(), fault.code, fault.message)
            self._send_json(fault.status, err, fault.headers())
            return
        if isinstance(fault, StreamError) and not stream:
            status = fault.status()
            self._send_json(status, error_body(api, status, fault.error_type, None, None), {})
            return
        messages = list(body.get("messages") or [])
        reply = fault if isinstance(fault, Reply) else Reply()
        text = reply.text if reply.text is not None else self.provider.text_for(api, messages)
        system = body.get("system")
        prompt = sum(
            count_tokens(str(m.get("content", ""))) + 3 for m in messages if isinstance(m, dict)
        )
        prompt += count_tokens(str(system)) if system else 0
        model = str(body.get("model", ""))
        usage = (prompt, count_tokens(text), reply.cached_tokens)
        headers = {**self.provider.extra_headers, **reply.headers}
        if not stream:
            build = openai_reply if api == "openai" else anthropic_message
            data = build(n, model, text, usage)
            if isinstance(fault, DropMidReply):
                raw = json.dumps(data).encode()
                self._start(200, "application/json", headers, length=len(raw))
                self.wfile.write(raw[: len(raw) // 2])
                self.provider._tally(n, billed=True)
                self._drop()
                return
            # counted before the last write, so a client never sees a reply the counts miss
            self.provider._tally(n, completed=True, billed=True)
            try:
                self._send_json(200, data, headers)
            except OSError:
                self.provider._untally(n)
                raise
            return
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        events: Iterator[tuple[bytes, bool]]
        if api == "openai":
            events = openai_chunks(n, model, _chunks(text), usage, include_usage)
        else:
            events = anthropic_events(n, model, _chunks(text), usage)
        self._start(200, "text/event-stream", headers, length=None)
        cut = fault.after if isinstance(fault, DropMidReply | StreamError) else None
        sent = 0
        whole = list(events)
        pace = self.provider.tokens_per_second
        step = 1.0 / pace if pace else 0.0
        due = time.perf_counter()
        for i, (event, is_content) in enumerate(whole):
            if step and is_content:  # the next piece is due one step after the last one
                due += step
                if (late := due - time.perf_counter()) > 0 and self.provider._closing.wait(late):
                    self._drop()
                    return
            if cut is not None and is_content and sent >= cut:
                break
            if cut is None and i == len(whole) - 1:
                self.provider._tally(n, completed=True, billed=True)  # before the last event
                try:
                    self._chunk(event)
                    self._chunk(b"")
                except OSError:
                    self.provider._untally(n)
                    raise
                return
            self._chunk(event)
            sent += is_content
        if isinstance(fault, DropMidReply):
            self.provider._tally(n, billed=True)
            self._drop()
            return
        if isinstance(fault, StreamError):
            kind = fault.error_type
            err = error_body(api, fault.status(), kind, None, None)
            self.provider._tally(n, billed=sent > 0)
            self._chunk(f"event: error\ndata: {json.dumps(err)}\n\n".encode())
            self._chunk(b"")

    def _start(
        self, status: int, ctype: str, headers: dict[str, str], *, length: int | None
    ) -> None:
        self.send_response(status)
        self.send_header("content-type", ctype)
        if length is None:
            self.send_header("transfer-encoding", "chunked")
        else:
            self.send_header("content-length", str(length))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _send_json(self, status: int, data: Any, headers: dict[str, str]) -> None:
        raw = json.dumps(data).encode()
        self._start(status, "application/json", headers, length=len(raw))
        self.wfile.write(raw)

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
