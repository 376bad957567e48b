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

The codec wraps the journal (``._coded.CodedJournal``), so the engine is unchanged: every
value passes ``encode`` on its way in and ``decode`` on its way out, in this process;
:class:`StoredValues` here does the work for each kind of record.

The same wrapper stores large step results as shared chunks (``App(value_chunks=…)``, see
``._chunks``): a step result of at least that many characters of JSON goes to the journal
as a reference plus the tree nodes it does not have yet, in the step's own commit, and
comes back from ``steps()`` as the text it was. With a codec, each leaf is encoded; the
references and inner nodes (hashes) are not.
"""

from __future__ import annotations

import base64
import dataclasses
import zlib
from typing import Any, Protocol, runtime_checkable

from ..errors import ConfigError
from ..storage.checks import check_size
from ..storage.chunks import Chunks, ChunkWrite
from ..storage.runs import ChildWrite, Record, RunRow, StepRow, StepWrite
from ._chunks import is_ref, join_all, split

__all__ = [
    "DEFAULT_CHUNK_AT",
    "PayloadCodec",
    "StoredValues",
    "ZlibCodec",
    "check_chunk_at",
    "check_codec",
]

PREFIX = "sfc:"
#: Step results of at least this many characters of JSON are stored as shared chunks.
DEFAULT_CHUNK_AT = 8192
_LEAF_CACHE = 4096  # encoded leaves kept per journal, so a growing value is encoded once


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


def check_chunk_at(value: Any) -> int:
    """``App(value_chunks=…)`` as a threshold in characters (0: never chunk).

    Raises:
        ConfigError: not None, False or an int of at least 1024.
    """
    if value is None or value is False:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 1024:
        raise ConfigError(
            f"value_chunks must be a size in characters of at least 1024 (or None to keep "
            f"every value in its row), got {value!r}"
        )
    return value


def _tagged(*texts: str | None) -> bool:
    """True if any of ``texts`` was stored through a payload codec."""
    return any(t is not None and t.startswith(PREFIX) for t in texts)


class StoredValues:
    """The values of records on their way to the journal and back: through ``codec``, and
    large step results as chunks in ``chunks``.

    Args:
        url: the journal's URL (for errors).
        codec: the payload codec, or None (values stored as JSON).
        chunks: the journal's chunk store, or None (every value stays in its row).
        chunk_at: step results of at least this many characters are chunked; 0: none.
    """

    def __init__(
        self, url: str, codec: PayloadCodec | None, chunks: Chunks | None, chunk_at: int = 0
    ) -> None:
        self.url = url
        self.codec = codec
        self.chunks = chunks
        self._tag = f"{PREFIX}{codec.name}:" if codec is not None else ""
        self._name = codec.name if codec is not None else ""
        self.chunk_at = chunk_at if chunks is not None else 0
        self._leaves: dict[str, str] = {}

    # -- values ------------------------------------------------------------------------

    def enc(self, text: str | None) -> str | None:
        """``text`` (codec JSON) as stored: through the payload codec, if any."""
        if text is None or self.codec is None:
            return text
        raw = self.codec.encode(text.encode("utf-8"))
        return self._tag + base64.b64encode(raw).decode("ascii")

    def dec(self, text: str | None) -> str | None:
        """A stored value as codec JSON again (one stored before the codec was set is).

        Raises:
            ConfigError: it was stored through another codec, or this one cannot decode it.
        """
        if text is None or not text.startswith(PREFIX):
            return text  # stored before the codec was set: plain JSON
        if self.codec is None or not text.startswith(self._tag):
            name = text[len(PREFIX) :].split(":", 1)[0]
            mine = "none" if self.codec is None else repr(self.codec.name)
            raise ConfigError(
                f"a journalled value was stored with payload codec {name!r}, but this app "
                f"uses {mine}; give it the codec the value was written with"
            )
        try:
            return self.codec.decode(base64.b64decode(text[len(self._tag) :])).decode("utf-8")
        except Exception as exc:  # a wrong key, a corrupt value
            raise ConfigError(
                f"payload codec {self.codec.name!r} could not decode a journalled value "
                f"({type(exc).__name__}: {exc}); is it the same codec and key that wrote it?"
            ) from exc

    def _leaf(self, leaf_id: str, text: str) -> str:
        got = self._leaves.get(leaf_id)
        if got is None:
            got = self.enc(text) or ""
            if len(self._leaves) >= _LEAF_CACHE:
                self._leaves.clear()
            self._leaves[leaf_id] = got
        return got

    def _chunked(self, w: StepWrite, out: list[ChunkWrite]) -> StepWrite:
        """``w`` with its result as a chunk reference; its nodes appended to ``out``."""
        text = w.result or ""
        what = f"the result of step {w.pos} ({w.name!r}) of run {w.run_id!r}"
        assert self.chunks is not None  # chunk_at is 0 without a chunk store
        check_size(self.url, what, text, self.chunks.max_value_bytes)
        ref, nodes = split(text, self._name, self._leaf)
        out += [(w.run_id, w.epoch, i, data) for i, data in nodes.items()]
        return dataclasses.replace(w, result=ref, error=self.enc(w.error))

    def steps_out(self, rows: list[StepRow]) -> list[StepRow]:
        """``rows`` as the app reads them: values decoded, chunked results joined back."""
        refs: dict[str, list[str]] = {}
        for s in rows:
            if is_ref(s.result):
                refs.setdefault(s.run_id, []).append(s.result or "")
        if not refs:
            if self.codec is None and not any(_tagged(s.result, s.error) for s in rows):
                return rows
            return [
                dataclasses.replace(s, result=self.dec(s.result), error=self.dec(s.error))
                for s in rows
            ]
        texts: dict[tuple[str, str], str] = {}
        for run_id, run_refs in refs.items():

            def fetch(ids: list[str], run_id: str = run_id) -> dict[str, str]:
                assert self.chunks is not None  # a reference was stored through them
                return self.chunks.get(run_id, ids)

            got = join_all(
                run_refs, fetch, self._plain, f"run {run_id!r}", tag=self._name, url=self.url
            )
            texts.update(((run_id, ref), text) for ref, text in got.items())
        out = []
        for s in rows:
            result: str | None
            if is_ref(s.result):
                result = texts[(s.run_id, s.result or "")]
            else:
                result = self.dec(s.result)
            out.append(dataclasses.replace(s, result=result, error=self.dec(s.error)))
        return out

    def _plain(self, text: str) -> str:
        """A leaf's stored data as its text."""
        return self.dec(text) or ""

    def run_in(self, row: RunRow) -> RunRow:
        """A run's header on its way in: its arguments, result and error encoded."""
        if self.codec is None:
            return row
        return dataclasses.replace(
            row, args=self.enc(row.args) or "", result=self.enc(row.result),
            error=self.enc(row.error),
        )  # fmt: skip

    def run_out(self, row: RunRow) -> RunRow:
        """A run's header as the app reads it: its values decoded."""
        if self.codec is None and not _tagged(row.args, row.result, row.error):
            return row
        return dataclasses.replace(
            row, args=self.dec(row.args) or "", result=self.dec(row.result),
            error=self.dec(row.error),
        )  # fmt: skip

    def step_in(self, w: StepWrite) -> StepWrite:
        """A step record on its way in: its result and error encoded."""
        return dataclasses.replace(w, result=self.enc(w.result), error=self.enc(w.error))

    def record_in(self, r: Record, chunks: list[ChunkWrite]) -> Record:
        """A record on its way in; the nodes of a chunked step result go to ``chunks``."""
        if isinstance(r, ChildWrite):  # a new child's arguments, its parent's step
            return ChildWrite(self.step_in(r.step), self.run_in(r.child))
        if type(r) is StepWrite:
            res = r.result
            if self.chunk_at and res is not None and len(res) >= self.chunk_at:
                return self._chunked(r, chunks)
            return self.step_in(r)
        return dataclasses.replace(r, result=self.enc(r.result), error=self.enc(r.error))
