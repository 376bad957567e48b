"""Seed 000, Easy 1-3: policies compared, a lost update replayed on ``Store``, duplicates."""

from __future__ import annotations

import uuid
from typing import Any

from surefoot.statebus import ConflictError, Store

from .._registry import NO_MODEL, LabContext, LabResult, Table, experiment
from . import messages, shared
from ._common import COUNTS, SEED_FILE, rounded
from .channel import Channel


@experiment(
    id="statebus.policies",
    seed_file=SEED_FILE,
    exercise="Easy 1",
    title="Items kept, retries and model calls per shared-state policy",
)
def policies(ctx: LabContext) -> LabResult:
    seeds = ctx.seed_list(5 if ctx.quick else 20)
    agents, items = 4, 3
    t = Table(
        f"Shared report, {agents} agents × {items} findings, mean of {len(seeds)} seeds",
        [
            "policy",
            "produced",
            "kept",
            "lost",
            "retries",
            "model calls",
            "ticks",
            "errors raised",
            "lost updates counted",
        ],
    )
    facts: dict[str, Any] = {}
    for i, p in enumerate(shared.POLICIES):
        m = shared.averaged(p, agents=agents, seeds=seeds, items=items)
        t.add(
            p,
            int(m["produced"]),
            rounded(m["kept"]),
            rounded(m["lost"]),
            rounded(m["retries"]),
            rounded(m["model_calls"]),
            rounded(m["ticks"]),
            rounded(m["conflicts"]),
            rounded(m["lost_updates"]),
        )
        facts[p] = {k: m[k] for k in COUNTS}
        ctx.progress(i + 1, len(shared.POLICIES) + 1)
    d = Table(
        f"Delivery of 100 messages over Channel() (20% loss, ≤1 tick delay), "
        f"mean of {len(seeds)} seeds",
        ["policy", "sent", "acks", "effects", "repeated", "missing", "dead letters"],
    )
    for p in messages.POLICIES:
        m = messages.averaged(p, 100, Channel(), seeds=seeds)
        d.add(
            p,
            rounded(m["sent"]),
            rounded(m["acks"]),
            rounded(m["effects"]),
            rounded(m["repeated"]),
            rounded(m["missing"]),
            rounded(m["dead_letters"]),
        )
        facts[f"deliver_{p}"] = m
    ctx.progress(1, 1)
    lww, opt, lock = facts["last_writer_wins"], facts["optimistic"], facts["locked"]
    mrg = facts["merged"]

    def _kept(m: dict[str, float]) -> str:
        return "all" if m["lost"] == 0 else f"{m['kept']:.1f} (loses {m['lost']:.1f})"

    raised = (
        "raises no error"
        if lww["conflicts"] == 0
        else f"raised {lww['conflicts']:.1f} errors per run"
    )
    answer = (
        f"last_writer_wins keeps {lww['kept']:.1f} of {agents * items} findings (loses "
        f"{lww['lost']:.1f}) with {lww['retries']:.1f} retries and {lww['model_calls']:.0f} "
        f"model calls; optimistic keeps {_kept(opt)} with {opt['retries']:.1f} retries and "
        f"{opt['model_calls']:.1f} model calls; locked keeps {_kept(lock)} with "
        f"{lock['retries']:.1f} retries and {lock['model_calls']:.0f} model calls but takes "
        f"{lock['ticks']:.1f} ticks instead of {opt['ticks']:.1f}. Last-writer-wins {raised}: "
        "its write has no precondition; the store is asked to set the key, not to set it only "
        "if it is still the version the agent read, so overwriting another agent's version is "
        "a successful write. The store can only count it afterwards: it counted "
        f"{lww['lost_updates']:.1f} lost updates per run (versions no final value descends "
        f"from), against {lww['lost']:.1f} findings measured missing. merged (each finding "
        f"sent as a contribution the store appends) keeps {_kept(mrg)} with "
        f"{mrg['retries']:.1f} retries and {mrg['model_calls']:.0f} model calls in "
        f"{mrg['ticks']:.1f} ticks: there is no version to be stale against."
    )
    return LabResult(
        tables=[t, d],
        facts=facts,
        answer=answer,
        params={"agents": agents, "items": items, "seeds": seeds},
    )


@experiment(
    id="statebus.lost-update",
    seed_file=SEED_FILE,
    exercise="Easy 2",
    title="Two agents, one report: a lost update replayed by hand on Store",
)
def lost_update(ctx: LabContext) -> LabResult:
    url = ctx.db or ctx.sqlite_url("lost-update.db")
    st = Store(url, namespace=f"lost-update-{ctx.seed}-{uuid.uuid4().hex[:8]}")
    for a in ("a0", "a1"):
        st.register_agent(a)
    a0, a1 = st.session("a0"), st.session("a1")
    st.write("report", [])
    t = Table("Last-writer-wins: the sequence", ["step", "agent", "operation", "version", "report"])
    r0 = a0.read("report")
    assert r0 is not None
    t.add(1, "a0", "read report", r0.version, r0.value)
    r1 = a1.read("report")
    assert r1 is not None
    t.add(2, "a1", "read report", r1.version, r1.value)
    w0 = a0.write("report", [*r0.value, "a0: cache misses double at 10k rows"])
    t.add(3, "a0", "write read+finding", w0.version, w0.value)
    w1 = a1.write("report", [*r1.value, "a1: p99 latency is in the ORM"])
    t.add(4, "a1", "write read+finding", w1.version, w1.value)
    final = st.read("report")
    assert final is not None
    lost_by = w0.author if w0.value[-1] not in final.value else ""
    # The same sequence with a version check.
    v = Table(
        "With expect=version: the same sequence",
        ["step", "agent", "operation", "version", "report"],
    )
    st.write("report2", [])
    b0, b1 = a0.read("report2"), a1.read("report2")
    assert b0 is not None
    assert b1 is not None
    v.add(1, "a0", "read report2", b0.version, b0.value)
    v.add(2, "a1", "read report2", b1.version, b1.value)
    x0 = a0.write("report2", [*b0.value, "a0: cache misses double at 10k rows"], expect=b0.version)
    v.add(3, "a0", f"write expect={b0.version}", x0.version, x0.value)
    conflict = ""
    try:
        a1.write("report2", [*b1.value, "a1: p99 latency is in the ORM"], expect=b1.version)
    except ConflictError as exc:
        conflict = str(exc)
        v.add(
            4,
            "a1",
            f"write expect={b1.version}: ConflictError (now v{exc.version} by {exc.author})",
            exc.version,
            exc.value,
        )
        c = a1.read("report2")
        assert c is not None
        x1 = a1.write("report2", [*c.value, "a1: p99 latency is in the ORM"], expect=c.version)
        v.add(5, "a1", f"re-read v{c.version}, write expect={c.version}", x1.version, x1.value)
    final2 = st.read("report2")
    assert final2 is not None
    facts = {
        "final_report": final.value,
        "lost_agent": lost_by,
        "lost_updates": st.lost_updates,
        "lost_record": [(u.key, u.version, u.overwritten_by, u.seen, u.versions) for u in st.lost],
        "final_versioned": final2.value,
        "conflict": conflict,
    }
    st.close()
    lost_txt = (
        f"{lost_by}'s work was lost, and no error was raised" if lost_by else "no work was lost"
    )
    kept_txt = (
        f"With expect=version a1's write raised ConflictError carrying a0's value; a1 re-read "
        f"and wrote again, and the list keeps {len(final2.value)} findings."
        if conflict
        else f"With expect=version no ConflictError was raised; the list has {final2.value}."
    )
    answer = (
        f"Both agents read version {r0.version} (an empty list); a0 wrote version {w0.version} "
        f"with its finding, then a1 wrote version {w1.version} from what it had read. The final "
        f"list is {final.value}: {lost_txt}. The store counted "
        f"it (lost_updates={facts['lost_updates']}: version {w0.version} overwritten by a1, "
        f"which had seen version {r1.version}). {kept_txt}"
    )
    return LabResult(tables=[t, v], facts=facts, answer=answer, params={"db": url}, model=NO_MODEL)


@experiment(
    id="statebus.duplicates",
    seed_file=SEED_FILE,
    exercise="Easy 3",
    title="at_least_once vs idempotent with the same seed: same traffic, no repeats",
)
def duplicates(ctx: LabContext) -> LabResult:
    n = 100
    t = Table(
        f"deliver(policy, {n}, Channel(), seed={ctx.seed})",
        ["policy", "sent", "acks", "effects", "repeated", "missing", "dead letters", "ticks"],
    )
    reps = {p: messages.deliver(p, n, Channel(), ctx.seed) for p in ("at_least_once", "idempotent")}
    for p, r in reps.items():
        t.add(p, r.sent, r.acks, r.effects, r.repeated, r.missing, len(r.dead_letters), r.ticks)
    seeds = ctx.seed_list(5 if ctx.quick else 20)
    a = Table(f"Mean of {len(seeds)} seeds", ["policy", "sent", "effects", "repeated", "missing"])
    means = {}
    for p in ("at_least_once", "idempotent"):
        m = messages.averaged(p, n, Channel(), seeds=seeds)
        means[p] = m
        a.add(
            p,
            rounded(m["sent"]),
            rounded(m["effects"]),
            rounded(m["repeated"]),
            rounded(m["missing"]),
        )
    alo, idem = reps["at_least_once"], reps["idempotent"]
    facts = {
        "sent": {p: r.sent for p, r in reps.items()},
        "acks": {p: r.acks for p, r in reps.items()},
        "repeated": {p: r.repeated for p, r in reps.items()},
        "missing": {p: r.missing for p, r in reps.items()},
        "means": means,
    }
    same = alo.sent == idem.sent and alo.acks == idem.acks
    answer = (
        f"With seed {ctx.seed}, at_least_once sent {alo.sent} messages and {alo.acks} acks, "
        f"idempotent {idem.sent} and {idem.acks}. "
        f"at_least_once applied {alo.effects} effects for {n} messages ({alo.repeated} repeated, "
        f"{alo.missing} missing); idempotent applied {idem.effects} ({idem.repeated} repeated, "
        f"{idem.missing} missing). The traffic is "
        f"{'the same' if same else 'NOT the same'}; it would be because idempotency lives in the "
        "receiver: the sender still resends whenever an ack is lost or late, the channel draws "
        "the same fate for each transmission from the same seed, and the receiver still acks "
        "every copy; it only skips the effect of an id it has already applied."
    )
    return LabResult(
        tables=[t, a], facts=facts, answer=answer, params={"n": n, "seeds": seeds}, model=NO_MODEL
    )
