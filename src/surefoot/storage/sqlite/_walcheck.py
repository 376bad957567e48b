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

Speed: every process that opens a file reads its ``-wal`` once, so the checksums are not run
word by word in Python (about 0.1-0.2 ms a 4 KiB frame) but on a batch of frames at once
(:func:`_frame_sums`): the checksum is linear in the frame's words, so a frame's checksum
from any seed is ``M**pairs`` times the seed plus its checksum from ``(0, 0)``; those come
from big-integer additions whose 64-bit lanes are the batch's frames, one addition for all
of them per pair of words. ``benchmarks/bench_walcheck.py`` measures both.
"""

from __future__ import annotations

import array
import struct
import sys
from dataclasses import dataclass

__all__ = ["WalDamage", "find_damage"]

_MAGICS = {0x377F0682: "<", 0x377F0683: ">"}  # the checksums' byte order by the magic's low bit
_HEADER = 32
_FRAME_HEADER = 24
_MASK = 0xFFFFFFFF
_FRAME_FIELDS = struct.Struct(">6I")
_NATIVE = "<" if sys.byteorder == "little" else ">"
_BATCH_BYTES = 1 << 20  # frames checksummed together, about this many bytes of them
_FEW = 3  # a batch of fewer frames is checksummed frame by frame (cheaper for 1 or 2)
_MIN_BATCH = 64  # frames a batch holds at least (large pages: per-column costs dominate)
_LANE = 16  # pairs of words added before the lanes are reduced modulo 2**32 (< 2**57)


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


def _power(pairs: int) -> tuple[int, int, int]:
    """``M**pairs`` modulo 2**32 as ``(m00, m01, m11)`` (it is symmetric), where ``M =
    [[1, 1], [1, 2]]`` is one pair of words' step with the words zero: ``s0 += s1; s1 += s0``."""
    r00, r01, r11 = 1, 0, 1  # the identity
    b00, b01, b11 = 1, 1, 2
    while pairs:
        if pairs & 1:
            r00, r01, r11 = (
                (r00 * b00 + r01 * b01) & _MASK,
                (r00 * b01 + r01 * b11) & _MASK,
                (r01 * b01 + r11 * b11) & _MASK,
            )
        b00, b01, b11 = (
            (b00 * b00 + b01 * b01) & _MASK,
            (b00 * b01 + b01 * b11) & _MASK,
            (b01 * b01 + b11 * b11) & _MASK,
        )
        pairs >>= 1
    return r00, r01, r11


def _frame_sums(order: str, frames: bytes, size: int) -> list[tuple[int, int]]:
    """The checksums, seeded with ``(0, 0)``, of the frames of ``size`` bytes that
    ``frames`` holds, each over its first 8 bytes and its page (as :meth:`_Wal.checksum`).

    The same arithmetic as :func:`_checksum`, on all the frames at once: frame ``k`` is
    lane ``k`` (bits ``64k`` to ``64k + 63``) of two Python integers ``s0`` and ``s1``, and
    each pair of words ``(a, b)`` of the frames is one integer ``x`` (its lane ``k``:
    frame ``k``'s pair, gathered by a strided slice) whose low and high halves are added
    as ``s0 += s1 + a; s1 += s0 + b``. Carries stay inside a lane: every ``_LANE`` pairs
    the lanes are reduced modulo 2**32, before they reach 64 bits."""
    n = len(frames) // size
    pairs = array.array("Q")
    pairs.frombytes(frames)
    if order != _NATIVE:
        pairs.byteswap()  # each 8 bytes reversed: the pair's words swapped, each in order
    a_low = order == "<"  # the pair's first word is the lane's low half
    stride = size // 8
    lanes = int.from_bytes(b"\xff\xff\xff\xff\0\0\0\0" * n, sys.byteorder)
    order_of = sys.byteorder
    from_bytes = int.from_bytes
    cols = [0, *range(_FRAME_HEADER // 8, stride)]  # skip the frame header's salts, checksum
    s0 = s1 = 0
    for start in range(0, len(cols), _LANE):
        for j in cols[start : start + _LANE]:
            x = from_bytes(pairs[j::stride], order_of)
            low = x & lanes
            high = (x ^ low) >> 32
            if a_low:
                s0 += s1 + low
                s1 += s0 + high
            else:
                s0 += s1 + high
                s1 += s0 + low
        s0 &= lanes
        s1 &= lanes
    first = array.array("Q", s0.to_bytes(8 * n, order_of)).tolist()
    second = array.array("Q", s1.to_bytes(8 * n, order_of)).tolist()
    return list(zip(first, second, strict=True))


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

    def __init__(self, data: bytes, *, batch: bool = True, per_batch: int = 0) -> None:
        """``batch``: False checksums frame by frame with :func:`_checksum` (as before
        issue 27's section 4; tests and ``benchmarks/bench_walcheck.py`` compare them);
        ``per_batch``: frames checksummed together (0: about ``_BATCH_BYTES`` of them, at
        least ``_MIN_BATCH``)."""
        self.data = data
        self.batch = batch
        self.batches = 0  # batches of frames checksummed (tests count them)
        self.singles = 0  # frames checksummed one by one
        self._sums: dict[tuple[str, int], list[tuple[int, int]]] = {}
        magic, _version, page, _seq, _s1, _s2, h0, h1 = struct.unpack(">8I", data[:_HEADER])
        self.salts = data[16:24]
        self.seed = (h0, h1)  # the header's stored checksum: the first frame's seed
        valid_page = 512 <= page <= 65536 and page & (page - 1) == 0
        self.size = _FRAME_HEADER + page if valid_page else self._guess_frame_size()
        self.frames = (len(data) - _HEADER) // self.size if self.size else 0
        self.order = _MAGICS.get(magic)
        self.per_batch = per_batch or (
            max(_MIN_BATCH, _BATCH_BYTES // self.size) if self.size else 1
        )
        self.power = _power((self.size - _FRAME_HEADER) // 8 + 1) if self.size else (1, 0, 1)

    def header(self, i: int) -> tuple[int, bytes, tuple[int, int]]:
        """Frame ``i``'s (1-based) commit size, salts and stored checksum."""
        at = _HEADER + (i - 1) * self.size
        _pgno, commit, _s1, _s2, c0, c1 = _FRAME_FIELDS.unpack_from(self.data, at)
        return commit, self.data[at + 8 : at + 16], (c0, c1)

    def checksum(self, order: str, i: int, seed: tuple[int, int]) -> tuple[int, int]:
        """Frame ``i``'s checksum as computed from its bytes, seeded with ``seed``."""
        if not self.batch:
            self.singles += 1
            return self._single(order, i, seed)
        z0, z1 = self._batch_sums(order, (i - 1) // self.per_batch)[(i - 1) % self.per_batch]
        m00, m01, m11 = self.power
        return (m00 * seed[0] + m01 * seed[1] + z0) & _MASK, (
            m01 * seed[0] + m11 * seed[1] + z1
        ) & _MASK

    def _batch_sums(self, order: str, b: int) -> list[tuple[int, int]]:
        """The checksums from (0, 0) of the frames of batch ``b`` (0-based), computed once."""
        sums = self._sums.get((order, b))
        if sums is None:
            first = b * self.per_batch + 1
            n = min(self.per_batch, self.frames - first + 1)
            if n < _FEW:
                self.singles += n
                sums = [self._single(order, k, (0, 0)) for k in range(first, first + n)]
            else:
                self.batches += 1
                at = _HEADER + (first - 1) * self.size
                sums = _frame_sums(order, self.data[at : at + n * self.size], self.size)
            self._sums[(order, b)] = sums
        return sums

    def _scan(self, order: str) -> tuple[int, int]:
        """:meth:`damage`'s first loop on whole batches: the first frame that fails (0:
        none) and the frames SQLite's recovery keeps. The same tests as that loop (the
        salts, compared as numbers; the checksum from the previous frame's stored one)."""
        data, size = self.data, self.size
        m00, m01, m11 = self.power
        salt1, salt2 = struct.unpack(">2I", self.salts)
        p0, p1 = self.seed
        fields = _FRAME_FIELDS.unpack_from
        kept, i = 0, 1
        for b in range((self.frames + self.per_batch - 1) // self.per_batch):
            for z0, z1 in self._batch_sums(order, b):
                _pgno, commit, f1, f2, c0, c1 = fields(data, _HEADER + (i - 1) * size)
                if (
                    f1 != salt1
                    or f2 != salt2
                    or (m00 * p0 + m01 * p1 + z0) & _MASK != c0
                    or (m01 * p0 + m11 * p1 + z1) & _MASK != c1
                ):
                    return i, kept
                p0, p1 = c0, c1
                if commit:
                    kept = i
                i += 1
        return 0, kept

    def _single(self, order: str, i: int, seed: tuple[int, int]) -> tuple[int, int]:
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
        if header_ok and self.batch:
            assert order is not None
            bad, kept = self._scan(order)
            if not bad:
                return None  # every frame is valid
        elif header_ok:
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
