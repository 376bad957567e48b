"""The Streams page and /metrics list every stream of the store (no --stream needed), with
each consumer group's counts, and looking writes nothing: no group is registered."""

from __future__ import annotations

import html as html_lib
import re
from pathlib import Path
from typing import Any

import pytest
from ui_support import make_client

from surefoot.statebus import Stream, streams


@pytest.fixture
def store(tmp_path: Path) -> str:
    """The demo store: streams ``tasks`` and ``updates`` with their groups."""
    import demo_journal

    url = f"sqlite:///{tmp_path / 'team.db'}"
    demo_journal.build_store(url)
    return url


@pytest.fixture
def db(tmp_path: Path) -> str:
    """An empty journal (the streams pages do not need runs)."""
    from surefoot.durable import App

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    app = App(url)
    app.journal  # noqa: B018 - creates it (reading one never does)
    app.close()
    return url


def _cards(html: str) -> dict[str, str]:
    """Each stream's card (its HTML) by stream name."""
    out = {}
    for card in html.split('<section class="card">')[1:]:
        m = re.match(r"\s*<h2>([^<]*) <span", card)
        assert m, card[:200]
        out[html_lib.unescape(m.group(1))] = card.split("</section>", 1)[0]
    return out


def _groups(card: str) -> dict[str, tuple[int, ...]]:
    """Each group's (position, lag, pending, dead letters) in a stream card."""
    rows = re.findall(
        r'<tr><td>([^<]*)</td><td class="num">(\d+)</td><td class="num">(\d+)</td>'
        r'<td class="num">(\d+)</td><td class="num">(\d+)</td>',
        card,
    )
    return {html_lib.unescape(n): tuple(int(x) for x in rest) for n, *rest in rows}


def _everything(url: str) -> dict[str, Any]:
    """Every stream's stats (groups included), as the store holds them."""
    out: dict[str, Any] = {}
    for name in streams(url):
        s = Stream(url, name)
        try:
            out[name] = s.stats()
        finally:
            s.close()
    return out


def test_every_stream_and_group_is_shown_without_naming_them(db: str, store: str) -> None:
    """No --stream: both streams, their counts, and each group's position, lag, pending and
    dead letters, as Stream.stats() reads them."""
    cards = _cards(make_client(db, store).get("/streams").text)
    assert list(cards) == ["tasks", "updates"]
    assert _groups(cards["tasks"]) == {"summarizers": (5, 0, 0, 2)}
    assert _groups(cards["updates"]) == {"indexer": (3, 3, 0, 0), "notifier": (4, 2, 1, 0)}
    assert "3 messages kept, seq 4–6" in cards["updates"]
    assert "3 trimmed ids remembered" in cards["updates"]
    assert "5 messages kept, seq 1–5" in cards["tasks"]
    assert "Dead letters of summarizers" in cards["tasks"]
    assert "Dead letters of" not in cards["updates"]


def test_stream_filter_shows_only_the_named_stream_and_groups(db: str, store: str) -> None:
    """--stream updates:notifier shows that one group of that one stream; --stream tasks
    shows every group of tasks."""
    cards = _cards(make_client(db, store, streams=("updates:notifier",)).get("/streams").text)
    assert list(cards) == ["updates"]
    assert _groups(cards["updates"]) == {"notifier": (4, 2, 1, 0)}
    cards = _cards(make_client(db, store, streams=("tasks",)).get("/streams").text)
    assert list(cards) == ["tasks"] and list(_groups(cards["tasks"])) == ["summarizers"]


def test_viewing_registers_no_group_and_creates_no_stream(db: str, store: str) -> None:
    """Mistyped names (a group ``ghost``, a stream ``tsaks``) are reported on the page and
    in nothing else: the page, /metrics and a refused redrive leave every stream's stats,
    groups included, exactly as they were."""
    before = _everything(store)
    c = make_client(db, store, streams=("tasks:summarizers,ghost", "tsaks:workers"))
    page = c.get("/streams").text
    assert "No consumer group <b>ghost</b> on this stream" in page
    assert "No stream named <b>tsaks</b> in the store" in page
    assert _groups(_cards(page)["tasks"]) == {"summarizers": (5, 0, 0, 2)}
    assert 'consumer="ghost"' not in c.get("/metrics").text
    everyone = make_client(db, store)
    everyone.get("/streams")
    everyone.get("/metrics")
    confirm = everyone.get("/streams/confirm?stream=tasks&consumer=ghost").text
    token = re.search(r'name="csrf" value="([^"]+)"', confirm)
    assert token
    r = everyone.post(
        "/streams/redrive",
        data={"stream": "tasks", "consumer": "ghost", "seq": "", "csrf": token.group(1)},
        headers={"origin": "http://127.0.0.1:8765"},
    )
    assert r.status_code == 409
    assert "stream &#39;tasks&#39; has no consumer group &#39;ghost&#39;" in r.text
    after = _everything(store)
    assert after == before
    assert "ghost" not in {g.name for g in after["tasks"].consumers}
    assert "tsaks" not in streams(store)


def test_metrics_count_every_group_of_every_stream(db: str, store: str) -> None:
    """/metrics without --stream: kept messages per stream; pending, dead letters and lag
    per group."""
    lines = make_client(db, store).get("/metrics").text.splitlines()
    for line in (
        'surefoot_stream_messages{stream="tasks"} 5',
        'surefoot_stream_messages{stream="updates"} 3',
        'surefoot_dead_letters{consumer="summarizers",stream="tasks"} 2',
        'surefoot_stream_pending{consumer="notifier",stream="updates"} 1',
        'surefoot_stream_lag{consumer="notifier",stream="updates"} 2',
        'surefoot_stream_lag{consumer="indexer",stream="updates"} 3',
        'surefoot_stream_lag{consumer="summarizers",stream="tasks"} 0',
    ):
        assert line in lines, line


def test_redrive_works_on_a_group_found_by_listing(db: str, store: str) -> None:
    """Without --stream, Redrive all… on summarizers puts both dead letters back."""
    c = make_client(db, store)
    confirm = c.get("/streams/confirm?stream=tasks&consumer=summarizers").text
    token = re.search(r'name="csrf" value="([^"]+)"', confirm)
    assert token
    r = c.post(
        "/streams/redrive",
        data={"stream": "tasks", "consumer": "summarizers", "seq": "", "csrf": token.group(1)},
        headers={"origin": "http://127.0.0.1:8765"},
    )
    assert "redrove 2 dead letters of tasks/summarizers" in r.text
    assert _groups(_cards(c.get("/streams").text)["tasks"]) == {"summarizers": (5, 0, 2, 0)}


@pytest.mark.parametrize("kind", ["sqlite", "postgresql", "redis"])
def test_every_backend_lists_streams_and_registers_nothing(
    kind: str, db: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """On SQLite, PostgreSQL and Redis: the inspector lists both streams and every group,
    reads the dead letters, and a mistyped group or stream is created nowhere."""
    import sys

    import demo_journal

    sys.path.insert(0, str(Path(__file__).parents[1] / "contract"))
    from _backends import backend_url

    from surefoot.ui import Inspector

    url = backend_url(kind, tmp_path, request, "ui-streams")
    demo_journal.build_store(url)
    before = _everything(url)
    everyone = Inspector(db, store=url)
    narrow = Inspector(db, store=url, streams=("tasks:summarizers,ghost", "tsaks"))
    try:
        shown = everyone.streams()
        assert [s.name for s in shown.streams] == ["tasks", "updates"]
        groups = {
            (s.name, c.name): (c.position, c.lag, c.pending, c.dead)
            for s in shown.streams
            for c in s.consumers
        }
        assert groups == {
            ("tasks", "summarizers"): (5, 0, 0, 2),
            ("updates", "indexer"): (3, 3, 0, 0),
            ("updates", "notifier"): (4, 2, 1, 0),
        }
        (tasks,) = [s for s in shown.streams if s.name == "tasks"]
        assert [d.seq for d in tasks.consumers[0].dead_letters] == [2, 4]
        page = narrow.streams()
        assert page.missing == ["tsaks"] and page.streams[0].missing == ["ghost"]
        assert 'consumer="ghost"' not in narrow.metrics(now=0.0)
        assert _everything(url) == before
    finally:
        everyone.close()
        narrow.close()


@pytest.mark.parametrize("spec", [":workers", "tasks:", ""])
def test_a_malformed_stream_filter_is_refused_before_opening_anything(
    spec: str, tmp_path: Path
) -> None:
    """``--stream`` must be NAME or NAME:GROUP,…; a bad one is refused naming it, and the
    journal file is not created."""
    from surefoot.errors import ConfigError
    from surefoot.ui import Inspector

    journal = tmp_path / "runs.db"
    with pytest.raises(ConfigError, match="--stream must look like 'NAME' or 'NAME:GROUP"):
        Inspector(f"sqlite:///{journal}", store=f"sqlite:///{tmp_path / 's.db'}", streams=(spec,))
    assert not journal.exists()
