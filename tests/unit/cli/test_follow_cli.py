"""``surefoot runs follow``: a run's tokens printed, retries announced, control characters
escaped, the last offset given for ``--after``; ``--json`` prints the SSE endpoint's objects."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from surefoot.cli import main
from surefoot.durable import App, emit


def _run(db: str) -> str:
    calls = {"n": 0}
    with App(db, poll=0.01) as app:

        @app.step(retry=2)
        def talk() -> str:
            calls["n"] += 1
            emit("hello ")
            if calls["n"] == 1:
                raise ConnectionError("cut")
            emit("\x1b[31mworld\x07")  # a model's text may carry terminal escapes
            return "hello \x1b[31mworld\x07"

        @app.workflow
        def wf() -> str:
            return talk()

        return str(app.start(wf, run_id="r1").result(timeout=10))


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    _run(url)
    return url


def test_follow_prints_tokens_and_announces_the_retry(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["runs", "follow", "r1", "--db", db])
    out, err = capsys.readouterr()
    assert out == "hello \nhello \\x1b[31mworld\\x07\n"  # no escape reaches the terminal
    assert "\x1b" not in out + err and "\x07" not in out + err
    assert "attempt 2" in err and "void" in err
    assert "last offset 7 (resume with --after 7)" in err


def test_follow_after_an_offset_prints_only_what_came_later(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["runs", "follow", "r1", "--db", db, "--after", "5", "--json"])
    lines = capsys.readouterr().out.splitlines()
    events = [json.loads(line) for line in lines]
    assert [e["offset"] for e in events] == [6, 7]
    assert [e["kind"] for e in events] == ["token", "end"]
    assert events[0]["data"] == "\x1b[31mworld\x07"  # JSON keeps the value, escaped


def test_follow_an_unknown_run_is_one_clear_line(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["runs", "follow", "nope", "--db", db])
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert "nope" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "needle"),
    [(["--after", "99"], "99"), (["--timeout", "-1"], "-1")],
)
def test_follow_an_offset_past_the_end_or_a_negative_timeout_is_one_clear_line(
    db: str, capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    # --after 99 on a stream of 7 printed nothing and "last offset 99", an offset no event
    # has; --timeout -1 was taken as given
    with pytest.raises(SystemExit) as info:
        main(["runs", "follow", "r1", "--db", db, *args])
    assert info.value.code in (1, 2)
    out, err = capsys.readouterr()
    assert needle in err and "Traceback" not in err and out == ""
    assert "last offset 99" not in err


def test_follow_a_run_whose_app_has_a_payload_codec_with_app(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # events are stored through the app's codec; follow had no --app, so such a run's stream
    # could not be read ("give it the codec the value was written with") by any command
    db = f"sqlite:///{tmp_path / 'z.db'}"
    (tmp_path / "zipped_app.py").write_text(
        "from surefoot import durable\n"
        f"app = durable.App({db!r}, payload_codec=durable.ZlibCodec())\n"
        "@app.step\n"
        "def s() -> str:\n"
        "    durable.emit('hello ')\n"
        "    durable.emit('world')\n"
        "    return 'hello world'\n"
        "@app.workflow\n"
        "def w() -> str:\n"
        "    return s()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import zipped_app

    assert zipped_app.app.start(zipped_app.w, run_id="z1").result(timeout=10) == "hello world"
    zipped_app.app.close()
    with pytest.raises(SystemExit) as info:
        main(["runs", "follow", "z1", "--db", db])
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert "--app" in err and "Traceback" not in err
    main(["runs", "follow", "z1", "--db", db, "--app", "zipped_app:app"])
    out, err = capsys.readouterr()
    assert out == "hello world\n"
