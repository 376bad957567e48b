"""connect()/from_env(): fake and real by configuration alone; keys never shown; SDK
retries left on are warned about at the caller's line."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from surefoot import codec
from surefoot.errors import ConfigError, InvalidReplyError
from surefoot.llm import (
    AnthropicChat,
    ChatCompletion,
    FakeChat,
    FakeLLM,
    OpenAIChat,
    connect,
    from_env,
)
from surefoot.resilience import Backoff, RetryPolicy, faults
from surefoot.testing import FakeProvider, Reply, Status

MSGS = [{"role": "user", "content": "hi"}]
KEY = "sk-live-SECRET-9f8e7d"


@pytest.fixture
def fp() -> Iterator[FakeProvider]:
    """A fresh fake provider."""
    with FakeProvider() as p:
        yield p


def summarize(client: Any, text: str) -> str:
    """A user's function: it never knows which provider it talks to."""
    reply = client.create(messages=[{"role": "user", "content": f"summarize: {text}"}])
    assert isinstance(reply, ChatCompletion)
    return str(reply.text)


def test_same_program_runs_on_fake_and_on_a_real_endpoint(fp: FakeProvider) -> None:
    """The same function runs on connect('fake') and on the OpenAI adapter unchanged."""
    fake = from_env({"SUREFOOT_LLM_PROVIDER": "fake"})
    real = from_env(
        {
            "OPENAI_BASE_URL": fp.openai_url,
            "OPENAI_API_KEY": KEY,
            "SUREFOOT_LLM_MODEL": "served-model",
        }
    )
    assert isinstance(fake, FakeChat) and isinstance(real, OpenAIChat)
    assert summarize(fake, "x") and summarize(real, "x")
    assert fp.count() == 1 and fp.received[0].model == "served-model"
    real.close()


def test_fake_gets_the_same_retries_as_real_clients() -> None:
    """connect('fake') with a scripted FakeLLM retries its 503s under the policy."""
    llm = FakeLLM(failures=faults.Script([503, 503]))
    c = connect("fake", llm=llm, policy=RetryPolicy(max_attempts=3, backoff=Backoff(0, 0, "none")))
    assert c.create(messages=MSGS).text
    assert llm.calls == 3 and c.meter.totals.attempts == 3


def test_from_env_picks_anthropic_when_only_its_key_is_set(fp: FakeProvider) -> None:
    """ANTHROPIC_API_KEY alone selects the Anthropic adapter; ANTHROPIC_MODEL names the model."""
    c = from_env(
        {
            "ANTHROPIC_API_KEY": KEY,
            "ANTHROPIC_BASE_URL": fp.anthropic_url,
            "ANTHROPIC_MODEL": "claude-x",
        }
    )
    assert isinstance(c, AnthropicChat)
    assert c.create(messages=MSGS).model == "claude-x"
    c.close()


def test_from_env_without_configuration_names_the_variables() -> None:
    """Nothing configured: the error lists the variables to set."""
    with pytest.raises(ConfigError, match="SUREFOOT_LLM_PROVIDER"):
        from_env({})
    with pytest.raises(ConfigError, match="needs a model name"):
        from_env({"OPENAI_API_KEY": KEY})


def test_unknown_provider_is_refused_without_showing_the_key() -> None:
    """A bad provider name is a ConfigError that names the choices and not the key."""
    with pytest.raises(ConfigError) as info:
        connect("opneai", "m", api_key=KEY)
    assert "openai, anthropic, fake" in str(info.value) and KEY not in str(info.value)


def test_key_is_not_in_reprs_errors_replies_or_server_records(fp: FakeProvider) -> None:
    """The key appears in no repr, no error message, no journalled reply, no server record."""
    c = connect(
        "openai", "m", api_key=KEY, base_url=fp.openai_url, policy=RetryPolicy(max_attempts=1)
    )
    reply = c.create(messages=MSGS)
    fp.script(Status(401))
    with pytest.raises(openai.AuthenticationError) as info:
        c.create(messages=MSGS)
    fp.script(Reply(text=""))
    with pytest.raises(InvalidReplyError) as invalid:
        c.create(messages=MSGS)
    shown = [
        repr(c),
        str(c.__dict__.get("base_url")),
        str(info.value),
        str(invalid.value),
        codec.dumps(reply),
        codec.dumps(codec.error_to_data(invalid.value)),
        repr(c.meter),
        json.dumps([r.headers for r in fp.received]),
    ]
    for text in shown:
        assert KEY not in text
    assert KEY not in repr(vars(c))  # held in a wrapper whose repr is ***
    c.close()


def test_base_url_password_is_hidden_in_the_repr() -> None:
    """A base_url with credentials shows as ***@host in the repr."""
    c = connect("openai", "m", api_key="k", base_url="http://user:hunter2@127.0.0.1:9/v1")
    assert "hunter2" not in repr(c) and "***@127.0.0.1:9" in repr(c)


def test_invalid_reply_error_survives_the_journal_codec() -> None:
    """InvalidReplyError round-trips through the codec with its facts."""
    err = InvalidReplyError("not JSON", text="oops", model="m")
    back = codec.error_from_data(json.loads(json.dumps(codec.error_to_data(err))))
    assert isinstance(back, InvalidReplyError)
    assert (back.reason, back.text, back.model) == ("not JSON", "oops", "m")


def test_client_with_sdk_retries_on_warns_at_the_callers_line(fp: FakeProvider) -> None:
    """A client passed in with max_retries=2 warns, pointing at this file and line."""
    sdk = openai.OpenAI(base_url=fp.openai_url, api_key="k")  # max_retries defaults to 2
    line = _line() + 2
    with pytest.warns(UserWarning, match="max_retries=2") as rec:
        OpenAIChat("m", client=sdk)
    assert rec[0].filename == __file__ and rec[0].lineno == line
    line = _line() + 2
    with pytest.warns(UserWarning, match="attempts") as rec:
        connect("anthropic", "m", client=anthropic.Anthropic(api_key="k", max_retries=1))
    assert rec[0].filename == __file__ and rec[0].lineno == line
    sdk.close()


def test_client_with_sdk_retries_off_does_not_warn(fp: FakeProvider) -> None:
    """max_retries=0 on a passed-in client: no warning, and it is the one used."""
    sdk = openai.OpenAI(base_url=fp.openai_url, api_key="k", max_retries=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = OpenAIChat("m", client=sdk, policy=RetryPolicy(max_attempts=1))
    fp.script(Status(500))
    with pytest.raises(openai.InternalServerError):
        c.create(messages=MSGS)
    assert fp.count() == 1
    sdk.close()


def _line() -> int:
    import inspect

    frame = inspect.currentframe()
    assert frame is not None and frame.f_back is not None
    return frame.f_back.f_lineno


def test_importing_surefoot_llm_needs_no_sdk() -> None:
    """`import surefoot.llm` imports neither openai nor anthropic."""
    import subprocess
    import sys

    code = "import sys, surefoot.llm; print('openai' in sys.modules, 'anthropic' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the SDK installed, making an adapter says which extra to install."""
    import sys

    from surefoot.errors import MissingExtraError

    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(MissingExtraError, match=r"install surefoot\[anthropic\]"):
        connect("anthropic", "m", api_key="k")


def test_openai_gets_max_tokens_only_when_given(fp: FakeProvider) -> None:
    """OpenAI-compatible servers get max_tokens only when the caller passes it."""
    c = connect("openai", "m", api_key="k", base_url=fp.openai_url)
    c.create(messages=MSGS)
    c.create(messages=MSGS, max_tokens=7)
    c.create(messages=MSGS, max_completion_tokens=9)
    bodies = [int(r.headers["content-length"]) for r in fp.received]
    assert bodies[1] > bodies[0] and bodies[2] > bodies[0]
    c.close()


def test_instant_retries_covers_adapters_made_without_a_clock(fp: FakeProvider) -> None:
    """Inside instant_retries(), an adapter's Retry-After wait is recorded, not slept."""
    from surefoot.testing import instant_retries, rate_limited

    c = connect("openai", "m", api_key="k", base_url=fp.openai_url)
    fp.script(rate_limited(retry_after=30))
    with instant_retries() as clock:
        assert c.create(messages=MSGS).text
    (wait,) = clock.sleeps
    assert 30.0 <= wait <= 33.0 and fp.count() == 2  # Retry-After plus bounded jitter
    c.close()


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize(
    "url", ["ftp://127.0.0.1:8089/v1", "htp://127.0.0.1:8089/v1", "127.0.0.1:8089/v1", "http://"]
)
def test_a_base_url_that_is_not_http_is_refused_when_the_client_is_built(
    provider: str, url: str
) -> None:
    """A base_url no HTTP client can reach is a ConfigError at connect(), naming it."""
    with pytest.raises(ConfigError) as info:
        connect(provider, "m", api_key=KEY, base_url=url)
    text = str(info.value)
    assert repr(url) in text and "http://" in text and KEY not in text


def test_a_refused_base_url_hides_its_password() -> None:
    """The refusal names the URL without the password in its user part."""
    with pytest.raises(ConfigError) as info:
        connect("openai", "m", base_url="ftp://user:hunter2@127.0.0.1:8089/v1")
    assert "hunter2" not in str(info.value) and "127.0.0.1:8089" in str(info.value)


def test_a_base_url_from_the_environment_is_checked_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """OPENAI_BASE_URL is the same base_url: a bad one is refused, naming the variable."""
    monkeypatch.setenv("OPENAI_BASE_URL", "htp://127.0.0.1:8089/v1")
    with pytest.raises(ConfigError, match="OPENAI_BASE_URL"):
        connect("openai", "m", api_key=KEY)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_connection_error_names_the_url_without_its_password(provider: str) -> None:
    """Nothing listens: the error that ends the retries names the (redacted) base_url."""
    import socket

    with socket.socket() as s:  # a port that was free a moment ago: nothing listens
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://user:hunter2@127.0.0.1:{port}/v1"
    client = connect(provider, "m", api_key=KEY, base_url=url, policy=RetryPolicy(max_attempts=1))
    with pytest.raises(Exception) as info:
        client.create(messages=MSGS)
    text = str(info.value)
    assert f"127.0.0.1:{port}/v1" in text and "hunter2" not in text and KEY not in text
    client.close()
