"""The inspector's actions: confirmed POSTs that call the API the CLI calls, and refusals."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from ui_support import BASE, make_client

from surefoot.durable import App


@pytest.fixture
def fresh(tmp_path: Path) -> dict[str, Any]:
    """A fresh demo journal and store (actions change them) and a client on them."""
    import demo_journal

    db, store = f"sqlite:///{tmp_path / 'runs.db'}", f"sqlite:///{tmp_path / 'team.db'}"
    ids = demo_journal.build(db)
    demo_journal.build_store(store)
    return {"db": db, "store": store, "ids": ids, "client": make_client(db, store)}


def _csrf(client: Any, url: str) -> str:
    html = client.get(url).text
    m = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert m, "the confirmation page carries a CSRF token"
    return m.group(1)


def _post(client: Any, path: str, data: dict[str, str], confirm: str = "") -> Any:
    token = _csrf(client, confirm or f"/run/confirm?id={data['id']}&do={data['do']}")
    return client.post(path, data={**data, "csrf": token}, headers={"origin": BASE})


def _status(db: str, run_id: str) -> str:
    with App(db) as app:
        return app.show(run_id).run.status


def _actions(db: str, run_id: str) -> list[str]:
    with App(db) as app:
        return [a.action for a in app.show(run_id).audit]


def test_retry_sends_needs_attention_run_back_and_audits_it(fresh: dict[str, Any]) -> None:
    """Retry after confirmation moves the saga to pending with a retry audit entry."""
    c, db = fresh["client"], fresh["db"]
    r = _post(
        c,
        "/run/do",
        {"id": "trip-rome", "do": "retry", "reason": "hotel API fixed"},
        "/run/confirm?id=trip-rome&do=retry",
    )
    assert r.status_code == 200 and "retried trip-rome: now pending" in r.text
    assert _status(db, "trip-rome") == "pending"
    assert _actions(db, "trip-rome")[-1] == "retry"


def test_a_failed_run_offers_retry_and_goes_back_to_work(fresh: dict[str, Any]) -> None:
    """A failed run's page has Retry…; confirmed, the run is pending again, audited with
    who and why, its completed steps kept."""
    c, db = fresh["client"], fresh["db"]
    page = c.get("/run?id=report-7").text
    assert "/run/confirm?id=report-7&amp;do=retry" in page
    confirm = c.get("/run/confirm?id=report-7&do=retry").text
    assert "a run that failed" in confirm
    with App(db) as app:
        kept = [s.pos for s in app.show("report-7").steps if s.status == "done"]
    r = _post(c, "/run/do", {"id": "report-7", "do": "retry", "reason": "disk replaced"})
    assert r.status_code == 200 and "retried report-7: now pending" in r.text
    with App(db) as app:
        d = app.show("report-7")
    assert d.run.status == "pending"
    assert [s.pos for s in d.steps if s.status == "done"] == kept
    entry = d.audit[-1]
    assert (entry.action, entry.actor, entry.detail["from"], entry.detail["reason"]) == (
        "retry",
        "operator",
        "failed",
        "disk replaced",
    )


def test_refused_retry_shows_the_api_error(fresh: dict[str, Any]) -> None:
    """Retrying a succeeded run is refused with the same message the CLI prints."""
    c, db = fresh["client"], fresh["db"]
    r = _post(c, "/run/do", {"id": "research-ok", "do": "retry"})
    assert r.status_code == 409
    assert (
        "surefoot: error: run &#39;research-ok&#39; is succeeded; only runs that need "
        "attention or failed can be retried" in r.text
    )
    assert _status(db, "research-ok") == "succeeded"


def test_cancel_signal_resolve_and_fork(fresh: dict[str, Any]) -> None:
    """Each action changes the journal as the API says and answers with what it did."""
    c, db = fresh["client"], fresh["db"]
    r = _post(c, "/run/do", {"id": "digest-daily", "do": "cancel", "reason": "x"})
    assert "cancelled digest-daily: now cancelled" in r.text
    r = _post(c, "/run/do", {"id": "digest-daily", "do": "cancel"})
    assert r.status_code == 409 and "has already ended; nothing to cancel" in r.text
    r = _post(
        c,
        "/run/do",
        {"id": "approval-42", "do": "signal", "name": "approve", "payload": '{"ok": true}'},
    )
    assert "signal &#39;approve&#39; sent to approval-42" in r.text
    r = _post(
        c, "/run/do", {"id": "notify-ops", "do": "resolve", "step": "1", "result": '"mail sent"'}
    )
    assert "resolved step 1 of notify-ops: now pending" in r.text
    with App(db) as app:
        assert app.show("notify-ops").steps[0].status == "done"
        assert app.show("notify-ops").steps[0].result == "mail sent"
    r = _post(c, "/run/do", {"id": "research-ok", "do": "fork", "step": "3", "new_id": "f2"})
    assert "forked research-ok at step 3 as f2" in r.text
    assert _status(db, "f2") == "pending"


def test_bad_json_payload_is_refused_with_the_cli_message(fresh: dict[str, Any]) -> None:
    """A payload that is not JSON is refused, naming the value, and nothing is sent."""
    c, db = fresh["client"], fresh["db"]
    r = _post(
        c, "/run/do", {"id": "approval-42", "do": "signal", "name": "approve", "payload": "yes"}
    )
    assert r.status_code == 409 and "PAYLOAD must be JSON, got &#39;yes&#39;" in r.text
    assert "signal" not in _actions(db, "approval-42")


def test_redrive_puts_a_dead_letter_back(fresh: dict[str, Any]) -> None:
    """Redrive of one dead letter leaves only the other one dead."""
    from surefoot.statebus import Stream

    c = fresh["client"]
    r = _post(
        c,
        "/streams/redrive",
        {"stream": "tasks", "consumer": "summarizers", "seq": "2"},
        "/streams/confirm?stream=tasks&consumer=summarizers&seq=2",
    )
    assert "redrove 1 dead letter of tasks/summarizers" in r.text
    s = Stream(fresh["store"], "tasks")
    assert [d.seq for d in s.consumer("summarizers").dead_letters()] == [4]
    s.close()


def test_post_without_csrf_token_changes_nothing(fresh: dict[str, Any]) -> None:
    """A POST without the form's token (or with a forged one) is refused with 403."""
    c, db = fresh["client"], fresh["db"]
    c.get("/runs")  # has the cookie, not the token
    for extra in ({}, {"csrf": "0" * 64}):
        r = c.post(
            "/run/do", data={"id": "trip-rome", "do": "retry", **extra}, headers={"origin": BASE}
        )
        assert r.status_code == 403 and "token is missing or stale" in r.text
    assert _status(db, "trip-rome") == "needs_attention"


def test_cross_origin_post_changes_nothing(fresh: dict[str, Any]) -> None:
    """A POST from another origin, or with no Origin nor Referer, is refused with 403."""
    c, db = fresh["client"], fresh["db"]
    token = _csrf(c, "/run/confirm?id=trip-rome&do=retry")
    data = {"id": "trip-rome", "do": "retry", "csrf": token}
    for headers in ({"origin": "http://evil.example"}, {"referer": "http://evil.example/x"}, {}):
        r = c.post("/run/do", data=data, headers=headers)
        assert r.status_code == 403 and "not sent from this inspector" in r.text
    assert _status(db, "trip-rome") == "needs_attention"


def test_actions_are_post_only(fresh: dict[str, Any]) -> None:
    """A GET to an action's URL does nothing (405); the confirm page itself changes nothing."""
    c, db = fresh["client"], fresh["db"]
    assert c.get("/run/do?id=trip-rome&do=retry").status_code == 405
    assert c.get("/run/confirm?id=trip-rome&do=retry").status_code == 200
    assert _status(db, "trip-rome") == "needs_attention"
