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

from ..base import StateRecord, check_size, write_conflict
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
]

_COLS = "key, value, version, revision, author, trust, written_at, lineage"


def _record(row: tuple[Any, ...]) -> StateRecord:
    k, v, ver, rev, author, trust, at, lineage = row
    return StateRecord(
        str(k), str(v), int(ver), int(rev), str(author), str(trust), float(at), int(lineage)
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
