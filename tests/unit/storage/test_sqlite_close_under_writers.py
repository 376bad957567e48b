"""Closing a SQLite store while other threads write through it must not crash the process.

A connection is per thread; closing another live thread's connection while it is inside a
statement freed what SQLite was using: the process died with SIGSEGV (6 of 6 runs of the
script below on the old code). Now such a connection is let go, and closed when that
thread is done with it; the writers go on through new connections.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = """
import json, sys, threading, time
from surefoot.statebus import Store

st = Store(f"sqlite:///{sys.argv[1]}?synchronous=NORMAL", namespace="t")
errors, done, closes = [], [0, 0], 0
started = threading.Barrier(3)

def writer(n):
    started.wait()
    for i in range(600):
        try:
            st.write(f"k{n}-{i % 20}", "x" * 200)
            done[n] += 1
        except Exception as exc:
            errors.append(type(exc).__name__)

threads = [threading.Thread(target=writer, args=(n,)) for n in (0, 1)]
for t in threads:
    t.start()
started.wait()
while any(t.is_alive() for t in threads) and closes < 30:
    st.close()  # under the writers, again and again
    closes += 1
    time.sleep(0.005)
for t in threads:
    t.join()
total = len(st.snapshot())
st.close()
print(json.dumps({"done": done, "errors": errors, "closes": closes, "keys": total}))
"""


def test_closing_a_sqlite_store_under_writing_threads_crashes_nothing(tmp_path: Path) -> None:
    for attempt in range(2):
        db = tmp_path / f"team{attempt}.db"
        out = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(SCRIPT), str(db)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
        result = json.loads(out.stdout)
        assert result["errors"] == []
        assert result["done"] == [600, 600]
        assert result["closes"] >= 2
        assert result["keys"] == 40
