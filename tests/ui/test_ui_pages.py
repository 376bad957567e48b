"""The inspector's pages, read without a browser: what each one shows of the journal."""

from __future__ import annotations

import html as html_lib
import re
from typing import Any

import pytest
from ui_support import make_client


@pytest.fixture(scope="module")
def client(demo: dict[str, Any]) -> Any:
    """A client on the demo journal and store."""
    return make_client(demo["db"], demo["store"])


def _run_ids(html: str) -> list[str]:
    return re.findall(r'<a class="runid" href="/run\?id=[^"]*">([^<]*)</a>', html)


def test_runs_page_counts_every_state_and_lists_attention_first(client: Any) -> None:
    """The runs page counts runs per state and lists needs_attention runs before the rest."""
    html = client.get("/runs").text
    for state, n in {"needs attention": 2, "sleeping": 2, "failed": 1, "cancelled": 1}.items():
        assert re.search(rf"{state} <b>{n}</b>", html), state
    ids = _run_ids(html)
    assert len(ids) == 12
    assert set(ids[:2]) == {"trip-rome", "notify-ops"}


def test_runs_page_filters_by_state_workflow_version_and_search(client: Any) -> None:
    """Each filter narrows the list to the matching runs."""
    assert _run_ids(client.get("/runs?state=sleeping").text) == ["approval-42", "digest-daily"]
    assert set(_run_ids(client.get("/runs?workflow=trip").text)) == {"trip-rome"}
    assert set(_run_ids(client.get("/runs?version=3").text)) == {"trip-rome"}
    assert set(_run_ids(client.get("/runs?q=digest").text)) == {
        "digest-daily",
        "digest-cancelled",
    }
    assert len(_run_ids(client.get("/runs?age=1h").text)) == 12
    assert "no runs match" in client.get("/runs?q=nothing-like-this").text


def test_runs_page_is_paginated(tmp_path: Any) -> None:
    """120 runs show 50 per page over 3 pages, none twice and none missing."""
    from surefoot.durable import App

    db = f"sqlite:///{tmp_path / 'many.db'}"
    with App(db) as app:

        @app.workflow(name="w")
        def w() -> None:
            return None

        for i in range(120):
            app.enqueue("w", run_id=f"r-{i:03d}")
    c = make_client(db)
    pages = [_run_ids(c.get(f"/runs?page={p}").text) for p in (1, 2, 3)]
    assert [len(p) for p in pages] == [50, 50, 20]
    assert sorted(i for p in pages for i in p) == [f"r-{i:03d}" for i in range(120)]
    assert "page 3 of 3" in c.get("/runs?page=99").text


def test_saga_page_tells_what_was_and_was_not_undone(client: Any) -> None:
    """The saga's page shows its compensations, the undone and not-undone effects, keys."""
    html = client.get("/run?id=trip-rome").text
    assert "needs attention" in html
    assert "the hotel provider refused the cancellation (HTTP 503)" in html
    assert "<b>undone:</b> <code>book 3</code>" in html
    assert "<code>book 2</code>, <code>book 1</code>" in html
    for pos in ("1", "2", "3"):
        assert f"trip-rome:{pos}" in html  # the derived idempotency keys of the effects
    assert "5bb9" in html or "structure hash" in html


def test_unknown_outcome_is_marked_and_offers_resolve(client: Any) -> None:
    """An effect started and never journalled shows as intent without outcome, with Resolve."""
    html = client.get("/run?id=notify-ops").text
    assert "intent, no outcome" in html
    assert "do=resolve&amp;step=1" in html


def _audit_rows(html: str) -> list[tuple[str, str, str]]:
    """(actor, action, story caption) of each audit-log row, in order."""
    rows = re.findall(
        r'<tr class="a-[^"]*"><td class="num">\d+</td><td>[^<]*</td><td class="mono">([^<]*)'
        r'</td><td><b>([^<]*)</b>(?:<div class="story[^"]*">(.*?)</div>)?</td>',
        html,
    )
    return [(html_lib.unescape(a), b, html_lib.unescape(c)) for a, b, c in rows]


def test_taken_over_run_tells_its_whole_story(client: Any) -> None:
    """worker-a claimed and froze; after its lease worker-b took over (previous epoch 1),
    worker-a's late write was refused; worker-b's steps are epoch 2, the effect keyed."""
    html = client.get("/run?id=research-crash").text
    assert _audit_rows(html) == [
        ("app", "created", ""),
        ("worker-a", "claimed", "claimed at epoch 1"),
        ("worker-b", "taken_over", "took it over from epoch 1, whose lease had expired"),
        ("worker-a", "lease_lost", "late write refused (fenced: epoch 1 is stale)"),
    ]
    text = html_lib.unescape(html)
    assert '"previous_epoch": 1' in text and "stalled past its lease" in text
    assert "was taken over by another worker, so its write was refused" in text
    assert re.search(r"<dt>epoch</dt><dd>2</dd>", html)
    assert re.search(r"<dt>claims</dt><dd>2 ", html)  # worker-a's claim, then worker-b's
    steps = re.findall(
        r'<tr class="k-(\w+) s-\w+">\s*<td class="mono">(\d+)</td><td>(\w+)</td>.*?'
        r'<td class="num">(\d+)</td><td class="num">(\d+)</td>',
        html,
        re.S,
    )
    # pos, name, epoch: step 1 replayed from worker-a's journal, 2 and 3 run by worker-b
    assert [(p, n, e) for _, p, n, _, e in steps] == [
        ("1", "plan", "1"),
        ("2", "summarize", "2"),
        ("3", "publish", "2"),
    ]
    assert "research-crash:3" in html  # the effect's idempotency key


def test_marked_answer_shows_an_escaped_untrusted_banner(client: Any) -> None:
    """A run whose result is a marked Answer gets the banner naming its untrusted sources;
    the answer's HTML stays text."""
    html = client.get("/run?id=answer-tides").text
    assert '<div class="notice untrusted" role="alert">' in html
    assert (
        "<b>This answer is derived from untrusted data</b>: sources <code>web-reader</code>" in html
    )
    assert "not endorsed" in html
    assert "&lt;b&gt;(source: tides-blog)&lt;/b&gt;" in html
    assert "<b>(source: tides-blog)</b>" not in html
    assert 'class="st st-untrusted">untrusted answer' in html
    plain = client.get("/run?id=research-ok").text
    assert "notice untrusted" not in plain and "untrusted answer" not in plain


def test_stuck_run_shows_its_expired_lease_and_holder(client: Any) -> None:
    """A run whose worker died shows its holder and that the lease expired."""
    html = client.get("/run?id=research-stuck").text
    assert "Its lease expired" in html and "worker-a" in html


def test_waiting_run_shows_signal_name_and_deadline(client: Any) -> None:
    """A run waiting for a signal names it and shows the timeout's deadline."""
    html = client.get("/run?id=approval-42").text
    assert "signal <code>approve</code>, deadline" in html


def test_fork_lineage_links_both_ways(client: Any) -> None:
    """A fork links to its parent, and the parent lists the fork."""
    assert (
        'href="/run?id=research-ok">research-ok</a>' in client.get("/run?id=research-ok-fork").text
    )
    assert 'href="/run?id=research-ok-fork"' in client.get("/run?id=research-ok").text


def test_large_value_is_folded_with_its_full_text(client: Any) -> None:
    """A long result is folded behind <details>, and the whole text is on the page."""
    html = client.get("/run?id=research-ok").text
    assert "<details" in html and "show all" in html
    full = "Details follow. " * 40
    assert full.strip() in html


def test_unknown_run_is_a_clear_404(client: Any) -> None:
    """A run id that is not in the journal gets the API's message, status 404."""
    r = client.get("/run?id=no-such-run")
    assert r.status_code == 404
    assert "no-such-run" in r.text and "surefoot: error:" in r.text


def test_workers_page_lists_lease_holders_and_stranded_runs(client: Any) -> None:
    """With no live worker, waiting runs are stranded; the dead worker still holds a lease."""
    html = client.get("/workers").text
    assert "no worker has reported" in html or "<td>research</td>" in html
    assert "worker-a" in html and "expired" in html
    stranded = html.split("Stranded runs", 1)[1]
    assert "research-queued" in stranded and "approval-42" in stranded


def test_state_page_shows_value_version_author_and_trust(client: Any) -> None:
    """Each key shows its version, author and trust label next to the value."""
    html = client.get("/state").text
    row = html.split("notes/source-1", 1)[1].split("</tr>", 1)[0]
    assert "web-reader" in row and "t-untrusted" in row and "https://example.org/a" in row
    assert "planner" in html and "t-trusted" in html


def test_streams_page_shows_positions_and_dead_letters(client: Any) -> None:
    """The stream page shows the consumer's position and both dead letters with reasons."""
    html = client.get("/streams").text
    assert "last sequence number 5" in html
    assert "schema: missing field &#39;url&#39;" in html
    assert "max_attempts" in html
    assert "summarize page 4" in html and "summarize page 2" in html


def _scanned(src: Any, q: Any, now: float) -> tuple[Any, ...]:
    """The runs page computed in Python from every run (the reference of the SQL path)."""
    from collections import Counter

    from surefoot.durable import STATUSES

    runs = src.app.list_runs(limit=10**9)
    oldest = None if q.max_age is None else now - q.max_age
    rows = [
        r
        for r in runs
        if (not q.state or r.status == q.state)
        and (not q.workflow or r.workflow == q.workflow)
        and (not q.version or r.version == q.version)
        and (oldest is None or r.created_at >= oldest)
        and (not q.search or q.search in r.run_id)
    ]
    rows.sort(key=lambda r: (r.status != "needs_attention", -r.created_at, r.run_id))
    pages = max(1, -(-len(rows) // q.per_page))
    page = min(max(1, q.page), pages)
    counts = Counter(r.status for r in runs)
    return (
        [r.run_id for r in rows[(page - 1) * q.per_page : page * q.per_page]],
        len(rows),
        {s: counts.get(s, 0) for s in STATUSES},
        len(runs),
        page,
        pages,
        sorted({r.workflow for r in runs}),
        sorted({r.version for r in runs}),
    )


@pytest.mark.parametrize(
    "query",
    [
        {},
        {"state": "sleeping"},
        {"workflow": "research", "version": "2"},
        {"search": "digest"},
        {"max_age": 3600.0},
        {"per_page": 3, "page": 2},
        {"per_page": 3, "page": 99},
    ],
)
def test_runs_page_equals_a_scan_of_every_run(demo: dict[str, Any], query: Any) -> None:
    """The paged SQL listing gives the same rows, order, totals and counts as a full scan."""
    import time

    from surefoot.ui import Inspector, RunsQuery

    src = Inspector(demo["db"])
    q, now = RunsQuery(**query), time.time()
    try:
        fast, slow = src.runs_page(q, now=now), _scanned(src, q, now)
    finally:
        src.close()
    got = (
        [r.run_id for r in fast.rows],
        fast.total,
        fast.counts,
        fast.all_runs,
        fast.page,
        fast.pages,
        fast.workflows,
        fast.versions,
    )
    assert got == slow


def test_workers_page_says_when_no_worker_registered(client: Any) -> None:
    """The demo ran no Worker, so the workers table is empty and says so."""
    html = client.get("/workers").text
    seen = html.split("Workers seen", 1)[1].split("</section>", 1)[0]
    assert '<span class="sub">0</span>' in seen
    assert "no worker has registered with this journal" in seen


def _one_step_workflow(app: Any) -> Any:
    @app.step
    def one() -> int:
        return 1

    @app.workflow
    def wf() -> int:
        return one() + one()

    return wf


def test_takeover_captions_come_from_the_recorded_reason(tmp_path: Any) -> None:
    """A run taken back under the same worker id before its lease expired is captioned as
    such (not "whose lease had expired"); an operator's resume says so too."""
    from surefoot import FakeClock
    from surefoot.durable import App, CrashPlan, SimulatedCrash, Worker

    db = f"sqlite:///{tmp_path / 'reasons.db'}"
    clock = FakeClock()
    for rid, wid in (("same-id", "w-1"), ("op", "w-2")):  # each left in flight at epoch 1
        with App(db, clock=clock, worker_id=wid, lease=60.0, poll=0.01) as app:
            wf = _one_step_workflow(app)
            app.crash = CrashPlan("after_journal", step="one")
            with pytest.raises(SimulatedCrash):
                app.start(wf, run_id=rid).result(timeout=10)
            app.crash = None
            if rid == "same-id":
                assert Worker(app).run_once(timeout=10) == 0  # taken back, lease unexpired
                assert app.handle(rid).result(timeout=10) == 2
    clock.advance(61.0)
    with App(db, clock=clock, worker_id="w-3", lease=60.0, poll=0.01) as third:
        _one_step_workflow(third)
        assert third.resume("op").result(timeout=10) == 2
    c = make_client(db)
    html = c.get("/run?id=same-id").text
    taken = [r for r in _audit_rows(html) if r[1] == "taken_over"]
    assert taken == [
        ("w-1", "taken_over", "took its own run back from epoch 1 under the same worker id, "
         "without waiting for the lease")
    ]  # fmt: skip
    assert "whose lease had expired" not in html
    taken = [r for r in _audit_rows(c.get("/run?id=op").text) if r[1] == "taken_over"]
    assert taken == [("w-3", "taken_over", "an operator resumed it here from epoch 1")]


def test_resolve_appears_only_when_the_run_needs_attention(tmp_path: Any) -> None:
    """An abandoned run (its holder gone mid-effect, lease expired) shows the step as
    intent, no outcome, without Resolve…, and says when Resolve… appears (as ui.md says);
    once a worker stops it as needs attention, Resolve… is there."""
    from surefoot import FakeClock
    from surefoot.durable import App, CrashPlan, SimulatedCrash, Worker

    db = f"sqlite:///{tmp_path / 'abandoned.db'}"
    clock = FakeClock()
    with App(db, clock=clock, worker_id="w-1", lease=5.0, poll=0.01) as app:

        @app.step(effect=True)
        def mail(to: str) -> str:  # takes no key: its outcome cannot be checked by rerun
            return f"sent to {to}"

        @app.workflow
        def notify() -> str:
            return mail("ops")

        app.crash = CrashPlan("after_effect", step="mail")
        with pytest.raises(SimulatedCrash):
            app.start(notify, run_id="abandoned").result(timeout=10)
        app.crash = None
        clock.advance(6.0)  # its lease runs out: abandoned
        c = make_client(db)
        html = c.get("/run?id=abandoned").text
        assert "intent, no outcome" in html and "Its lease expired" in html
        assert "do=resolve" not in html
        note = html_lib.unescape(re.sub(r"<[^>]+>", "", html))
        assert "only then does Resolve… appear here" in note
        assert "with its holder gone" in note
        with App(db, clock=clock, worker_id="w-2", lease=5.0, poll=0.01) as other:
            other.step(effect=True)(mail)
            other.workflow(notify)
            Worker(other).run_once(timeout=10)
            assert other.show("abandoned").run.status == "needs_attention"
        html = c.get("/run?id=abandoned").text
        assert "do=resolve&amp;step=1" in html and "only then does" not in html


def test_ui_doc_says_when_resolve_appears() -> None:
    from pathlib import Path

    doc = (Path(__file__).parents[2] / "docs" / "ui.md").read_text()
    text = " ".join(doc.split())
    assert "*Resolve…* appears only when the run needs attention" in text
