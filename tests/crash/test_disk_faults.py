"""§4 of the reliability campaigns, bounded: SQLite under an fsync / fdatasync / pwrite
that fails with EIO (strace's fault injection) and a full disk (a 1 MiB tmpfs mounted and
unmounted here). An I/O error is an error, never a success; every acknowledged write is in
the file afterwards; the store takes writes again after the fault; a flipped ``-wal`` is
refused, never read with its last transactions silently dropped. The whole corruption
campaign and the synchronous=NORMAL figures run in ``make chaos``
(benchmarks/chaos/disk_faults.py)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.crash, pytest.mark.slow]

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks" / "chaos"))
import disk_faults  # noqa: E402

REQUIRE_SERVICES = os.environ.get("SUREFOOT_REQUIRE_SERVICES") == "1"


def needs_root_and(tool: str) -> None:
    reason = None
    if os.geteuid() != 0:
        reason = "needs root (strace's fault injection, mounting a tmpfs)"
    elif shutil.which(tool) is None:
        reason = f"{tool} is not installed"
    if reason is not None:
        if REQUIRE_SERVICES:
            pytest.fail(f"{reason}, and SUREFOOT_REQUIRE_SERVICES=1 requires it")
        pytest.skip(reason)


@pytest.mark.parametrize(("syscalls", "when"), [("fdatasync,fsync", 17), ("pwrite64", 90)])
def test_an_io_error_is_an_error_and_the_store_goes_on(
    tmp_path: Path, syscalls: str, when: int
) -> None:
    needs_root_and("strace")
    r = disk_faults.eio(tmp_path, syscalls, when, 30)
    assert r["error_count"] == 1 and "disk I/O error" in r["errors"][0], r
    assert r["acked_missing"] == [] and r["failed_but_present"] == [], r
    assert r["writes_after_error_same_process"] >= 1 and r["writes_after_restart"] == 3, r
    assert r["ok"]


def test_a_full_disk_is_an_error_and_room_again_lets_writes_in(tmp_path: Path) -> None:
    needs_root_and("mount")
    r = disk_faults.enospc(tmp_path, 30)
    assert r["error_count"] >= 1 and "disk is full" in r["errors"][0], r
    assert r["acked_missing"] == [] and r["writes_after_room"] == 3 and r["ok"], r


@pytest.mark.parametrize("seed", [1, 2])
def test_after_an_emulated_power_loss_every_acknowledged_write_is_there(
    tmp_path: Path, seed: int
) -> None:
    """synchronous=FULL: the writer SIGKILLed, then the -wal cut back to what had been
    synced (as strace saw the writes and syncs): nothing acknowledged is missing."""
    needs_root_and("strace")
    r = disk_faults.power_loss(tmp_path, "FULL", 30, seed)
    assert r["acked"] >= 1 and r["acked_lost"] == 0 and r["error"] is None, r


def test_synchronous_normal_loses_what_its_documentation_says(tmp_path: Path) -> None:
    """synchronous=NORMAL syncs the -wal only at checkpoints: a power loss takes the
    acknowledged writes since the last one (here all: no checkpoint yet), and the file
    still opens."""
    needs_root_and("strace")
    r = disk_faults.power_loss(tmp_path, "NORMAL", 30, 1)
    assert r["acked"] >= 1 and r["acked_lost"] == r["acked"] and r["error"] is None, r


def test_a_wal_with_flipped_bits_is_refused_never_read_short(tmp_path: Path) -> None:
    """The corruption campaign's -wal bit flips, 4 trials: each copy is refused with
    CorruptionError (before #27 every one opened and silently served the data of before
    its last transactions)."""
    r = disk_faults.corruption(tmp_path, 30, 4, seed=7, kinds=("wal-bitflip",))
    assert r["by_kind"]["wal-bitflip"]["refused"] == 4, r


def test_a_cut_wal_is_refused_with_the_witness_and_lost_without(tmp_path: Path) -> None:
    """The corruption campaign's -wal cuts, 4 trials each way: without ``?witness=on``
    every copy opens with its last transactions silently gone (documented as not
    detectable); with it every copy is refused, by the witness."""
    (tmp_path / "off").mkdir()
    (tmp_path / "on").mkdir()
    off = disk_faults.corruption(tmp_path / "off", 30, 4, seed=7, kinds=("wal-truncate",))
    on = disk_faults.corruption(
        tmp_path / "on", 30, 4, seed=7, kinds=("wal-truncate",), witness=True
    )
    assert off["by_kind"]["wal-truncate"]["lost"] == 4, off
    assert on["by_kind"]["wal-truncate"]["refused"] == 4, on
    assert on["refused_by_witness"]["wal-truncate"] == 4 and on["ok"], on


def test_where_traces_a_hidden_key_to_the_index_entry_its_flip_hit(tmp_path: Path) -> None:
    """``--where`` on the campaign's database bit flips (seed 1, as in docs/reliability.md
    section 4): the one trial that silently lost a key lists the flipped bits with their
    pages and b-trees, one in the Store's primary-key index, and the key it hid."""
    r = disk_faults.corruption(tmp_path, 60, 14, seed=1, kinds=("db-bitflip",), where=True)
    lost = [w for w in r["where"] if w["outcome"] == "lost"]
    assert [(w["trial"], w["missing"]) for w in lost] == [(13, ["k9"])], r["where"]
    assert len(lost[0]["flips"]) == 8
    assert "page 5, sqlite_autoindex_sf_state_1 (leaf), offset 3955" in lost[0]["flips"][0]


def test_with_the_witness_and_check_full_no_damage_is_read_short(tmp_path: Path) -> None:
    """Seed 2's first 16 database bit flips under ``?witness=on``: 2 of them hide keys in
    the Store's key index, unseen without ``?check=full`` (documented); with it both are
    refused, and with both options no trial of either kind loses data silently."""
    (tmp_path / "off").mkdir()
    (tmp_path / "full").mkdir()
    kinds = ("db-bitflip", "wal-truncate")
    off = disk_faults.corruption(tmp_path / "off", 60, 16, seed=2, kinds=kinds, witness=True)
    both = disk_faults.corruption(
        tmp_path / "full", 60, 16, seed=2, check="full", kinds=kinds, witness=True
    )
    assert off["by_kind"]["db-bitflip"]["lost"] == 2, off
    assert all(t["lost"] == 0 and t["wrong"] == 0 for t in both["by_kind"].values()), both
    assert both["by_kind"]["wal-truncate"]["refused"] == 16 and both["ok"], both
