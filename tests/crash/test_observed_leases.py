"""SQLite leases judged by observation as well as by the wall clock: an idempotency key or a
Store lock whose lease expired by the claimer's clock is taken at once from a holder whose
process is gone, and from a live one (its liveness lock held) only once the claimer has
seen it unchanged for the holder's whole lease on its own monotonic clock. The holder is
another process (one in the claimer's own process is judged by the wall clock alone), and
the claimer's clock is far ahead of it (a ``FakeClock``, or ``now`` given to the store).
No time is asserted: only what the claims got, before and after a wait of one lease."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from surefoot import FakeClock, storage
from surefoot.statebus import Store
from surefoot.storage.sqlite._liveness import FileLiveness

pytestmark = pytest.mark.crash

SRC = Path(__file__).parents[2] / "src"

KEY = """
import sys, time
from surefoot import storage
st = storage.open(sys.argv[1])
keys = st.keystore()
claimed, _ = keys.claim("K", "fp", "owner-A", 1000.0, 1001.0)  # a lease of 1 s
print("held" if claimed else "refused", flush=True)
time.sleep(120)
"""

LOCK = """
import sys, time
from surefoot import FakeClock
from surefoot.statebus import Store
store = Store(sys.argv[1], clock=FakeClock(1000.0))  # kept: its lock lives with it
lease = store.acquire("L", "A", ttl=1.0)
print("held" if lease is not None else "refused", flush=True)
time.sleep(120)
"""


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[tuple[str, list[subprocess.Popen[str]]]]:
    """A database URL, and the holder processes a test starts (killed by pid at the end)."""
    procs: list[subprocess.Popen[str]] = []
    yield f"sqlite:///{tmp_path / 'leases.db'}", procs
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=10)
        if p.stdout is not None:
            p.stdout.close()


def _hold(url: str, procs: list[subprocess.Popen[str]], source: str) -> subprocess.Popen[str]:
    env = {"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"}
    p = subprocess.Popen([sys.executable, "-c", source, url], stdout=subprocess.PIPE, text=True,
                         env=env)  # fmt: skip
    procs.append(p)
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    return p


def _kill(p: subprocess.Popen[str]) -> None:
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=10)


def test_a_live_owners_key_is_taken_only_once_seen_unchanged_for_its_lease(holder) -> None:
    url, procs = holder
    _hold(url, procs, KEY)
    keys = storage.open(url).keystore()
    lv = FileLiveness(url.removeprefix("sqlite:///"))
    assert lv.alive({"owner-A", "nobody"}) == {"owner-A"} and lv.dead({"owner-A"}) == set()
    # 4,000 s ahead: expired by this clock, but its owner lives and it was never seen before
    claimed, rec = keys.claim("K", "fp", "owner-B", 5000.0, 5001.0)
    assert (claimed, rec.owner) == (False, "owner-A")
    time.sleep(1.2)  # the owner's lease (lease_until - created_at), on this monotonic clock
    claimed, rec = keys.claim("K", "fp", "owner-B", 5001.2, 5002.2)
    assert (claimed, rec.owner) == (True, "owner-B")


def test_a_dead_owners_key_is_taken_at_once(holder) -> None:
    url, procs = holder
    _kill(_hold(url, procs, KEY))
    lv = FileLiveness(url.removeprefix("sqlite:///"))
    assert lv.alive({"owner-A"}) == set() and lv.dead({"owner-A"}) == {"owner-A"}
    claimed, rec = storage.open(url).keystore().claim("K", "fp", "owner-B", 5000.0, 5001.0)
    assert (claimed, rec.owner) == (True, "owner-B")


def test_a_live_holders_lock_is_taken_only_once_seen_unchanged_for_its_ttl(holder) -> None:
    url, procs = holder
    _hold(url, procs, LOCK)
    store = Store(url, clock=FakeClock(5000.0))  # 4,000 s ahead of the holder
    assert store.acquire("L", "B", ttl=1.0) is None
    time.sleep(1.2)  # the lease's ttl (expires_at - written_at), on this monotonic clock
    lease = store.acquire("L", "B", ttl=1.0)
    assert lease is not None and lease.holder == "B"


def test_a_dead_holders_lock_is_taken_at_once(holder) -> None:
    url, procs = holder
    _kill(_hold(url, procs, LOCK))
    lease = Store(url, clock=FakeClock(5000.0)).acquire("L", "B", ttl=1.0)
    assert lease is not None and lease.holder == "B"
