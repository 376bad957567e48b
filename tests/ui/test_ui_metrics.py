"""The inspector's ``/metrics``: Prometheus text over its journal, behind the same guard."""

from __future__ import annotations

from pathlib import Path

from ui_support import make_client

from surefoot import durable


def _small_journal(tmp_path: Path) -> str:
    """A journal with 1 succeeded run and 2 pending ones."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    app = durable.App(url)

    @app.workflow
    def echo(x: int) -> int:
        return x

    app.start("echo", 1, run_id="done-1").result(timeout=10)
    app.enqueue("echo", 2, run_id="wait-2")
    app.enqueue("echo", 3, run_id="wait-3")
    app.close()
    return url


def test_metrics_route_serves_runs_by_state_and_queue_depth(tmp_path: Path) -> None:
    """GET /metrics answers 200 in the Prometheus text format with the journal's counts."""
    c = make_client(_small_journal(tmp_path))
    r = c.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    lines = r.text.splitlines()
    assert "# TYPE surefoot_runs gauge" in lines
    assert 'surefoot_runs{state="succeeded"} 1' in lines
    assert 'surefoot_runs{state="pending"} 2' in lines
    assert 'surefoot_runs{state="failed"} 0' in lines
    assert "surefoot_queue_depth 2" in lines


def test_metrics_route_refuses_other_hosts_and_missing_tokens(tmp_path: Path) -> None:
    """A non-loopback Host gets 421 and a token-guarded server 401, as the pages do."""
    url = _small_journal(tmp_path)
    r = make_client(url).get("/metrics", headers={"host": "evil.example:8765"})
    assert r.status_code == 421
    assert "surefoot_runs" not in r.text
    guarded = make_client(url, token="s3cret-token")
    assert guarded.get("/metrics").status_code == 401
    ok = guarded.get("/metrics", headers={"authorization": "Bearer s3cret-token"})
    assert ok.status_code == 200 and "surefoot_queue_depth 2" in ok.text.splitlines()
