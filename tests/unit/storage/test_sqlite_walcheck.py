"""The ``-wal`` check's batched checksums (issue 27, section 4, its cost) give exactly the
verdicts of the frame-by-frame ones: the same checksum on any bytes from any seed, the same
``WalDamage`` (or None) on any ``-wal``, intact or damaged; and a real ``-wal`` is
checksummed in batches, not frame by frame in Python."""

from __future__ import annotations

import math
import random
import sqlite3
import struct
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from surefoot.storage.sqlite._walcheck import (
    _checksum,
    _frame_sums,
    _power,
    _Wal,
    find_damage,
)

MASK = 0xFFFFFFFF


def _from_seed(order: str, body: bytes, seed: tuple[int, int], pairs: int) -> tuple[int, int]:
    """The batched checksum of one frame body from ``seed``, as ``_Wal.checksum`` forms it."""
    size = len(body) + 16  # a frame: the 8 bytes, 16 skipped (salts, checksum), the page
    frame = body[:8] + bytes(16) + body[8:]
    z0, z1 = _frame_sums(order, frame, size)[0]
    m00, m01, m11 = _power(pairs)
    return (m00 * seed[0] + m01 * seed[1] + z0) & MASK, (m01 * seed[0] + m11 * seed[1] + z1) & MASK


@settings(max_examples=150, deadline=None)
@given(
    order=st.sampled_from("<>"),
    page=st.sampled_from([8, 16, 64, 512, 1024]),
    frames=st.integers(1, 9),
    fill=st.sampled_from(["random", "ones", "zeros"]),
    rnd=st.randoms(use_true_random=False),
)
def test_batched_checksums_equal_sqlites_word_by_word_ones(
    order: str, page: int, frames: int, fill: str, rnd: random.Random
) -> None:
    """Every frame of a batch gets the checksum ``_checksum`` computes on its own, from
    (0, 0) and from any seed; all-ones words make the largest carries inside a lane."""
    size = 24 + page
    if fill == "random":
        data = rnd.randbytes(frames * size)
    else:
        data = (b"\xff" if fill == "ones" else b"\0") * (frames * size)
    got = _frame_sums(order, data, size)
    assert len(got) == frames
    for k in range(frames):
        at = k * size
        body = data[at : at + 8] + data[at + 24 : at + size]
        assert got[k] == _checksum(order, body, 0, 0)
        seed = (rnd.getrandbits(32), rnd.getrandbits(32))
        assert _from_seed(order, body, seed, len(body) // 8) == _checksum(order, body, *seed)


@settings(max_examples=60, deadline=None)
@given(pairs=st.integers(0, 10_000), s0=st.integers(0, MASK), s1=st.integers(0, MASK))
@example(pairs=513, s0=MASK, s1=MASK)
def test_the_step_matrix_power_is_the_checksum_of_zeros(pairs: int, s0: int, s1: int) -> None:
    m00, m01, m11 = _power(pairs)
    want = _checksum("<", bytes(8 * pairs), s0, s1)
    assert ((m00 * s0 + m01 * s1) & MASK, (m01 * s0 + m11 * s1) & MASK) == want


def _wal(rnd: random.Random, order: str, page: int, commits: list[bool]) -> bytearray:
    """A valid ``-wal`` (SQLite's format) of ``len(commits)`` frames of random pages."""
    magic = 0x377F0682 if order == "<" else 0x377F0683
    salts = (rnd.getrandbits(32), rnd.getrandbits(32))
    head = struct.pack(">6I", magic, 3007000, page, 0, *salts)
    seed = _checksum(order, head, 0, 0)
    out = bytearray(head + struct.pack(">2I", *seed))
    for i, commit in enumerate(commits, 1):
        fields = struct.pack(">2I", i, i if commit else 0)
        body = rnd.randbytes(page)
        seed = _checksum(order, fields + body, *seed)
        out += fields + struct.pack(">2I", *salts) + struct.pack(">2I", *seed) + body
    return out


FIELDS = {"page number": 0, "commit size": 4, "salts": 8, "checksum": 16, "page": 24}


@settings(max_examples=400, deadline=None)
@given(
    order=st.sampled_from("<>"),
    commits=st.lists(st.booleans(), min_size=1, max_size=24),
    flips=st.lists(st.sampled_from([*FIELDS, "anywhere", "the header"]), max_size=4),
    cut=st.none() | st.floats(0.2, 1),
    batch=st.sampled_from([1, 4, 5, 7, 64]),  # frames a batch; 1: frame by frame
    seed=st.integers(0, 2**32),
)
def test_batched_and_frame_by_frame_checks_give_the_same_verdict_on_any_wal(
    order: str,
    commits: list[bool],
    flips: list[str],
    cut: float | None,
    batch: int,
    seed: int,
) -> None:
    """Random logs, intact or with bits flipped (in a frame's page number, commit size,
    salts, checksum or page, anywhere, or in the log's header) and cut anywhere: the verdict
    (None or the same ``WalDamage``) does not depend on how the checksums are computed, nor
    on where the batches end. Positions come from ``random.Random(seed)``: uniform."""
    rnd = random.Random(seed)
    page = 512
    data = _wal(rnd, order, page, commits)
    for where in flips:
        if where == "anywhere":
            at = rnd.randrange(len(data))
        elif where == "the header":
            at = rnd.randrange(32)
        else:
            start = FIELDS[where]
            width = {"salts": 8, "checksum": 8, "page": page}.get(where, 4)
            at = 32 + rnd.randrange(len(commits)) * (24 + page) + start + rnd.randrange(width)
        data[at] ^= 1 << rnd.randrange(8)
    if cut is not None:
        data = data[: max(56, int(cut * len(data)))]
    old = _Wal(bytes(data), batch=False).damage()
    new = _Wal(bytes(data), per_batch=batch).damage()
    assert new == old


@pytest.mark.parametrize("order", ["<", ">"])
def test_every_bit_of_a_frame_header_flipped_gives_the_same_verdict_both_ways(order: str) -> None:
    """Each of the 192 bits of frame 3's header (page number, commit size, salts, checksum)
    and a bit of its page, flipped in an 8-transaction log, at each batch size: the same
    verdict both ways, and a flipped salt, checksum or page bit is damage at frame 3."""
    rnd = random.Random(7)
    page = 512
    good = _wal(rnd, order, page, [True] * 8)
    at = 32 + 2 * (24 + page)
    damaged = 0
    for offset in [*range(24), 24 + 300]:
        for bit in range(8):
            data = bytearray(good)
            data[at + offset] ^= 1 << bit
            old = _Wal(bytes(data), batch=False).damage()
            for batch in (1, 2, 4, 5, 64):
                assert _Wal(bytes(data), per_batch=batch).damage() == old, (offset, bit, batch)
            if offset >= 8:
                assert old is not None and old.bad_frame == 3, (offset, bit)
                damaged += 1
    assert damaged == 17 * 8


def _live_wal(tmp_path: Path, frames: int) -> Path:
    """A SQLite file whose ``-wal`` holds at least ``frames`` frames (checkpoints off)."""
    db = tmp_path / "w.db"
    keep = sqlite3.connect(db)
    keep.execute("PRAGMA journal_mode=WAL")
    keep.execute("CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB)")
    keep.commit()
    w = sqlite3.connect(db)
    w.execute("PRAGMA wal_autocheckpoint=0")
    rnd = random.Random(1)
    wal = Path(f"{db}-wal")
    k = 0
    while wal.stat().st_size < 32 + frames * (24 + 4096):
        w.execute("INSERT OR REPLACE INTO t VALUES (?, ?)", (k % 100, rnd.randbytes(2000)))
        w.commit()
        k += 1
    copy = tmp_path / "copy.db-wal"
    copy.write_bytes(wal.read_bytes())
    w.close()
    keep.close()
    return copy


def test_a_real_wal_is_checksummed_in_batches_not_frame_by_frame(tmp_path: Path) -> None:
    """A 600-frame ``-wal`` SQLite wrote: the intact log takes ceil(600 / frames a batch)
    batches and no frame checksummed alone in Python (before: all 600 one by one); a flipped
    bit in frame 3 is found the same both ways."""
    wal = _live_wal(tmp_path, 600)
    data = wal.read_bytes()
    checked = _Wal(data)
    assert checked.damage() is None and find_damage(str(wal)) is None
    assert checked.frames >= 600 and checked.per_batch == (1 << 20) // (24 + 4096) == 254
    assert checked.batches == math.ceil(checked.frames / checked.per_batch)
    assert checked.singles == 0
    one_by_one = _Wal(data, batch=False)
    assert one_by_one.damage() is None and one_by_one.singles == checked.frames
    damaged = bytearray(data)
    damaged[32 + 2 * (24 + 4096) + 24 + 700] ^= 0x20
    found = _Wal(bytes(damaged)).damage()
    assert found is not None and found.bad_frame == 3
    assert found == _Wal(bytes(damaged), batch=False).damage()
