"""What the fault proxy keeps per fault and per connection: an armed fault, the upstream
server, and one proxied connection with its framers and transaction state."""

from __future__ import annotations

import random
import re
import socket
import struct
from typing import Any
from urllib.parse import urlsplit

from ..errors import ConfigError
from ._framing import PgClient, PgServer, RespClient, RespServer

__all__ = ["PROTOCOLS", "Arm", "Connection", "target"]

PROTOCOLS = ("postgres", "redis", "raw")
_SCHEMES = {"postgresql": "postgres", "postgres": "postgres", "redis": "redis"}
_PORTS = {"postgres": 5432, "redis": 6379}


class Arm:
    """A fault armed for ``times`` more firings (None: unlimited), each with ``probability``."""

    def __init__(
        self,
        times: int | None,
        probability: float,
        what: str,
        *,
        implicit: bool = False,
        matching: str | None = None,
    ) -> None:
        if times is not None and (
            isinstance(times, bool) or not isinstance(times, int) or times < 1
        ):
            raise ConfigError(f"{what}: times must be an integer >= 1 or None, got {times!r}")
        if (
            isinstance(probability, bool)
            or not isinstance(probability, int | float)
            or not 0 < probability <= 1
        ):
            raise ConfigError(f"{what}: probability must be in (0, 1], got {probability!r}")
        self.times, self.probability = times, float(probability)
        self.implicit = implicit
        self.matching: re.Pattern[bytes] | None = None
        if matching is not None:
            if not isinstance(matching, str):
                raise ConfigError(
                    f"{what}: matching must be a regular expression, got {matching!r}"
                )
            try:
                self.matching = re.compile(matching.encode(), re.IGNORECASE | re.DOTALL)
            except re.error as exc:
                raise ConfigError(
                    f"{what}: matching={matching!r} is not a regular expression: {exc}"
                ) from exc

    def fire(self, rng: random.Random) -> bool:
        if self.times == 0 or rng.random() >= self.probability:
            return False
        if self.times is not None:
            self.times -= 1
        return True


def target(upstream: Any, protocol: str | None) -> tuple[str, int, str, str | None]:
    """(host, port, protocol, url) from a URL, ``"host:port"`` or ``(host, port)``."""
    url = None
    if isinstance(upstream, str) and "://" in upstream:
        parts = urlsplit(upstream)
        scheme = _SCHEMES.get(parts.scheme)
        if scheme is None:
            raise ConfigError(
                f"FaultProxy speaks postgresql:// and redis:// URLs, got scheme {parts.scheme!r}; "
                "pass (host, port) with protocol='raw' for anything else"
            )
        protocol = protocol or scheme
        host, port, url = parts.hostname or "127.0.0.1", parts.port or _PORTS[scheme], upstream
    elif isinstance(upstream, str) and upstream.rpartition(":")[2].isdigit():
        host, _, p = upstream.rpartition(":")
        port = int(p)
    elif isinstance(upstream, tuple) and len(upstream) == 2:
        host, port = upstream
    else:
        raise ConfigError(
            "FaultProxy needs the server as a URL ('postgresql://…', 'redis://…'), "
            f"'host:port' or (host, port), got {upstream!r}"
        )
    protocol = protocol or "raw"
    if protocol not in PROTOCOLS:
        raise ConfigError(f"protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    return host, int(port), protocol, url


class Connection:
    """One proxied connection: both streams, the framers, and what is armed on it."""

    def __init__(self, protocol: str, client: tuple[Any, Any]) -> None:
        self.creader, self.cwriter = client
        self.sreader: Any = None
        self.swriter: Any = None
        self.up: PgClient | RespClient | None = None
        self.down: PgServer | RespServer | None = None
        if protocol == "postgres":
            self.up, self.down = PgClient(), PgServer()
        elif protocol == "redis":
            self.up, self.down = RespClient(), RespServer()
        self.expected = 0  # replies the client's messages so far will get
        self.drop_at: int | None = None  # cut once this many replies arrived, swallowing them
        self.in_block = False  # a transaction block (BEGIN, MULTI) the client opened
        self.block_hit = False  # a statement in it matched the armed drop's pattern

    def replies(self) -> int:
        d = self.down
        return d.ready if isinstance(d, PgServer) else d.replies if isinstance(d, RespServer) else 0

    def in_transaction(self) -> bool:
        if isinstance(self.down, PgServer):
            return self.in_block or self.down.status in ("T", "E")
        return self.in_block if self.down is not None else True

    def abort(self, *, rst: bool) -> None:
        for w in (self.cwriter, self.swriter):
            if w is None or w.transport.is_closing():
                continue
            sock = w.transport.get_extra_info("socket")
            if rst and sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            w.transport.abort()
