"""A URL's secrets never show: every surface that shows a URL goes through ``storage.redact``.

The surfaces: the function itself, log lines, the LLM client's repr, the reprs of apps,
stores, storages, streams and journals, ``surefoot runs list`` (table, JSON, error), the
inspector's start line and page header, metrics, and lab reports. The PostgreSQL cases use
the local server (trust authentication takes any password) and skip when it is absent.
"""

from __future__ import annotations

import io
import json
import logging
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from surefoot import durable, statebus, storage, telemetry
from surefoot.cli import main

PASSWORD = "topSECRETpw"
QUERY_PASSWORD = "qSECRETpw2"
API_KEY = "sk-QSECRETkey123456"
SECRETS = (PASSWORD, QUERY_PASSWORD, API_KEY, "tokSECRET9")

URLS = (
    f"postgresql://postgres:{PASSWORD}@127.0.0.1:5432/test?schema=x",
    f"postgresql://postgres@127.0.0.1:5432/test?password={QUERY_PASSWORD}&schema=x",
    f"redis://:{PASSWORD}@127.0.0.1:6379/0",
    f"http://127.0.0.1:8089/v1?api_key={API_KEY}",
    "https://api.example.com/v1?model=m&token=tokSECRET9#frag",
    f"http://user:{PASSWORD}@127.0.0.1:9/v1?x-api-key={API_KEY}",
)


def clean(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} shown in {text!r}"


@pytest.mark.parametrize("url", URLS)
def test_redact_masks_passwords_and_secret_query_values(url: str) -> None:
    """The one function: the password and secret query values become ***; the rest stays."""
    shown = storage.redact(url)
    clean(shown)
    assert "***" in shown and ("127.0.0.1" in shown or "example.com" in shown)
    assert storage.redact("sqlite:///runs.db?x=1") == "sqlite:///runs.db?x=1"


@pytest.mark.parametrize("url", URLS)
def test_log_lines_and_reprs_that_hold_a_url_are_masked(url: str) -> None:
    """A log line naming the URL, in text and JSON, and the text redaction, mask it."""
    stream = io.StringIO()
    handler = telemetry.configure_logging(stream=stream, format="json")
    try:
        telemetry.get_logger("surefoot.test.urls").warning("cannot reach %s", url)
        telemetry.log_event(telemetry.get_logger("surefoot.test.urls"), "open", url=url)
    finally:
        logging.getLogger("surefoot").removeHandler(handler)
    clean(stream.getvalue())
    clean(telemetry.redact(f"failed: {url!r}"))


def test_llm_client_repr_hides_an_api_key_in_the_base_url() -> None:
    pytest.importorskip("openai")
    from surefoot import llm

    c = llm.connect("openai", "m", api_key="k", base_url=f"http://127.0.0.1:9/v1?api_key={API_KEY}")
    try:
        shown = repr(c)
        clean(shown)
        assert "api_key=***" in shown
    finally:
        c.close()


def test_lab_report_params_hold_no_secret(tmp_path: Path) -> None:
    """A lab experiment that records its URL in params reports it redacted."""
    from surefoot_lab._registry import Experiment, LabContext, LabResult

    def fn(ctx: LabContext) -> LabResult:
        return LabResult(answer="ok", params={"db": URLS[0], "llm": {"url": URLS[3]}})

    exp = Experiment("test.urls", "seed_000", "exercise", "title", fn)
    result = exp.run(LabContext(workdir=tmp_path, seed=1))
    clean(json.dumps(result.params))


@pytest.fixture
def pg_secret_url(pg_url: str) -> Iterator[str]:
    """A journal on its own schema, reached with a password in the user part and in the
    query (trust authentication accepts any); the schema is dropped after."""
    schema = f"sf_redact_{uuid.uuid4().hex[:10]}"
    base = pg_url.replace("postgresql://postgres@", f"postgresql://postgres:{PASSWORD}@")
    url = f"{base}?schema={schema}&password={QUERY_PASSWORD}"
    app = durable.App(url, poll=0.01)

    @app.workflow
    def hello() -> str:
        return "hi"

    app.start(hello, run_id="r1").result(timeout=10)
    app.close()
    yield url
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def test_postgres_url_secrets_never_show(
    pg_secret_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every surface on a PostgreSQL URL with a password: reprs, CLI table/JSON/error, ui."""
    url = pg_secret_url
    app = durable.App(url)
    store = statebus.Store(url)
    stream = statebus.Stream(url, "s")
    try:
        app.list_runs()
        clean(repr(app) + repr(app.journal) + repr(store) + repr(stream) + repr(store.storage))
        text = telemetry.prometheus_text(journal=app.journal)
        clean(text)
    finally:
        store.close()
        app.close()

    main(["runs", "list", "--db", url])
    out = capsys.readouterr()
    clean(out.out + out.err)
    assert "postgresql://postgres:***@" in out.out and "r1" in out.out
    main(["runs", "list", "--db", url, "--json"])
    out = capsys.readouterr()
    clean(out.out + out.err)
    with pytest.raises(SystemExit):
        main(["runs", "show", "no-such-run", "--db", url])
    out = capsys.readouterr()
    clean(out.out + out.err)

    pytest.importorskip("starlette")
    with warnings.catch_warnings():  # starlette names an anyio alias anyio 4.12 deprecates
        warnings.simplefilter("ignore", DeprecationWarning)
        from starlette.testclient import TestClient

    from surefoot.ui import Inspector, create_app, loopback_hosts

    inspector = Inspector(url)  # its .db is the start line's and every page header's
    clean(inspector.db)
    app_ = create_app(inspector, allowed_hosts=loopback_hosts(8765))
    client = TestClient(app_, base_url="http://127.0.0.1:8765")
    page = client.get("/")
    inspector.close()
    assert page.status_code == 200
    clean(page.text)
    assert "postgres:***@" in page.text


def test_cli_error_lines_hold_no_secret(capsys: pytest.CaptureFixture[str]) -> None:
    """Whatever message a command raises with a URL in it, the CLI prints it redacted."""
    url = f"postgresql://u:{PASSWORD}@127.0.0.1:1/db?api_key={API_KEY}"
    with pytest.raises(SystemExit) as ex:
        main(["engine", "show", "r1", "--app", "no_such_module:app", "--url", url])
    assert ex.value.code == 1
    err = capsys.readouterr().err
    clean(err)
    assert "names no engine" in err and "u:***@127.0.0.1:1" in err
