"""The inspector in a real browser (headless Debian chromium): pages, clicks, screenshots.

Screenshots go to a temporary folder, or to ``$SUREFOOT_UI_SCREENSHOTS`` (the docs' images
are refreshed with ``SUREFOOT_UI_SCREENSHOTS=docs/img``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from surefoot.durable import App

pytestmark = pytest.mark.browser


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    """Where screenshots go."""
    out = Path(os.environ.get("SUREFOOT_UI_SCREENSHOTS") or tmp_path / "shots")
    out.mkdir(parents=True, exist_ok=True)
    return out


def test_every_page_renders_with_its_story(live_server: Any, page: Any, shots: Path) -> None:
    """Each page shows what it is for, in the browser, and is kept as a screenshot."""
    u = live_server.url
    page.goto(f"{u}/runs")
    assert page.locator("tbody tr").count() == 12
    assert page.locator("tbody tr").first.locator("a.runid").inner_text() in {
        "trip-rome",
        "notify-ops",
    }
    page.screenshot(path=str(shots / "ui-runs.png"), full_page=True)

    page.goto(f"{u}/run?id=trip-rome")
    assert page.get_by_text("not undone:", exact=True).is_visible()
    page.locator("details.val summary").last.click()  # unfold the needs_attention detail
    assert page.locator("details.val[open]").count() == 1
    page.screenshot(path=str(shots / "ui-run-saga.png"), full_page=True)

    page.goto(f"{u}/run?id=research-crash")
    assert page.get_by_text("research-crash:3").is_visible()  # worker-b's effect, keyed
    # the crash story in the audit log, in order: worker-a's claim, worker-b's takeover after
    # the lease expired, worker-a's late write refused
    audit = page.locator("section", has=page.get_by_role("heading", name="Audit log"))
    rows = audit.locator("tbody tr")
    assert [rows.nth(i).locator("td").nth(2).inner_text() for i in range(4)] == [
        "app",
        "worker-a",
        "worker-b",
        "worker-a",
    ]
    stories = [rows.nth(i).locator("td").nth(3).inner_text() for i in range(1, 4)]
    assert stories == [
        "claimed\nclaimed at epoch 1",
        "taken_over\ntook it over from epoch 1, whose lease had expired",
        "lease_lost\nlate write refused (fenced: epoch 1 is stale)",
    ]
    assert rows.nth(3).get_by_text("late write refused", exact=False).is_visible()
    timeline = page.locator("section", has=page.get_by_role("heading", name="Timeline"))
    steps = timeline.locator("tbody tr")
    # step 1 replayed from worker-a's journal (epoch 1); 2 and 3 run by worker-b (epoch 2)
    assert [steps.nth(i).locator("td").nth(5).inner_text() for i in range(3)] == ["1", "2", "2"]
    assert steps.nth(2).locator("td").nth(8).inner_text() == "research-crash:3"
    page.screenshot(path=str(shots / "ui-run-resumed.png"), full_page=True)

    page.goto(f"{u}/run?id=answer-tides")
    banner = page.get_by_role("alert")
    assert banner.is_visible()
    assert banner.inner_text().startswith(
        "This answer is derived from untrusted data: sources web-reader, not endorsed."
    )
    assert "<b>(source: tides-blog)</b>" in banner.inner_text()  # shown as text
    assert banner.locator("b").count() == 1  # only the banner's own bold, none from the answer
    page.screenshot(path=str(shots / "ui-run-marked-answer.png"), full_page=True)

    page.goto(f"{u}/run?id=notify-ops")
    assert page.get_by_title("the effect was started and its outcome never journalled").is_visible()
    page.screenshot(path=str(shots / "ui-run-unknown-outcome.png"), full_page=True)

    page.goto(f"{u}/workers")
    assert page.get_by_text("Stranded runs").is_visible()
    page.screenshot(path=str(shots / "ui-workers.png"), full_page=True)

    page.goto(f"{u}/state")
    assert page.locator("span.t-untrusted").count() == 1
    page.screenshot(path=str(shots / "ui-state.png"), full_page=True)

    page.goto(f"{u}/streams")  # the inspector has no --stream: every stream is listed
    assert [h.split(" ", 1)[0] for h in page.locator("h2").all_inner_texts()] == [
        "tasks",
        "updates",
    ]
    assert page.locator("h3").inner_text() == "Dead letters of summarizers"
    updates = page.locator("section", has=page.get_by_role("heading", name="updates"))
    assert "3 messages kept, seq 4–6" in updates.locator("h2").inner_text()
    notifier = updates.locator("tr", has=page.get_by_role("cell", name="notifier", exact=True))
    # consumer group, position, lag, pending, dead letters
    assert notifier.locator("td").all_inner_texts()[:5] == ["notifier", "4", "2", "1", "0"]
    page.screenshot(path=str(shots / "ui-streams.png"), full_page=True)
    assert page.dialogs == []


def test_clicking_retry_sends_the_saga_back_to_work(
    live_server: Any, page: Any, shots: Path
) -> None:
    """Retry… then Yes, retry: the run is pending and its audit log ends with retry."""
    page.goto(f"{live_server.url}/run?id=trip-rome")
    page.get_by_role("link", name="Retry…").click()
    page.get_by_label("reason (kept in the audit log)").fill("the hotel API is back")
    page.screenshot(path=str(shots / "ui-confirm-retry.png"), full_page=True)
    page.get_by_role("button", name="Yes, retry").click()
    assert page.locator("p.msg").inner_text() == "retried trip-rome: now pending"
    page.screenshot(path=str(shots / "ui-retried.png"))
    with App(live_server.db) as app:
        d = app.show("trip-rome")
    assert d.run.status == "pending"
    assert d.audit[-1].action == "retry"
    assert d.audit[-1].detail["reason"] == "the hotel API is back"


def test_clicking_retry_on_a_finished_run_shows_the_refusal(live_server: Any, page: Any) -> None:
    """A retry the API refuses shows its message, and the run is unchanged."""
    page.goto(f"{live_server.url}/run/confirm?id=research-ok&do=retry")
    page.get_by_role("button", name="Yes, retry").click()
    msg = page.locator("p.msg").inner_text()
    assert msg.startswith("surefoot: error: run 'research-ok' is succeeded; only runs that need")
    with App(live_server.db) as app:
        assert app.show("research-ok").run.status == "succeeded"


def test_clicking_redrive_puts_the_dead_letter_back(live_server: Any, page: Any) -> None:
    """Redrive… on one dead letter, then Yes: only the other dead letter is left."""
    page.goto(f"{live_server.url}/streams")
    rows = page.locator("table.grid").nth(1).locator("tbody tr")
    assert rows.count() == 2
    rows.first.get_by_role("link", name="Redrive…").click()
    page.get_by_role("button", name="Yes, redrive").click()
    assert page.locator("p.msg").inner_text() == "redrove 1 dead letter of tasks/summarizers"
    page.goto(f"{live_server.url}/streams")
    assert page.locator("table.grid").nth(1).locator("tbody tr").count() == 1


def test_payloads_stay_inert_in_the_browser(hostile_server: Any, page: Any, shots: Path) -> None:
    """Script, HTML and javascript: values fire no dialog and inject no element."""
    import demo_journal

    u = hostile_server.url
    rid = quote(demo_journal.PAYLOADS["run_id"])
    blocked: list[str] = []
    page.on("console", lambda m: blocked.append(m.text) if m.type == "error" else None)
    pages = ("/runs", f"/run?id={rid}", "/run?id=gate-1", "/run?id=answer-x", "/state")
    for path in (*pages, "/streams"):
        page.goto(u + path)
        for d in page.locator("details.val summary").all():
            d.click()  # unfold every value: folded text must stay text too
        counts = page.evaluate(
            "() => ({bad: document.querySelectorAll('script, iframe, img, [id=injected]').length,"
            " js: [...document.querySelectorAll('[href], [src]')]"
            ".filter(e => /javascript:/i.test(e.getAttribute('href') || e.getAttribute('src')))"
            ".length})"
        )
        assert counts == {"bad": 0, "js": 0}, path
        for link in page.locator("a").all():
            assert (link.get_attribute("href") or "").startswith("/"), path
    page.goto(u + f"/run?id={rid}")
    assert page.get_by_text("<script>alert('result')</script>").count() >= 1
    page.screenshot(path=str(shots / "ui-xss-inert.png"), full_page=True)
    assert page.dialogs == []
    assert blocked == []  # nothing even tried to run (a CSP block would log an error)


def test_a_resumed_runs_story_in_the_browser(tmp_path: Path, page: Any, shots: Path) -> None:
    """The story and its waterfall render in chromium (SVG bars visible, no console
    error), kept as the docs' screenshot ``run-waterfall.png``."""
    import demo_story
    from ui_support import serve_inspector

    url = f"sqlite:///{tmp_path / 'story.db'}"
    run_id = demo_story.build(url)
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    with serve_inspector(url, f"sqlite:///{tmp_path / 'team.db'}", {}) as live:
        page.goto(f"{live.url}/run?id={quote(run_id)}")
        story = page.locator("section.story-card")
        assert story.get_by_text("Resumed by an operator", exact=False).is_visible()
        assert story.locator("rect.wf-bar").count() == 5
        box = story.locator("rect.wf-gap").first.bounding_box()
        assert box is not None and box["width"] > 100  # the dead gap is drawn wide
        chips = story.locator(".wf-row .chip.o-bad, .wf-row .chip.o-rate, .wf-row .chip.o-ok")
        assert [c.inner_text() for c in chips.all()] == ["503", "429", "ok"]
        assert errors == []
        story.screenshot(path=str(shots / "run-waterfall.png"))


def test_a_run_with_long_unbroken_step_names_fits_the_window(tmp_path: Path, page: Any) -> None:
    # an agent run's steps are named like signal:approve:<24 hex> with keys like
    # run:1.12.3.3.1: the steps table grew wider than a 1300 px window, cutting its buttons
    from ui_support import serve_inspector

    db = f"sqlite:///{tmp_path / 'runs.db'}"
    app = App(db)
    name = "signal:approve:" + "7467ea5a3d19d19cd09e76e7" * 2

    @app.step(name=name, effect=True)
    def wait_for_it(key: str) -> str:
        return "x" * 80

    @app.workflow
    def wf() -> str:
        return wait_for_it()

    app.start(wf, run_id="long-names").result(timeout=10)
    app.close()
    with serve_inspector(db, f"sqlite:///{tmp_path / 'team.db'}", {}) as live:
        page.set_viewport_size({"width": 1300, "height": 900})
        page.goto(f"{live.url}/run?id=long-names")
        assert page.get_by_text(name).count() >= 1
        wide = page.evaluate(
            "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
        )
        assert wide[0] <= wide[1], wide
