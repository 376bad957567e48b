"""§3 of the reliability campaigns, bounded: a holder of a durable run, an idempotency key
and a Store lock is frozen (SIGSTOP) past its lease, another takes over, the first is woken
(SIGCONT), with its clock as is and skewed by -30 s (libfaketime: on SQLite its lease looks
expired at once to everyone else) and, on PostgreSQL, +30 s (leases there are on the
database's clock). SQLite's +30 s (a 31 s takeover) runs in ``make chaos``
(benchmarks/chaos/paused_holders.py), which prints what each scenario saw."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.crash, pytest.mark.slow]

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "chaos" / "paused_holders.py"
sys.path.insert(0, str(SCRIPT.parent))
from paused_holders import libfaketime  # noqa: E402

REQUIRE_SERVICES = os.environ.get("SUREFOOT_REQUIRE_SERVICES") == "1"


def needs_libfaketime() -> None:
    if libfaketime() is None:
        reason = "libfaketime is not installed (apt-get install -y faketime)"
        if REQUIRE_SERVICES:
            pytest.fail(f"{reason}, and SUREFOOT_REQUIRE_SERVICES=1 requires it")
        pytest.skip(reason)


def holders(backend: str, skew: int, tmp_path: Path) -> list[dict]:
    out = tmp_path / "paused.json"
    cmd = [sys.executable, str(SCRIPT), "--backend", backend, "--skews", str(skew)]
    done = subprocess.run([*cmd, "--json", str(out)], capture_output=True, text=True, timeout=150)
    assert out.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads(out.read_text())
    assert [r["scenario"] for r in results] == ["journal", "key", "lock"]
    return results


def assert_safe(results: list[dict]) -> None:
    try:
        check_safe(results)
    except AssertionError as exc:
        exc.add_note(json.dumps(results, indent=1, default=str))
        raise


def check_safe(results: list[dict]) -> None:
    journal, key, lock = results
    # no journal write from the stale epoch landed; the stale holder stopped by itself
    assert (
        journal["step_epochs"] == [journal["epoch"]] and journal["stale_epoch"] < journal["epoch"]
    )
    assert journal["stale_stopped"] and journal["live"] and journal["effects_applied"] == 1
    assert len(journal["effect_keys"]) == 1  # the stale effect (if any) carried the old key
    # the key ran twice (documented takeover) but carried one key, applied once, one answer
    assert key["effect_keys"] == ["K"] and key["effects_applied"] == 1
    assert key["stale_holder"][-1] == {"returned": "B", "saved": '"B"'}
    # the stale lock holder's fenced write was refused
    assert lock["stale_write"] == "refused" and lock["guarded_history"] == ["B"]
    assert all(r["ok"] for r in results)


def test_sqlite_paused_holders(tmp_path: Path) -> None:
    assert_safe(holders("sqlite", 0, tmp_path))


def test_sqlite_paused_holders_with_a_clock_30_s_behind(tmp_path: Path) -> None:
    needs_libfaketime()
    assert_safe(holders("sqlite", -30, tmp_path))


@pytest.mark.services
def test_postgres_paused_holders_with_a_clock_30_s_behind(pg_url: str, tmp_path: Path) -> None:
    needs_libfaketime()
    assert_safe(holders("postgres", -30, tmp_path))


@pytest.mark.services
def test_postgres_paused_holders_with_a_clock_30_s_ahead(pg_url: str, tmp_path: Path) -> None:
    """On the database's clock the skew changes nothing: before, the run was parked
    ``needs_attention`` (the holder's libfaketime-stalled heartbeats and its +30 s leases)
    and the key and the lock waited out a 31 s lease."""
    needs_libfaketime()
    assert_safe(holders("postgres", 30, tmp_path))
