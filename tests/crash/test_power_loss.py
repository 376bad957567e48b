"""§4 power loss, bounded: surefoot's SQLite journal on ``lossyfs`` (a FUSE file system
that keeps unsynced data in memory only, benchmarks/chaos/lossyfs.py); the writer is
SIGKILLed, the power cut (unsynced data dropped, the last write torn), the file system
mounted again and the acknowledged steps counted. The full campaign is
benchmarks/chaos/power_loss.py in ``make chaos``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.crash, pytest.mark.slow]

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks" / "chaos"))
import power_loss  # noqa: E402


@pytest.fixture(autouse=True)
def _needs_fuse() -> None:
    why = power_loss.fuse_unavailable()
    if why is not None:
        # What .ci/run installs (fuse3, mfusepy) must be there; a machine without /dev/fuse
        # or root cannot be given them by an install.
        installable = "root" not in why and "/dev/fuse" not in why
        if installable and os.environ.get("SUREFOOT_REQUIRE_SERVICES") == "1":
            pytest.fail(f"{why}, and SUREFOOT_REQUIRE_SERVICES=1 requires it")
        pytest.skip(why)


def test_after_a_power_cut_every_acknowledged_step_is_there(tmp_path: Path) -> None:
    """synchronous=FULL, the last unsynced write torn by the cut: no acknowledged step
    is missing, and the journal opens."""
    r = power_loss.power_cut(tmp_path, "FULL", 20, 1, True)
    assert r["cut"] and r["dropped_pages"] >= 1, r  # the cut did drop unsynced data
    assert r["acked"] >= 1 and r["acked_lost"] == 0 and r["error"] is None, r
    assert r["ok"], r


def test_with_the_witness_a_power_cut_is_no_false_alarm(tmp_path: Path) -> None:
    """``?witness=on``, the last unsynced write torn by the cut: the witness (synced after
    each commit) is never ahead of what the cut left, so the journal opens, not refused,
    with every acknowledged step."""
    r = power_loss.power_cut(tmp_path, "FULL", 20, 2, True, witness=True)
    assert r["cut"] and r["dropped_pages"] >= 1, r
    assert r["acked"] >= 1 and r["acked_lost"] == 0 and r["error"] is None and r["ok"], r


def test_synchronous_normal_loses_the_steps_since_the_last_sync(tmp_path: Path) -> None:
    """synchronous=NORMAL fsyncs the -wal only at checkpoints; before the first one a
    power cut takes every acknowledged step (the file stays a sound database)."""
    r = power_loss.power_cut(tmp_path, "NORMAL", 20, 1, False)
    assert r["acked"] >= 1 and r["acked_lost"] == r["acked"], r
    assert r["error"] is None and r["acked_before_last_wal_sync"] == 0 and r["ok"], r


def test_a_disk_whose_fsync_lies_is_caught(tmp_path: Path) -> None:
    """The campaign can fail: on a disk whose fsync syncs nothing, FULL loses
    acknowledged steps and the run is flagged."""
    r = power_loss.power_cut(tmp_path, "FULL", 12, 1, False, lie=True)
    assert r["acked"] >= 1 and r["acked_lost"] == r["acked"] and not r["ok"], r


@pytest.mark.parametrize("appendfsync", ["always", "everysec"])
def test_redis_loses_on_a_power_cut_only_what_its_appendfsync_allows(
    tmp_path: Path, appendfsync: str
) -> None:
    """A private redis-server with its append-only file on lossyfs, surefoot's Store
    writing, everything frozen and the power cut: with ``always`` no acknowledged write
    is lost; with ``everysec`` only writes acknowledged within Redis's documented window."""
    import redis_power_loss

    if redis_power_loss.redis_server() is None:
        pytest.skip("redis-server is not installed")
    r = redis_power_loss.redis_cut(tmp_path, appendfsync, 2.0, 1)
    assert r["acked"] >= 1 and r["error"] is None, r
    if appendfsync == "always":
        assert r["acked_lost"] == 0, r
    assert r["oldest_lost_ms_before_cut"] <= redis_power_loss.EVERYSEC_BOUND_MS and r["ok"], r
