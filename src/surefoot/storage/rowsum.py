"""Checksums of the rows surefoot serves from a file it cannot otherwise trust (SQLite).

SQLite keeps no checksum on its pages: a bit flipped on the disk inside a row's text is
read back as different text, without an error (``benchmarks/chaos/disk_faults.py`` saw 3
of 20 damaged database copies served that way). So each row whose value surefoot hands back
carries a CRC-32 of that value, written with it and checked when it is read; a row that
fails raises :class:`~surefoot.errors.CorruptionError` instead of being served. A row
written before its table had the column has NULL there: unverified, served as before.

CRC-32 (``zlib``, in C) finds every change of up to 3 bits, and any burst of up to 32, in
the values stored here; it is a check against a failing disk, not against someone who
edits the file on purpose (they could recompute it).
"""

from __future__ import annotations

from zlib import crc32

from ..errors import CorruptionError

__all__ = ["check_value", "key_sum", "refused", "step_sum", "value_sum"]

_NONE = b"\x00"  # None, told apart from "" (every present text is prefixed with \x01)


def _text(crc: int, text: str | None) -> int:
    if text is None:
        return crc32(_NONE, crc)
    return crc32(text.encode("utf-8", "surrogatepass"), crc32(b"\x01", crc))


def step_sum(
    pos: str, name: str, kind: str, status: str, result: str | None, error: str | None
) -> int:
    """The checksum of a journalled step: what replay acts on (its position, name, kind and
    status) and what it serves (its result and error). Not its run id or epoch, which a
    fork changes in SQL (the copy keeps the checksum)."""
    head = f"{pos}\x1f{name}\x1f{kind}\x1f{status}".encode("utf-8", "surrogatepass")
    return _text(_text(crc32(head), result), error)


def value_sum(text: str | None) -> int:
    """The checksum of one stored value."""
    return _text(0, text)


def key_sum(key: str, value: str) -> int:
    """The checksum of a state store key and its value (the row holds both)."""
    return crc32(
        value.encode("utf-8", "surrogatepass"), crc32(key.encode("utf-8", "surrogatepass"))
    )


def check_value(url: str, where: str, text: str | None, stored: int | None) -> None:
    """Raise :class:`CorruptionError` if ``text`` does not have the checksum ``stored``
    (None: written before the checksum existed, not checked)."""
    if stored is not None and value_sum(text) != stored:
        raise refused(url, where)


def refused(url: str, where: str) -> CorruptionError:
    """The error for a row at ``where`` that failed its checksum."""
    return CorruptionError(
        url,
        where,
        f"{where} failed its checksum: the file was damaged after it was written (a "
        "failing disk, or a change made outside surefoot). Its data was refused, not served. "
        "Stop the processes using the file, run `PRAGMA integrity_check` on a copy, and "
        "restore the file from a backup (docs/reliability.md, section 4).",
    )
