"""The chaos run on PostgreSQL, small: real workers SIGKILLed while they share one schema
(the server restart runs in the lab and ``surefoot lab chaos``, not here: it would cut every
other test using the server)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from surefoot.cli import cli
from surefoot_lab import context, get
from surefoot_lab.durable import scaleout

pytestmark = [pytest.mark.services, pytest.mark.crash]


def test_lab_chaos_postgres_quick_completes_without_duplicates(pg_url: str) -> None:
    """Quick lab run: every run succeeds, no duplicate post, no model call repeated after its
    step was journalled, every run's journal/audit/effects consistent, workers were killed."""
    with context(quick=True, db=pg_url) as ctx:
        res = get("durable.chaos-postgres").run(ctx)
    f = res.facts
    assert f["completed"] == f["runs"] == 12
    assert f["duplicate_effects"] == 0
    assert f["repeated_after_journal"] == 0
    assert f["inconsistent_runs"] == 0
    assert f["kills"] >= 1
    assert f["restart"] == "not requested"


def test_cli_chaos_reports_and_writes_json(pg_url: str, tmp_path: Path) -> None:
    """`surefoot lab chaos` runs, prints its checks, exits 0 and writes the JSON results."""
    out = tmp_path / "chaos.json"
    result = CliRunner().invoke(
        cli,
        [
            "lab",
            "chaos",
            "--db",
            pg_url,
            "--workers",
            "1",
            "--runs",
            "4",
            "--no-restart",
            "--max-kills",
            "1",
            "--time-limit",
            "60",
            "--json",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "duplicate effects" in result.output
    data = json.loads(out.read_text())
    assert data["ok"] is True and data["completed"] == 4 and data["duplicate_effects"] == 0
    assert data["kills"] <= 1


def test_chaos_refuses_redis_and_a_preset_schema(pg_url: str, tmp_path: Path) -> None:
    """A Redis URL (no journal) or a URL with its own ?schema= is a clear ConfigError."""
    from surefoot.errors import ConfigError

    with pytest.raises(ConfigError, match="Redis does not offer the journal"):
        scaleout.chaos_run("redis://127.0.0.1:6379/0", workdir=str(tmp_path))
    with pytest.raises(ConfigError, match="leave \\?schema= out"):
        scaleout.chaos_run(f"{pg_url}?schema=mine", workdir=str(tmp_path))


@pytest.mark.parametrize(
    ("url", "listing", "expected"),
    [
        (
            "postgresql://u@127.0.0.1:5433/db",
            "15 main 5432 online postgres /d /l\n15 side 5433 online postgres /d /l\n",
            ["pg_ctlcluster", "--skip-systemctl-redirect", "15", "side", "restart"],
        ),
        ("postgresql://u@localhost/db", "15 main 5432 down postgres /d /l\n", None),
        ("postgresql://u@db.example.com:5432/db", "15 main 5432 online postgres /d /l\n", None),
    ],
)
def test_restart_command_targets_the_local_cluster_on_the_urls_port(
    monkeypatch: pytest.MonkeyPatch, url: str, listing: str, expected: list[str] | None
) -> None:
    """The restart command names the online local cluster on the URL's port, else None."""

    def fake_run(argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        assert argv[0] == "pg_lsclusters"
        return subprocess.CompletedProcess(argv, 0, stdout=listing, stderr="")

    monkeypatch.setattr(scaleout.subprocess, "run", fake_run)
    assert scaleout.find_restart_command(url) == expected
