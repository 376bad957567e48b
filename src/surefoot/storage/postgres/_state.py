"""PostgreSQL ``StateStore``: versioned keys, one function call (one round trip) per write.

A write is ``SELECT * FROM sf_state_write(…)``, a PL/pgSQL function created by the migration.
It first locks the namespace's revision row, so writers of one namespace take turns (as
SQLite's write lock makes them), and every statement after the lock sees the other writers'
committed work (READ COMMITTED takes a snapshot per statement). Then it checks the fence and
the expected version, bumps the namespace's revision and upserts the key. Revisions have no
gaps and no duplicates, and a failed condition writes nothing and returns the current row.
"""

from __future__ import annotations

from typing import Any

from ...errors import ValueTooLargeError
from ..base import MergeOutcome, StateRecord, check_size, write_conflict
from ..merges import check_contribution, log_entry, merge_refused
from ._db import PostgresDB

__all__ = ["MIGRATIONS", "PostgresStateStore"]

MIGRATIONS = [
    """
    CREATE TABLE sf_state (
        ns TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
        version BIGINT NOT NULL, revision BIGINT NOT NULL,
        author TEXT NOT NULL, trust TEXT NOT NULL, written_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (ns, key)
    );
    CREATE TABLE sf_state_ns (ns TEXT PRIMARY KEY, revision BIGINT NOT NULL);
    CREATE FUNCTION sf_state_write(
        p_ns TEXT, p_key TEXT, p_value TEXT, p_author TEXT, p_trust TEXT,
        p_expect BIGINT, p_now DOUBLE PRECISION, p_fkey TEXT, p_fver BIGINT)
    RETURNS TABLE (o_kind TEXT, o_key TEXT, o_value TEXT, o_version BIGINT,
                   o_revision BIGINT, o_author TEXT)
    LANGUAGE plpgsql AS $$
    DECLARE
        cur RECORD;
        rev BIGINT;
        ver BIGINT;
    BEGIN
        INSERT INTO sf_state_ns AS n (ns, revision) VALUES (p_ns, 0)
        ON CONFLICT (ns) DO UPDATE SET revision = n.revision;  -- locks the namespace
        IF p_fkey IS NOT NULL THEN
            SELECT s.value, s.version, s.author INTO cur
            FROM sf_state s WHERE s.ns = p_ns AND s.key = p_fkey;
            IF NOT FOUND OR cur.version <> p_fver THEN
                RETURN QUERY SELECT 'fence', p_fkey, cur.value, COALESCE(cur.version, 0),
                    0::BIGINT, cur.author;
                RETURN;
            END IF;
        END IF;
        SELECT s.value, s.version, s.author INTO cur
        FROM sf_state s WHERE s.ns = p_ns AND s.key = p_key;
        ver := COALESCE(cur.version, 0);
        IF p_expect IS NOT NULL AND p_expect <> ver THEN
            RETURN QUERY SELECT 'conflict', p_key, cur.value, ver, 0::BIGINT, cur.author;
            RETURN;
        END IF;
        UPDATE sf_state_ns SET revision = revision + 1 WHERE ns = p_ns RETURNING revision
            INTO rev;
        INSERT INTO sf_state AS s (ns, key, value, version, revision, author, trust, written_at)
        VALUES (p_ns, p_key, p_value, ver + 1, rev, p_author, p_trust, p_now)
        ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value,
            version = excluded.version, revision = excluded.revision,
            author = excluded.author, trust = excluded.trust, written_at = excluded.written_at;
        RETURN QUERY SELECT 'ok', p_key, p_value, ver + 1, rev, p_author;
    END;
    $$
    """,
    # Lost updates are counted per key: versions its value does not descend from.
    """
    ALTER TABLE sf_state ADD COLUMN lineage BIGINT NOT NULL DEFAULT 0;
    UPDATE sf_state SET lineage = version;
    DROP FUNCTION sf_state_write(TEXT, TEXT, TEXT, TEXT, TEXT, BIGINT, DOUBLE PRECISION,
        TEXT, BIGINT);
    CREATE FUNCTION sf_state_write(
        p_ns TEXT, p_key TEXT, p_value TEXT, p_author TEXT, p_trust TEXT,
        p_expect BIGINT, p_now DOUBLE PRECISION, p_fkey TEXT, p_fver BIGINT,
        p_sver BIGINT, p_slin BIGINT)
    RETURNS TABLE (o_kind TEXT, o_key TEXT, o_value TEXT, o_version BIGINT,
                   o_revision BIGINT, o_author TEXT, o_lineage BIGINT)
    LANGUAGE plpgsql AS $$
    DECLARE
        cur RECORD;
        rev BIGINT;
        ver BIGINT;
        lin BIGINT;
    BEGIN
        INSERT INTO sf_state_ns AS n (ns, revision) VALUES (p_ns, 0)
        ON CONFLICT (ns) DO UPDATE SET revision = n.revision;  -- locks the namespace
        IF p_fkey IS NOT NULL THEN
            SELECT s.value, s.version, s.author INTO cur
            FROM sf_state s WHERE s.ns = p_ns AND s.key = p_fkey;
            IF NOT FOUND OR cur.version <> p_fver THEN
                RETURN QUERY SELECT 'fence', p_fkey, cur.value, COALESCE(cur.version, 0),
                    0::BIGINT, cur.author, 0::BIGINT;
                RETURN;
            END IF;
        END IF;
        SELECT s.value, s.version, s.author, s.lineage INTO cur
        FROM sf_state s WHERE s.ns = p_ns AND s.key = p_key;
        ver := COALESCE(cur.version, 0);
        IF p_expect IS NULL AND p_sver IS NOT NULL AND p_sver < ver THEN
            lin := p_slin + 1;  -- a stale write descends from what its writer read
        ELSE
            lin := COALESCE(cur.lineage, 0) + 1;
        END IF;
        IF p_expect IS NOT NULL AND p_expect <> ver THEN
            RETURN QUERY SELECT 'conflict', p_key, cur.value, ver, 0::BIGINT, cur.author,
                0::BIGINT;
            RETURN;
        END IF;
        UPDATE sf_state_ns SET revision = revision + 1 WHERE ns = p_ns RETURNING revision
            INTO rev;
        INSERT INTO sf_state AS s
            (ns, key, value, version, revision, author, trust, written_at, lineage)
        VALUES (p_ns, p_key, p_value, ver + 1, rev, p_author, p_trust, p_now, lin)
        ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value,
            version = excluded.version, revision = excluded.revision,
            author = excluded.author, trust = excluded.trust, written_at = excluded.written_at,
            lineage = excluded.lineage;
        RETURN QUERY SELECT 'ok', p_key, p_value, ver + 1, rev, p_author, lin;
    END;
    $$
    """,
    # Merges applied by the store: the op a key merges by and its log of contributions; a
    # plain write makes the key plain again.
    """
    ALTER TABLE sf_state ADD COLUMN merge_op TEXT;
    ALTER TABLE sf_state ADD COLUMN merge_log TEXT;
    CREATE OR REPLACE FUNCTION sf_state_write(
        p_ns TEXT, p_key TEXT, p_value TEXT, p_author TEXT, p_trust TEXT,
        p_expect BIGINT, p_now DOUBLE PRECISION, p_fkey TEXT, p_fver BIGINT,
        p_sver BIGINT, p_slin BIGINT)
    RETURNS TABLE (o_kind TEXT, o_key TEXT, o_value TEXT, o_version BIGINT,
                   o_revision BIGINT, o_author TEXT, o_lineage BIGINT)
    LANGUAGE plpgsql AS $$
    DECLARE
        cur RECORD;
        rev BIGINT;
        ver BIGINT;
        lin BIGINT;
    BEGIN
        INSERT INTO sf_state_ns AS n (ns, revision) VALUES (p_ns, 0)
        ON CONFLICT (ns) DO UPDATE SET revision = n.revision;  -- locks the namespace
        IF p_fkey IS NOT NULL THEN
            SELECT s.value, s.version, s.author INTO cur
            FROM sf_state s WHERE s.ns = p_ns AND s.key = p_fkey;
            IF NOT FOUND OR cur.version <> p_fver THEN
                RETURN QUERY SELECT 'fence', p_fkey, cur.value, COALESCE(cur.version, 0),
                    0::BIGINT, cur.author, 0::BIGINT;
                RETURN;
            END IF;
        END IF;
        SELECT s.value, s.version, s.author, s.lineage INTO cur
        FROM sf_state s WHERE s.ns = p_ns AND s.key = p_key;
        ver := COALESCE(cur.version, 0);
        IF p_expect IS NULL AND p_sver IS NOT NULL AND p_sver < ver THEN
            lin := p_slin + 1;  -- a stale write descends from what its writer read
        ELSE
            lin := COALESCE(cur.lineage, 0) + 1;
        END IF;
        IF p_expect IS NOT NULL AND p_expect <> ver THEN
            RETURN QUERY SELECT 'conflict', p_key, cur.value, ver, 0::BIGINT, cur.author,
                0::BIGINT;
            RETURN;
        END IF;
        UPDATE sf_state_ns SET revision = revision + 1 WHERE ns = p_ns RETURNING revision
            INTO rev;
        INSERT INTO sf_state AS s
            (ns, key, value, version, revision, author, trust, written_at, lineage)
        VALUES (p_ns, p_key, p_value, ver + 1, rev, p_author, p_trust, p_now, lin)
        ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value,
            version = excluded.version, revision = excluded.revision,
            author = excluded.author, trust = excluded.trust, written_at = excluded.written_at,
            lineage = excluded.lineage, merge_op = NULL, merge_log = NULL;
        RETURN QUERY SELECT 'ok', p_key, p_value, ver + 1, rev, p_author, lin;
    END;
    $$
    ;
    CREATE FUNCTION sf_state_merge(
        p_ns TEXT, p_key TEXT, p_op TEXT, p_arg TEXT, p_author TEXT, p_trust TEXT,
        p_now DOUBLE PRECISION, p_id TEXT, p_entry TEXT, p_limit BIGINT)
    RETURNS TABLE (o_kind TEXT, o_value TEXT, o_version BIGINT, o_revision BIGINT,
                   o_author TEXT, o_trust TEXT, o_at DOUBLE PRECISION, o_lineage BIGINT,
                   o_op TEXT, o_log TEXT)
    LANGUAGE plpgsql AS $$
    DECLARE
        cur RECORD;
        v JSONB;
        a JSONB := p_arg::jsonb;
        lg JSONB := '[]'::jsonb;
        rev BIGINT;
        tr TEXT;
        exact BOOLEAN;
    BEGIN
        INSERT INTO sf_state_ns AS n (ns, revision) VALUES (p_ns, 0)
        ON CONFLICT (ns) DO UPDATE SET revision = n.revision;  -- locks the namespace
        SELECT s.value, s.version, s.revision, s.author, s.trust, s.written_at, s.lineage,
               s.merge_op, s.merge_log INTO cur
        FROM sf_state s WHERE s.ns = p_ns AND s.key = p_key;
        IF FOUND THEN
            IF cur.merge_op IS NULL OR cur.merge_op <> p_op THEN
                RETURN QUERY SELECT 'op', cur.value, cur.version, cur.revision, cur.author,
                    cur.trust, cur.written_at, cur.lineage, cur.merge_op, cur.merge_log;
                RETURN;
            END IF;
            v := cur.value::jsonb;
            lg := cur.merge_log::jsonb;
            IF (p_id IS NOT NULL AND EXISTS (
                    SELECT 1 FROM jsonb_array_elements(lg) e WHERE e->>3 = p_id))
               OR (p_op = 'set_add' AND v @> jsonb_build_array(a)) THEN
                RETURN QUERY SELECT 'dup', cur.value, cur.version, cur.revision, cur.author,
                    cur.trust, cur.written_at, cur.lineage, cur.merge_op, cur.merge_log;
                RETURN;
            END IF;
        END IF;
        IF (p_op IN ('append', 'set_add') AND v IS NOT NULL AND jsonb_typeof(v) <> 'array')
           OR (p_op IN ('add', 'max', 'min') AND v IS NOT NULL AND jsonb_typeof(v) <> 'number')
           OR (p_op = 'merge' AND v IS NOT NULL AND jsonb_typeof(v) <> 'object') THEN
            RETURN QUERY SELECT 'kind', cur.value, cur.version, cur.revision, cur.author,
                cur.trust, cur.written_at, cur.lineage, cur.merge_op, cur.merge_log;
            RETURN;
        END IF;
        IF p_op IN ('append', 'set_add') THEN
            v := COALESCE(v, '[]'::jsonb) || jsonb_build_array(a);
        ELSIF p_op IN ('add', 'max', 'min') THEN
            -- whole numbers add exactly; any other as binary floats, like Python
            exact := v IS NULL OR (v::text !~ '[.eE]' AND a::text !~ '[.eE]');
            IF v IS NULL THEN
                v := a;
            ELSIF exact AND p_op = 'add' THEN
                v := to_jsonb(v::numeric + a::numeric);
            ELSIF p_op = 'add' THEN
                v := to_jsonb(v::text::float8 + a::text::float8);
            ELSIF (p_op = 'max' AND a::numeric > v::numeric)
               OR (p_op = 'min' AND a::numeric < v::numeric) THEN
                v := a;
            END IF;
        ELSIF p_op = 'merge' THEN
            v := COALESCE(v, '{}'::jsonb) || a;
        ELSE
            RETURN QUERY SELECT 'unsupported', NULL::TEXT, 0::BIGINT, 0::BIGINT, NULL::TEXT,
                NULL::TEXT, 0::float8, 0::BIGINT, NULL::TEXT, NULL::TEXT;
            RETURN;
        END IF;
        IF p_limit > 0 AND octet_length(v::text) > p_limit THEN
            RETURN QUERY SELECT 'size', cur.value, octet_length(v::text)::BIGINT, 0::BIGINT,
                cur.author, cur.trust, 0::float8, 0::BIGINT, cur.merge_op, cur.merge_log;
            RETURN;
        END IF;
        lg := lg || jsonb_build_array(p_entry::jsonb);
        tr := CASE WHEN cur.trust = 'untrusted' OR p_trust = 'untrusted' THEN 'untrusted'
                   WHEN cur.trust = 'trusted' OR p_trust = 'trusted' THEN 'trusted'
                   ELSE 'system' END;
        UPDATE sf_state_ns SET revision = revision + 1 WHERE ns = p_ns RETURNING revision
            INTO rev;
        INSERT INTO sf_state AS s (ns, key, value, version, revision, author, trust,
                                   written_at, lineage, merge_op, merge_log)
        VALUES (p_ns, p_key, v::text, COALESCE(cur.version, 0) + 1, rev, p_author, tr, p_now,
                COALESCE(cur.lineage, 0) + 1, p_op, lg::text)
        ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value,
            version = excluded.version, revision = excluded.revision,
            author = excluded.author, trust = excluded.trust, written_at = excluded.written_at,
            lineage = excluded.lineage, merge_op = excluded.merge_op,
            merge_log = excluded.merge_log;
        RETURN QUERY SELECT 'ok', v::text, COALESCE(cur.version, 0) + 1, rev, p_author, tr,
            p_now, COALESCE(cur.lineage, 0) + 1, p_op, lg::text;
    END;
    $$
    """,
]

_COLS = "key, value, version, revision, author, trust, written_at, lineage, merge_op, merge_log"


def _record(row: tuple[Any, ...]) -> StateRecord:
    k, v, ver, rev, author, trust, at, lineage, op, log = row
    return StateRecord(
        str(k),
        str(v),
        int(ver),
        int(rev),
        str(author),
        str(trust),
        float(at),
        int(lineage),
        op,
        log,
    )


class PostgresStateStore:
    """Versioned keys of one namespace in PostgreSQL, shared by many processes and machines.

    Args:
        db: the database (``PostgresDB``), shared with the other protocol objects.
        namespace: keys of different namespaces never meet.
    """

    def __init__(self, db: PostgresDB, namespace: str = "default") -> None:
        self.db = db
        self.namespace = namespace
        db.migrate("statestore", MIGRATIONS)

    def read(self, key: str) -> StateRecord | None:
        rows = self.db.execute(
            f"SELECT {_COLS} FROM sf_state WHERE ns = %s AND key = %s",
            (self.namespace, key),
            write=False,
        )
        return _record(rows[0]) if rows else None

    def write(
        self,
        key: str,
        value: str,
        *,
        author: str,
        trust: str,
        expect: int | None,
        now: float,
        fence: tuple[str, int] | None = None,
        seen: tuple[int, int] | None = None,
    ) -> StateRecord:
        check_size(self.db.url, f"the value of key {key!r}", value, self.db.max_value_bytes)
        rows = self.db.execute(
            "SELECT * FROM sf_state_write(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                self.namespace,
                key,
                value,
                author,
                trust,
                expect,
                float(now),
                fence[0] if fence else None,
                fence[1] if fence else None,
                seen[0] if seen else None,
                seen[1] if seen else None,
            ),
        )
        kind, _, cur_value, version, revision, cur_author, lineage = rows[0]
        if kind == "ok":
            return StateRecord(
                key, value, int(version), int(revision), author, trust, float(now), int(lineage)
            )
        raise write_conflict(kind, key, expect, fence, (version, cur_value, cur_author))

    def merge(
        self,
        key: str,
        op: str,
        arg: str,
        *,
        author: str,
        trust: str,
        now: float,
        merge_id: str | None = None,
        reducer: Any = None,
    ) -> MergeOutcome:
        limit = self.db.max_value_bytes
        check_size(self.db.url, f"the contribution to key {key!r}", arg, limit)
        check_contribution(key, op, arg)
        if op == "reduce":
            raise merge_refused(key, op, self.db.url)
        rows = self.db.execute(
            "SELECT * FROM sf_state_merge(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                self.namespace,
                key,
                op,
                arg,
                author,
                trust,
                float(now),
                merge_id,
                log_entry(author, trust, now, merge_id, op, arg),
                limit,
            ),
        )
        kind, *cols = rows[0]
        if kind == "size":
            raise ValueTooLargeError(self.db.url, f"the value of key {key!r}", int(cols[1]), limit)
        rec = _record((key, *cols)) if cols[0] is not None else None
        if kind in ("ok", "dup") and rec is not None:
            return MergeOutcome.of(rec, kind == "ok")
        raise merge_refused(key, op, self.db.url, kind, rec)

    def snapshot(self) -> dict[str, StateRecord]:
        rows = self.db.execute(
            f'SELECT {_COLS} FROM sf_state WHERE ns = %s ORDER BY key COLLATE "C"',
            (self.namespace,),
            write=False,
        )
        return {r[0]: _record(r) for r in rows}

    def revision(self) -> int:
        rows = self.db.execute(
            "SELECT revision FROM sf_state_ns WHERE ns = %s", (self.namespace,), write=False
        )
        return int(rows[0][0]) if rows else 0

    def lost_updates(self) -> int:
        rows = self.db.execute(
            "SELECT COALESCE(SUM(version - lineage), 0) FROM sf_state WHERE ns = %s",
            (self.namespace,),
            write=False,
        )
        return int(rows[0][0])

    def __repr__(self) -> str:
        return f"PostgresStateStore({self.db.url!r}, {self.namespace!r})"
