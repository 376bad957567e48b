"""§3 of the reliability campaigns, bounded: a live holder of a durable run, an idempotency
key and a Store lock keeps working while a second process whose clock runs 30 s ahead
(libfaketime) tries to take the same thing. Before leases were judged on the server's
clock, that process took each of them over on PostgreSQL and Redis (the work was done
twice; epochs fenced the holder's writes). On SQLite, before a live holder's lease was
also judged by observation, it took the durable run over 10 times (the run was parked
``needs_attention``), the key once (its action ran twice) and the lock once (the holder's
fenced write was refused). ``make chaos`` runs every skew
(benchmarks/chaos/skewed_contenders.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.crash, pytest.mark.slow]

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "chaos" / "skewed_contenders.py"
sys.path.insert(0, str(SCRIPT.parent))
from paused_holders import libfaketime  # noqa: E402


def needs_libfaketime() -> None:
    if libfaketime() is None:
        reason = "libfaketime is not installed (apt-get install -y faketime)"
        if os.environ.get("SUREFOOT_REQUIRE_SERVICES") == "1":
            pytest.fail(f"{reason}, and SUREFOOT_REQUIRE_SERVICES=1 requires it")
        pytest.skip(reason)


def contenders(backend: str, skew: int, tmp_path: Path, scenario: str = "all") -> list[dict]:
    out = tmp_path / "skewed.json"
    cmd = [sys.executable, str(SCRIPT), "--backend", backend, "--skews", str(skew)]
    cmd += ["--scenario", scenario]
    done = subprocess.run([*cmd, "--json", str(out)], capture_output=True, text=True, timeout=150)
    assert out.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    return list(json.loads(out.read_text()))


def summary(results: list[dict]) -> dict[str, tuple[int, int, int]]:
    """Per scenario: takeovers of the live holder, the contender's executions, stale writes."""
    return {
        r["scenario"]: (
            r["takeovers_of_live_holder"],
            r.get("contender_executions", 0),
            r["stale_writes_landed"],
        )
        for r in results
    }


def test_sqlite_a_process_30_s_ahead_takes_nothing_from_live_holders(tmp_path: Path) -> None:
    """A live holder's lease looks expired to the process 30 s ahead, but it judges it by
    observation too: the run's holder renews every second (never unchanged for a lease),
    the key's and the lock's holders end within their lease."""
    needs_libfaketime()
    results = contenders("sqlite", 30, tmp_path)
    seen = summary(results)
    assert seen == {"journal": (0, 0, 0), "key": (0, 0, 0), "lock": (0, 0, 0)}, results
    assert results[0]["status"] == "succeeded" and results[0]["fenced_writes"] == 0, results
    assert all(r["ok"] for r in results), results


@pytest.mark.services
def test_postgres_a_worker_30_s_ahead_takes_nothing_from_live_holders(
    pg_url: str, tmp_path: Path
) -> None:
    needs_libfaketime()
    results = contenders("postgres", 30, tmp_path)
    seen = summary(results)
    assert seen == {"journal": (0, 0, 0), "key": (0, 0, 0), "lock": (0, 0, 0)}, results
    assert all(r["ok"] for r in results), results


@pytest.mark.services
def test_redis_a_store_30_s_ahead_takes_no_live_lock(redis_url: str, tmp_path: Path) -> None:
    needs_libfaketime()
    results = contenders("redis", 30, tmp_path)
    assert summary(results) == {"lock": (0, 0, 0)}, results
    assert results[0]["guarded_history"] == ["A", "B"]
