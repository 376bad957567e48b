"""§1 of the reliability campaigns, bounded: a few seconds of random Store and Stream
operations from three OS processes while they are SIGKILLed and SIGSTOPped (and, on
PostgreSQL and Redis, their connections cut), then the history checked and every unknown
outcome resolved. The full campaign is ``make chaos`` (benchmarks/chaos/store_campaign.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.crash, pytest.mark.slow]

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "chaos" / "store_campaign.py"


def campaign(backend: str, tmp_path: Path, seconds: float = 6.0, *extra: str) -> dict:
    out = tmp_path / "report.json"
    cmd = [sys.executable, str(SCRIPT), "--backend", backend, "--seconds", str(seconds)]
    cmd += ["--workers", "3", "--interval", "0.3", "--seed", "7", "--json", str(out), *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.exists(), done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert done.returncode == (1 if report["anomalies_total"] else 0), done.stdout
    return report


def assert_clean(report: dict, *fault_kinds: str) -> None:
    assert report["anomalies_total"] == 0, json.dumps(report["reports"], indent=1)
    assert report["operations"] > 200
    for kind in fault_kinds:
        assert report["faults"].get(kind, 0) >= 1, report["faults"]
    # every unknown outcome was found applied once or not at all (or changes nothing)
    infos = report["by_type"].get("info", 0)
    assert sum(report["unknown"]["resolved"].values()) == infos
    assert report["unknown"]["applied-twice-or-torn"] == []


def test_the_campaign_finds_a_planted_lost_update(tmp_path: Path) -> None:
    """Writes that ignore their ``expect`` (recorded as compare-and-sets) are flagged."""
    report = campaign("sqlite", tmp_path, 4.0, "--plant", "drop-expect")
    assert report["anomalies"]["register"].get("cas-wrong-version", 0) >= 1, report


def test_sqlite_under_kills_and_pauses(tmp_path: Path) -> None:
    assert_clean(campaign("sqlite", tmp_path), "kill", "pause")


@pytest.mark.services
def test_postgres_under_kills_pauses_and_terminated_backends(pg_url: str, tmp_path: Path) -> None:
    assert_clean(campaign("postgres", tmp_path, 8.0), "pg-terminate")


@pytest.mark.services
def test_redis_under_kills_pauses_and_killed_clients(redis_url: str, tmp_path: Path) -> None:
    assert_clean(campaign("redis", tmp_path, 8.0), "client-kill")


@pytest.mark.parametrize("appendfsync", ["always", "everysec"])
def test_redis_under_server_kills_and_restarts(tmp_path: Path, appendfsync: str) -> None:
    """A Redis of the campaign's own (append-only file on) SIGKILLed and restarted from its
    file mid-run: no anomaly, and no acknowledged write lost (a process kill leaves what
    Redis wrote to its file before answering in the OS's page cache, under both modes)."""
    pytest.importorskip("redis")
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    report = campaign("redis", tmp_path, 8.0, "--private-redis", appendfsync)
    assert_clean(report, "server-kill")
    assert report["acked_lost"]["count"] == 0, report["acked_lost"]


def test_a_redis_that_keeps_nothing_is_caught_losing_writes(tmp_path: Path) -> None:
    """The campaign can fail: the private Redis without its append-only file loses every
    acknowledged write at its first restart, and that is flagged."""
    pytest.importorskip("redis")
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    report = campaign("redis", tmp_path, 6.0, "--private-redis", "off")
    assert report["faults"].get("server-kill", 0) >= 1, report["faults"]
    assert report["acked_lost"]["count"] >= 1 and report["anomalies_total"] >= 1, report
