"""FakeProvider(tokens_per_second=…): a streamed reply paced as a model would produce it,
the same text as unpaced; a bad rate is refused by name."""

from __future__ import annotations

import pytest

from surefoot import llm
from surefoot.errors import ConfigError
from surefoot.testing import FakeProvider

MSGS = [{"role": "user", "content": "pace me"}]


def test_a_paced_stream_carries_the_same_text() -> None:
    with FakeProvider(tokens_per_second=2000) as fp:
        client = llm.connect("openai", "m", api_key="k", base_url=fp.openai_url)
        try:
            pieces = list(client.stream(messages=MSGS))
        finally:
            client.close()
        assert "".join(pieces) == fp.text_for("openai", MSGS) and len(pieces) > 1


@pytest.mark.parametrize("bad", [0, -5, "fast", True])
def test_a_bad_rate_is_refused(bad: object) -> None:
    with pytest.raises(ConfigError, match="tokens_per_second"):
        FakeProvider(tokens_per_second=bad)  # type: ignore[arg-type]
