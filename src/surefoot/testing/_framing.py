"""Just enough of the PostgreSQL and Redis wire protocols to find commits and count replies.

The fault proxy forwards bytes unchanged; these framers split each direction into whole
messages so it knows which client message is a COMMIT (PostgreSQL: a simple ``Query`` whose
last statement is COMMIT / END, or an ``Execute`` of a statement ``Parse``\\ d from one) or a
transaction / script (Redis: ``EXEC``, ``EVAL``, ``EVALSHA``, ``FCALL``), and when the
server's reply to it has arrived (PostgreSQL: one ``ReadyForQuery`` per ``Query`` or
``Sync``; Redis: one reply per command).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

__all__ = ["Message", "PgClient", "PgServer", "RespClient", "RespServer"]

SSL_REQUEST, GSSENC_REQUEST, CANCEL_REQUEST = 80877103, 80877104, 80877102
_COMMIT = re.compile(
    rb"(?:^|;)\s*(?:COMMIT|END)(?:\s+(?:WORK|TRANSACTION|PREPARED\s+'[^']*'))?\s*;?\s*$",
    re.IGNORECASE,
)
_BEGIN = re.compile(rb"^\s*(?:BEGIN|START\s+TRANSACTION)\b", re.IGNORECASE)
_ROLLBACK = re.compile(
    rb"(?:^|;)\s*(?:ROLLBACK|ABORT)(?:\s+(?:WORK|TRANSACTION|PREPARED\s+'[^']*'))?\s*;?\s*$",
    re.IGNORECASE,
)
REDIS_TXN = frozenset(
    {b"EXEC", b"EVAL", b"EVALSHA", b"EVAL_RO", b"EVALSHA_RO", b"FCALL", b"FCALL_RO"}
)


@dataclass(slots=True)
class Message:
    """One whole message: its bytes and what the proxy needs to know about it.

    ``kind``: PostgreSQL's type byte as a letter (``Q``, ``P``, ``S`` …; ``startup``,
    ``negotiate`` for an SSL / GSS request, ``cancel``), or a Redis command's upper-cased
    name. ``commit``: a PostgreSQL commit or a Redis transaction / script. ``replies``: the
    replies this message will get (PostgreSQL: a ``ReadyForQuery`` for ``Q`` and ``S``).
    ``text``: the SQL a ``Q`` or ``E`` runs (for an ``E``, the statement it executes and
    then the parameters it was bound with, as sent), or a Redis command as sent.
    ``begin`` / ``rollback``: it opens / abandons a transaction block.
    """

    raw: bytes
    kind: str
    commit: bool = False
    replies: int = 0
    text: bytes = b""
    begin: bool = False
    rollback: bool = False


def is_commit(query: bytes) -> bool:
    """True when a query's last statement is COMMIT or END (a commit, in PostgreSQL)."""
    return bool(_COMMIT.search(query.rstrip(b"\x00")))


def _statement(raw: bytes, kind: str, text: bytes, replies: int = 0) -> Message:
    text = text.rstrip(b"\x00")
    return Message(
        raw,
        kind,
        commit=is_commit(text),
        replies=replies,
        text=text,
        begin=bool(_BEGIN.search(text)),
        rollback=bool(_ROLLBACK.search(text)),
    )


class PgClient:
    """Splits what a PostgreSQL client sends into messages, tracking prepared COMMITs."""

    def __init__(self) -> None:
        self.buf = b""
        self.startup = True
        self.raw = False  # a cancel request: nothing more to parse
        self.statements: dict[bytes, bytes] = {}  # statement name -> its SQL
        self.portals: dict[bytes, bytes] = {}  # portal name -> its SQL and parameters

    def feed(self, data: bytes) -> list[Message]:
        """The whole messages completed by ``data`` (a partial one waits for more)."""
        self.buf += data
        out = []
        while True:
            if self.raw:
                if self.buf:
                    out.append(Message(self.buf, "raw"))
                    self.buf = b""
                return out
            if self.startup:
                if len(self.buf) < 8:
                    return out
                n, code = struct.unpack("!II", self.buf[:8])
                if len(self.buf) < n:
                    return out
                raw, self.buf = self.buf[:n], self.buf[n:]
                if code in (SSL_REQUEST, GSSENC_REQUEST):
                    out.append(Message(raw, "negotiate"))
                elif code == CANCEL_REQUEST:
                    out.append(Message(raw, "cancel"))
                    self.raw = True
                else:
                    out.append(Message(raw, "startup"))
                    self.startup = False
                continue
            if len(self.buf) < 5:
                return out
            n = struct.unpack("!I", self.buf[1:5])[0]
            if len(self.buf) < 1 + n:
                return out
            raw, self.buf = self.buf[: 1 + n], self.buf[1 + n :]
            out.append(self._typed(raw))

    def _typed(self, raw: bytes) -> Message:
        kind, body = chr(raw[0]), raw[5:]
        if kind == "Q":
            return _statement(raw, kind, body, replies=1)
        if kind == "S":
            return Message(raw, kind, replies=1)
        if kind == "P":  # name\0 query\0 …
            name, _, rest = body.partition(b"\x00")
            self.statements[name] = rest.partition(b"\x00")[0]
        elif kind == "B":  # portal\0 statement\0 formats, parameters, result formats
            portal, _, rest = body.partition(b"\x00")
            name, _, params = rest.partition(b"\x00")
            self.portals[portal] = self.statements.get(name, b"") + b"\x00" + params
        elif kind == "E":  # portal\0 max rows
            sql, _, params = self.portals.get(body.partition(b"\x00")[0], b"").partition(b"\x00")
            msg = _statement(raw, kind, sql)
            msg.text = sql + b" " + params if params else sql
            return msg
        return Message(raw, kind)


class PgServer:
    """Counts a PostgreSQL server's ``ReadyForQuery`` messages and its transaction status."""

    def __init__(self) -> None:
        self.buf = b""
        self.ready = 0
        self.status = "I"  # I idle, T in a transaction, E in a failed transaction

    def feed(self, data: bytes) -> None:
        """Account for ``data`` (whole messages only; a partial one waits)."""
        self.buf += data
        at = 0
        while len(self.buf) - at >= 5:
            n = struct.unpack("!I", self.buf[at + 1 : at + 5])[0]
            if len(self.buf) - at < 1 + n:
                break
            if self.buf[at] == ord("Z"):
                self.ready += 1
                self.status = chr(self.buf[at + 5])
            at += 1 + n
        self.buf = self.buf[at:]


class RespClient:
    """Splits what a Redis client sends into commands (RESP arrays, or inline lines)."""

    def __init__(self) -> None:
        self.buf = b""

    def feed(self, data: bytes) -> list[Message]:
        """The whole commands completed by ``data``."""
        self.buf += data
        out = []
        while self.buf:
            end, name = _command(self.buf)
            if end is None:
                break
            raw, self.buf = self.buf[:end], self.buf[end:]
            kind = name.decode("latin-1")
            out.append(Message(raw, kind, commit=name in REDIS_TXN, replies=1, text=raw))
        return out


def _command(buf: bytes) -> tuple[int | None, bytes]:
    if buf[:1] != b"*":  # inline: one line, words separated by spaces
        nl = buf.find(b"\n")
        if nl < 0:
            return None, b""
        words = buf[:nl].split()
        return nl + 1, words[0].upper() if words else b""
    nl = buf.find(b"\r\n")
    if nl < 0:
        return None, b""
    count, at, name = int(buf[1:nl]), nl + 2, b""
    for i in range(count):
        nl = buf.find(b"\r\n", at)
        if nl < 0:
            return None, b""
        size = int(buf[at + 1 : nl])
        start, at = nl + 2, nl + 2 + size + 2
        if len(buf) < at:
            return None, b""
        if i == 0:
            name = buf[start : start + size].upper()
    return at, name


class RespServer:
    """Counts a Redis server's replies (RESP2 and RESP3; push messages are not replies)."""

    def __init__(self) -> None:
        self.buf = b""
        self.replies = 0

    def feed(self, data: bytes) -> None:
        """Account for ``data`` (whole replies only; a partial one waits)."""
        self.buf += data
        at = 0
        while at < len(self.buf):
            end = _reply(self.buf, at)
            if end is None:
                break
            if self.buf[at : at + 1] != b">":  # a push is not the answer to a command
                self.replies += 1
            at = end
        self.buf = self.buf[at:]


def _reply(buf: bytes, at: int) -> int | None:
    """Where the reply starting at ``at`` ends, or None when it is not all here."""
    nl = buf.find(b"\r\n", at)
    if nl < 0:
        return None
    kind, head, end = buf[at : at + 1], buf[at + 1 : nl], nl + 2
    if kind in b"$!=":  # bulk string, bulk error, verbatim string
        size = int(head)
        if size < 0:
            return end
        return end + size + 2 if len(buf) >= end + size + 2 else None
    if kind in b"*~>%|":  # array, set, push; map and attribute hold pairs
        count = int(head)
        for _ in range(max(count, 0) * (2 if kind in b"%|" else 1)):
            nxt = _reply(buf, end)
            if nxt is None:
                return None
            end = nxt
        if kind == b"|":  # an attribute comes before the reply it annotates
            return _reply(buf, end)
        return end
    return end  # + - : _ , # ( : one line
