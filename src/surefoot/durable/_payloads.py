"""Payload codecs: compress or encrypt what the journal stores, as Temporal's codecs do.

::

    app = durable.App("sqlite:///runs.db", payload_codec=durable.ZlibCodec())

A ``PayloadCodec`` turns the bytes of each stored value into other bytes and back: run
arguments and results, step results and errors, signal payloads. The journal then holds
``sfc:<codec name>:<base64>`` instead of JSON; a value stored before the codec was set
(plain JSON) is still read as it is, so a codec can be turned on under existing runs.
Encryption at rest is a codec whose ``encode`` encrypts with your key (for example with
``cryptography``'s Fernet, see ``docs/durable.md``); every process reading the journal
needs the same codec. What is not encoded: run ids, workflow and step names, statuses,
times and the audit log (operators read them).

The codec wraps the journal (:class:`CodedJournal`), so the engine is unchanged: every
value passes ``encode`` on its way in and ``decode`` on its way out, in this process.
"""

from __future__ import annotations

import base64
import dataclasses
import zlib
from typing import Any, Protocol, runtime_checkable

from ..errors import ConfigError
from ..storage.base import RunRow, RunWrite, StepRow, StepWrite

__all__ = ["CodedJournal", "PayloadCodec", "ZlibCodec", "check_codec"]

PREFIX = "sfc:"


@runtime_checkable
class PayloadCodec(Protocol):
    """Bytes in, bytes out, and back. ``name`` is stored with each value (no ``:``)."""

    name: str

    def encode(self, data: bytes) -> bytes: ...

    def decode(self, data: bytes) -> bytes: ...


class ZlibCodec:
    """Compression with ``zlib`` (standard library); ``level`` 1 (fast) to 9 (small)."""

    name = "zlib"

    def __init__(self, level: int = 6) -> None:
        if not isinstance(level, int) or not 1 <= level <= 9:
            raise ConfigError(f"zlib level must be an int from 1 to 9, got {level!r}")
        self.level = level

    def encode(self, data: bytes) -> bytes:
        return zlib.compress(data, self.level)

    def decode(self, data: bytes) -> bytes:
        return zlib.decompress(data)


def check_codec(codec: Any) -> PayloadCodec | None:
    """``codec`` if it is a usable payload codec (or None).

    Raises:
        ConfigError: it lacks ``name``/``encode``/``decode``, or its name has ``:``.
    """
    if codec is None:
        return None
    name = getattr(codec, "name", None)
    if not isinstance(codec, PayloadCodec) or not isinstance(name, str) or not name:
        raise ConfigError(
            f"payload_codec must have a name and encode(bytes)/decode(bytes) methods, got "
            f"{codec!r}; see durable.ZlibCodec"
        )
    if ":" in name:
        raise ConfigError(f"a payload codec's name may not contain ':', got {name!r}")
    return codec


class CodedJournal:
    """A journal whose stored values pass through ``codec`` (other calls pass through)."""

    def __init__(self, journal: Any, codec: PayloadCodec) -> None:
        self._j = journal
        self._codec = codec
        self._tag = f"{PREFIX}{codec.name}:"
        self.url = journal.url

    def __getattr__(self, name: str) -> Any:
        return getattr(self._j, name)

    # -- values ------------------------------------------------------------------------

    def enc(self, text: str | None) -> str | None:
        if text is None:
            return None
        raw = self._codec.encode(text.encode("utf-8"))
        return self._tag + base64.b64encode(raw).decode("ascii")

    def dec(self, text: str | None) -> str | None:
        if text is None or not text.startswith(PREFIX):
            return text  # stored before the codec was set: plain JSON
        if not text.startswith(self._tag):
            name = text[len(PREFIX) :].split(":", 1)[0]
            raise ConfigError(
                f"a journalled value was stored with payload codec {name!r}, but this app "
                f"uses {self._codec.name!r}; give it the codec the value was written with"
            )
        try:
            return self._codec.decode(base64.b64decode(text[len(self._tag) :])).decode("utf-8")
        except Exception as exc:  # a wrong key, a corrupt value
            raise ConfigError(
                f"payload codec {self._codec.name!r} could not decode a journalled value "
                f"({type(exc).__name__}: {exc}); is it the same codec and key that wrote it?"
            ) from exc

    def _run_in(self, row: RunRow) -> RunRow:
        return dataclasses.replace(
            row, args=self.enc(row.args) or "", result=self.enc(row.result),
            error=self.enc(row.error),
        )  # fmt: skip

    def _run_out(self, row: RunRow | None) -> Any:
        if row is None:
            return None
        return dataclasses.replace(
            row, args=self.dec(row.args) or "", result=self.dec(row.result),
            error=self.dec(row.error),
        )  # fmt: skip

    def _step_in(self, w: StepWrite) -> StepWrite:
        return dataclasses.replace(w, result=self.enc(w.result), error=self.enc(w.error))

    def _record_in(self, r: StepWrite | RunWrite) -> StepWrite | RunWrite:
        if type(r) is StepWrite:
            return self._step_in(r)
        return dataclasses.replace(r, result=self.enc(r.result), error=self.enc(r.error))

    # -- the journal's value-carrying calls --------------------------------------------

    def create_run(self, row: RunRow) -> tuple[RunRow, bool]:
        stored, created = self._j.create_run(self._run_in(row))
        return self._run_out(stored), created

    def create_run_plus(self, row: RunRow) -> tuple[RunRow, bool]:
        stored, created = self._j.create_run_plus(self._run_in(row))
        return self._run_out(stored), created

    def fire_schedule(self, name: str, *, runs: list[RunRow], **kw: Any) -> int:
        made: int = self._j.fire_schedule(name, runs=[self._run_in(r) for r in runs], **kw)
        return made

    def get_run(self, run_id: str) -> RunRow | None:
        out: RunRow | None = self._run_out(self._j.get_run(run_id))
        return out

    def list_runs(self, **kw: Any) -> list[RunRow]:
        return [self._run_out(r) for r in self._j.list_runs(**kw)]

    def page_runs(self, **kw: Any) -> list[RunRow]:
        return [self._run_out(r) for r in self._j.page_runs(**kw)]

    def children(self, run_id: str) -> list[RunRow]:
        return [self._run_out(r) for r in self._j.children(run_id)]

    def steps(self, run_id: str) -> list[StepRow]:
        return [
            dataclasses.replace(s, result=self.dec(s.result), error=self.dec(s.error))
            for s in self._j.steps(run_id)
        ]

    def commit(self, records: list[StepWrite | RunWrite]) -> list[bool]:
        out: list[bool] = self._j.commit([self._record_in(r) for r in records])
        return out

    def operator(self, run_id: str, **kw: Any) -> RunRow | None:
        if kw.get("put_steps"):
            kw["put_steps"] = [self._step_in(w) for w in kw["put_steps"]]
        out: RunRow | None = self._run_out(self._j.operator(run_id, **kw))
        return out

    def fork(self, run_id: str, new_run_id: str, before_pos: str, *, now: float) -> RunRow:
        out: RunRow = self._run_out(self._j.fork(run_id, new_run_id, before_pos, now=now))
        return out

    def signal(self, run_id: str, name: str, payload: str, **kw: Any) -> bool:
        sent: bool = self._j.signal(run_id, name, self.enc(payload), **kw)
        return sent

    def pending_signal(self, run_id: str, name: str) -> tuple[int, str] | None:
        got = self._j.pending_signal(run_id, name)
        if got is None:
            return None
        return int(got[0]), self.dec(got[1]) or ""
