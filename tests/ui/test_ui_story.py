"""The run page tells a resumed run's story before anyone reads the tables: where it died,
when and by whom it was resumed and why, which step ran again, the steps on a time axis
(a waterfall with the gap while it was dead) and each step's provider attempts. Read from
the rendered HTML; values stay text (a hostile worker id builds no element)."""

from __future__ import annotations

import html as html_lib
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import demo_story
from ui_support import make_client

from surefoot.durable import App


def _page(tmp_path: Path, **workers: str) -> str:
    url = f"sqlite:///{tmp_path / 'story.db'}"
    run_id = demo_story.build(url, **workers)
    return str(make_client(url).get(f"/run?id={run_id}").text)


def _story(html: str) -> str:
    return html.split("<h2>Story", 1)[1].split("<h2>Timeline", 1)[0]


def _text(fragment: str) -> str:
    return " ".join(html_lib.unescape(re.sub(r"<[^>]+>", "", fragment)).split())


def _rows(story: str) -> dict[str, str]:
    """Each waterfall row's markup, by its label's text (``"2 ask pure"``)."""
    out = {}
    for row in story.split('<div class="wf-row')[1:]:
        label = row.split('<div class="wf-label', 1)[1].split("</div>", 1)[0]
        out[" ".join(re.sub(r"<[^>]+>", " ", label.split(">", 1)[1]).split())] = row
    return out


def test_a_resumed_runs_page_tells_where_it_died_and_who_resumed_it(tmp_path: Path) -> None:
    story = _story(_page(tmp_path))
    said = _text(story)
    assert "Died: epoch 1 (worker worker-a) last showed life at" in said
    assert "after step 3 search." in said
    assert "Resumed by an operator at" in said and "by worker-b as epoch 2" in said
    assert "an operator resumed it (operator)" in said
    assert "Step 4 draft, where epoch 1 stopped, ran again under epoch 2" in said
    # the gap while it was dead, from its last sign of life to the resume (13 s of 21.4)
    gaps = re.findall(r'<rect class="wf-gap" x="([\d.]+)%" y="2" width="([\d.]+)%"', story)
    assert len(gaps) == 1 and 55.0 < float(gaps[0][1]) < 65.0
    marks = re.findall(r'<line class="wf-mark" x1="([\d.]+)%"', story)
    assert marks and {float(m) for m in marks} == {float(gaps[0][0]) + float(gaps[0][1])}


def test_the_waterfall_draws_every_step_with_its_attempts(tmp_path: Path) -> None:
    rows = _rows(_story(_page(tmp_path)))
    steps = [k for k in rows if k[0].isdigit()]
    assert steps == [
        "1 plan pure",
        "2 ask pure",
        "3 search pure",
        "4 draft effect",
        "5 sleep sleep",
    ]
    ask = rows["2 ask pure"]
    assert re.findall(r'<span class="chip o-\w+">([^<]+)</span>', ask) == ["503", "429", "ok"]
    assert "e-old" in ask  # journalled by epoch 1, which died: replayed, not run again
    draft = rows["4 draft effect"]
    assert "wf-resumed" in draft.split(">", 1)[0] and ">ran again</span>" in draft
    assert '<rect class="wf-lost"' in draft  # the attempt epoch 1 started and lost
    assert "×2</span>" in draft and "e-old" not in draft
    assert "1.50 s after the resume" in draft  # its own time, not the dead gap's
    assert "wf-wait" in rows["5 sleep sleep"]
    # bars sit on the axis in time order
    lefts = [float(re.search(r'wf-bar[^"]*" x="([\d.]+)%"', rows[k]).group(1)) for k in steps]  # type: ignore[union-attr]
    assert lefts == sorted(lefts) and lefts[0] == 0.0


def test_the_timeline_table_shows_a_steps_provider_attempts(tmp_path: Path) -> None:
    html = _page(tmp_path)
    table = html.split("<h2>Timeline", 1)[1].split("</table>", 1)[0]
    ask = next(r for r in table.split("<tr")[1:] if "<td>ask</td>" in r)
    assert re.findall(r'<span class="chip o-\w+">([^<]+)</span>', ask) == ["503", "429", "ok"]


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        self.tags.add(tag)


def test_hostile_worker_ids_stay_text_in_the_story(tmp_path: Path) -> None:
    bad = '<img src=x onerror="alert(1)">'
    html = _page(tmp_path, worker_a=bad, worker_b="<script>alert(2)</script>")
    story = _story(html)
    p = _Tags()
    p.feed(story)
    assert not p.tags & {"img", "script"}
    assert "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in story
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in story


def test_a_run_that_never_died_has_a_waterfall_and_no_handover(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'plain.db'}"
    with App(url) as app:

        @app.step
        def one() -> int:
            return 1

        @app.workflow
        def wf() -> int:
            return one() + one()

        app.start(wf, run_id="plain").result(timeout=10)
    story = _story(str(make_client(url).get("/run?id=plain").text))
    assert "<b>Died:</b>" not in story and '<rect class="wf-gap"' not in story
    assert story.count('class="wf-bar') == 2


def test_a_frozen_workers_takeover_and_its_refused_late_write(demo: dict[str, Any]) -> None:
    """The demo's research-crash: worker-a claimed it (enqueued by ``app``), froze; the
    story names worker-a (not the enqueuer), the expired lease, and marks the late write
    that was refused."""
    story = _story(str(make_client(demo["db"]).get("/run?id=research-crash").text))
    said = _text(story)
    assert "Died: epoch 1 (worker worker-a)" in said and "after step 1 plan." in said
    assert "Taken over at" in said and "its lease had expired" in said
    assert "Step 2 summarize, where epoch 1 stopped, ran again under epoch 2" in said
    assert story.count('<line class="wf-fenced"') == 1 and "1 late write refused" in said


def test_an_execution_bar_starts_at_its_claim_not_at_its_audit_row(tmp_path: Path) -> None:
    # the claim's audit row may be written after the run's steps (an in-process start writes
    # it at the end); the bar was drawn from the row's time, after the step it ran
    import time

    from surefoot.ui._story import story

    app = App(f"sqlite:///{tmp_path / 'runs.db'}")

    @app.step
    def work() -> str:
        time.sleep(0.05)
        return "ok"

    @app.workflow
    def wf() -> str:
        return work()

    app.start(wf, run_id="r1").result(timeout=10)
    detail = app.show("r1")
    (step,) = detail.steps
    claim = next(a for a in detail.audit if a.action == "claimed")
    (epoch,) = story(detail, now=time.time()).epochs
    assert epoch.start == claim.detail["claimed_at"] <= step.started_at
    assert epoch.end >= step.finished_at
    app.close()
