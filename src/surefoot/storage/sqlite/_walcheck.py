"""Committed transactions a damaged ``-wal`` would drop, found before SQLite reads it.

SQLite's write-ahead log is a 32-byte header (magic, format version, page size, checkpoint
sequence, two salts, a checksum of the header) followed by frames: a 24-byte frame header
(page number, the database size in pages for a transaction's last, *commit*, frame and 0
otherwise, the two salts, a checksum) and one page. Each frame's checksum is cumulative:
seeded with the previous frame's (the header's for the first) and computed over the first
8 bytes of its frame header and its page (https://www.sqlite.org/fileformat2.html#walformat).

The first connection to open a database *recovers* its ``-wal``: it reads frames from the
start while their salts are the header's and their checksums chain, and keeps the
transactions up to the last commit frame of that run. The first frame that fails ends the
log, silently: every transaction committed after it is gone, and the next write overwrites
them. A crash while a transaction was being written leaves exactly such a tail (a torn,
never-acknowledged transaction), so SQLite cannot tell it from damage.

:func:`find_damage` can, in one case: a frame fails, yet the **commit frame of a later
transaction** (after the one the failing frame belongs to) carries the current salts and a
checksum that chains from its predecessor's stored checksum. Such a frame was written after
the failing one, in the same cycle of the log, and its transaction completed; so the failing
frame was whole once and was damaged afterwards. The same holds
for a damaged header followed by frames that chain from it. What it cannot tell (see
docs/reliability.md, section 4): a log cut at a frame boundary (as if the machine lost
power before those commits were synced), or damage confined to the last transaction's
frames (as if the crash came while it was written).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = ["WalDamage", "find_damage"]

_MAGICS = {0x377F0682: "<", 0x377F0683: ">"}  # the checksums' byte order by the magic's low bit
_HEADER = 32
_FRAME_HEADER = 24
_MASK = 0xFFFFFFFF


@dataclass(frozen=True)
class WalDamage:
    """Where a ``-wal`` is damaged: SQLite would keep ``kept`` frames and drop the rest,
    among them the committed transaction ending at frame ``last_commit`` (1-based)."""

    bad_frame: int  # the first frame that fails (0: the header)
    kept: int
    last_commit: int
    frames: int

    def describe(self) -> str:
        what = "its header" if self.bad_frame == 0 else f"frame {self.bad_frame}"
        return (
            f"{what} is damaged (its checksum or salts do not match), yet committed "
            f"transactions follow it up to frame {self.last_commit} of {self.frames}; "
            f"SQLite would silently keep only the first {self.kept} frames and drop them"
        )


def _checksum(order: str, data: bytes, s0: int, s1: int) -> tuple[int, int]:
    """SQLite's WAL checksum of ``data`` (a multiple of 8 bytes), seeded with ``(s0, s1)``:
    ``s0 += x[2k] + s1; s1 += x[2k+1] + s0`` over its 32-bit words, modulo 2**32."""
    it = iter(struct.unpack(f"{order}{len(data) // 4}I", data))
    for a, b in zip(it, it, strict=True):
        s0 = (s0 + a + s1) & _MASK
        s1 = (s1 + b + s0) & _MASK
    return s0, s1


def find_damage(path: str) -> WalDamage | None:
    """The damage in the ``-wal`` file ``path`` that would silently drop committed
    transactions, or None (no file, an empty or unused one, an intact one, or one whose only
    failing frames could be a crash's). Reads the file; changes nothing."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    if len(data) < _HEADER + _FRAME_HEADER:
        return None
    return _Wal(data).damage()


class _Wal:
    """One ``-wal`` file's bytes, read the way SQLite's recovery reads them."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        magic, _version, page, _seq, _s1, _s2, h0, h1 = struct.unpack(">8I", data[:_HEADER])
        self.salts = data[16:24]
        self.seed = (h0, h1)  # the header's stored checksum: the first frame's seed
        valid_page = 512 <= page <= 65536 and page & (page - 1) == 0
        self.size = _FRAME_HEADER + page if valid_page else self._guess_frame_size()
        self.frames = (len(data) - _HEADER) // self.size if self.size else 0
        self.order = _MAGICS.get(magic)

    def header(self, i: int) -> tuple[int, bytes, tuple[int, int]]:
        """Frame ``i``'s (1-based) commit size, salts and stored checksum."""
        at = _HEADER + (i - 1) * self.size
        _pgno, commit, _s1, _s2, c0, c1 = struct.unpack(">6I", self.data[at : at + _FRAME_HEADER])
        return commit, self.data[at + 8 : at + 16], (c0, c1)

    def checksum(self, order: str, i: int, seed: tuple[int, int]) -> tuple[int, int]:
        """Frame ``i``'s checksum as computed from its bytes, seeded with ``seed``."""
        at = _HEADER + (i - 1) * self.size
        body = self.data[at : at + 8] + self.data[at + _FRAME_HEADER : at + self.size]
        return _checksum(order, body, *seed)

    def damage(self) -> WalDamage | None:
        if not self.frames:
            return None
        order = self.order
        header_ok = order is not None and _checksum(order, self.data[:24], 0, 0) == self.seed
        kept = 0  # the frames SQLite's recovery keeps (up to the last valid commit frame)
        bad = 0  # the first frame that fails (0: the header)
        salts = {self.salts}
        if header_ok:
            assert order is not None
            seed = self.seed
            for i in range(1, self.frames + 1):
                commit, fsalts, stored = self.header(i)
                if fsalts != self.salts or self.checksum(order, i, seed) != stored:
                    bad = i
                    break
                seed = stored
                if commit:
                    kept = i
            else:
                return None  # every frame is valid
        else:  # SQLite ignores the whole log; frame 1 tells the salts it was written with
            salts.add(self.header(1)[1])
        # The failing frame's transaction ends at the first commit frame from it on: damage
        # confined to it could be a crash while it was written (a power loss can persist its
        # commit frame before an earlier frame of it). A commit frame of a later transaction
        # that was written in this cycle of the log (its salts) and chains from its
        # predecessor's stored checksum (or, right after the failing frame, from the
        # checksum that frame should carry) shows the failing frame was whole once.
        own_end = (
            next((i for i in range(bad, self.frames + 1) if self.header(i)[0]), 0) if bad else 0
        )
        for o in [order] if order else ["<", ">"]:  # a damaged magic: either byte order
            for i in range(max(own_end, bad) + 1, self.frames + 1):
                commit, fsalts, stored = self.header(i)
                if not commit or fsalts not in salts:
                    continue
                prev = self.seed if i == 1 else self.header(i - 1)[2]
                if self.checksum(o, i, prev) == stored or (
                    i == bad + 1 and self.checksum(o, i, self._should_carry(o, bad)) == stored
                ):
                    return WalDamage(bad, kept, i, self.frames)
        return None

    def _should_carry(self, order: str, i: int) -> tuple[int, int]:
        """The checksum frame ``i`` should carry: its predecessor's stored one run over its
        bytes (right when only its stored checksum was hit)."""
        if i < 1:
            return self.seed
        return self.checksum(order, i, self.seed if i == 1 else self.header(i - 1)[2])

    def _guess_frame_size(self) -> int:
        """A damaged page size: the frame size at which the first two frames both carry the
        header's salts; 0: none."""
        data, page = self.data, 512
        while page <= 65536:
            size = _FRAME_HEADER + page
            if len(data) >= _HEADER + 2 * size:
                first = data[_HEADER + 8 : _HEADER + 16]
                second = data[_HEADER + size + 8 : _HEADER + size + 16]
                if first == self.salts and second == self.salts:
                    return size
            page *= 2
        return 0
