"""Agent registrations are shared through the store: a ``Store`` on the same URL (in this
process or another) knows an agent another registered, and the history says who did."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _backends import BACKENDS, backend_url

from surefoot import storage
from surefoot.errors import ConfigError, ScopeError
from surefoot.statebus import Store


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_second_store_knows_the_agents_the_first_registered(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = backend_url(kind, tmp_path, request, "agents")
    shared = storage.open(url) if kind == "memory" else None  # memory:// is one per open
    a = Store(shared or url, namespace="team")
    b = Store(shared or url, namespace="team")
    try:
        with pytest.raises(ConfigError, match="unknown agent 'critic'"):
            b.session("critic")
        revision = a.revision
        a.register_agent("critic", trust="untrusted", read=["draft*"], write=["review*"], by="ops")
        assert a.revision == revision  # registering writes nothing in the namespace
        critic = b.session("critic")  # no register_agent on b
        critic.write("review/1", "fine")
        entry = b.read("review/1")
        assert entry is not None and entry.author == "critic" and entry.trust == "untrusted"
        with pytest.raises(ScopeError):
            critic.write("draft/1", "not in its write scope")
        assert list(b.agents) == ["critic"]
        assert set(b.snapshot()) == {"review/1"}  # registrations are not keys of the namespace
        history = b.agents.history("critic")
        assert [c.value["registered_by"] for c in history] == ["ops"]
        # registering again replaces the scopes everywhere; the history keeps both
        b.register_agent("critic", trust="untrusted", read=["*"], write=["*"], by="lead")
        a.session("critic").write("draft/2", "now allowed")
        assert [c.value["registered_by"] for c in a.agents.history("critic")] == ["ops", "lead"]
        other = Store(shared or url, namespace="other")
        with pytest.raises(ConfigError, match="unknown agent 'critic' in namespace 'other'"):
            other.session("critic")
    finally:
        a.close()
        b.close()
        if shared is not None:
            shared.close()


CHILD = """
import json, os, sys
from surefoot.statebus import Store

st = Store(sys.argv[1], namespace="team")
st.register_agent("critic", trust="trusted", read=["*"], write=["review*"])
print(json.dumps([st.session("critic").write("review/1", "from the child").version, os.getpid()]))
st.close()
"""


def test_an_agent_registered_in_another_process_is_known_here(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'team.db'}"
    here = Store(url, namespace="team")
    try:
        out = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(CHILD), url],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        version, pid = json.loads(out.stdout)
        assert version == 1
        critic = here.session("critic")  # registered by the other process only
        assert critic.read("review/1") is not None
        (change,) = here.agents.history("critic")
        assert change.value["registered_by"].endswith(f":{pid}")  # user@host:pid
    finally:
        here.close()
