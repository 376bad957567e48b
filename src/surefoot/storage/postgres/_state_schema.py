"""The PostgreSQL state store's schema, as numbered migrations (run in order, each once,
by ``PostgresDB.migrate("statestore", MIGRATIONS)``): tables, indexes and the PL/pgSQL
functions that make each write, merge, delete and transaction one round trip. A migration is
never edited once released; a change is a new one that upgrades existing schemas in place.
"""

from __future__ import annotations

__all__ = ["MIGRATIONS"]

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
    # History, tombstones and TTLs: a trigger logs every change of sf_state by revision in
    # the statement that makes it, and NOTIFYs the schema's "state" channel (delivered at
    # commit). A deleted (1) or expired (2) key stays as a tombstone row so its version
    # keeps counting. Changes made before this migration were not logged: the log starts
    # with each key's current version, and older revisions read as compacted.
    """
    ALTER TABLE sf_state ADD COLUMN deleted SMALLINT NOT NULL DEFAULT 0;
    ALTER TABLE sf_state ADD COLUMN expires_at DOUBLE PRECISION;
    ALTER TABLE sf_state ADD COLUMN compacted BIGINT NOT NULL DEFAULT 0;
    ALTER TABLE sf_state_ns ADD COLUMN compacted BIGINT NOT NULL DEFAULT 0;
    CREATE INDEX sf_state_expiry ON sf_state (ns, expires_at) WHERE expires_at IS NOT NULL;
    CREATE TABLE sf_state_log (
        ns TEXT NOT NULL, revision BIGINT NOT NULL, key TEXT NOT NULL, kind TEXT NOT NULL,
        value TEXT, version BIGINT NOT NULL, author TEXT NOT NULL, trust TEXT NOT NULL,
        at DOUBLE PRECISION NOT NULL, expires_at DOUBLE PRECISION,
        PRIMARY KEY (ns, revision)
    );
    CREATE INDEX sf_state_log_key ON sf_state_log (ns, key, revision);
    INSERT INTO sf_state_log
        SELECT ns, revision, key, CASE WHEN merge_op IS NULL THEN 'put' ELSE 'merge' END,
               value, version, author, trust, written_at, NULL FROM sf_state;
    UPDATE sf_state SET compacted = revision WHERE version > 1;
    UPDATE sf_state_ns SET compacted = revision;
    CREATE FUNCTION sf_state_logged() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO sf_state_log VALUES (NEW.ns, NEW.revision, NEW.key,
            CASE NEW.deleted WHEN 1 THEN 'delete' WHEN 2 THEN 'expire'
                 ELSE CASE WHEN NEW.merge_op IS NULL THEN 'put' ELSE 'merge' END END,
            CASE WHEN NEW.deleted <> 0 THEN NULL ELSE NEW.value END, NEW.version,
            NEW.author, NEW.trust, NEW.written_at, NEW.expires_at);
        PERFORM pg_notify(TG_TABLE_SCHEMA || '.state', NEW.ns);
        RETURN NULL;
    END;
    $$;
    CREATE TRIGGER sf_state_logged AFTER INSERT ON sf_state
        FOR EACH ROW EXECUTE FUNCTION sf_state_logged();
    CREATE TRIGGER sf_state_logged_update AFTER UPDATE ON sf_state
        FOR EACH ROW WHEN (NEW.revision <> OLD.revision) EXECUTE FUNCTION sf_state_logged();
    CREATE FUNCTION sf_state_tombstone(
        p_ns TEXT, p_key TEXT, p_author TEXT, p_trust TEXT, p_now DOUBLE PRECISION,
        p_kind SMALLINT)
    RETURNS TABLE (o_version BIGINT, o_revision BIGINT)
    LANGUAGE plpgsql AS $$
    DECLARE
        rev BIGINT;
    BEGIN
        IF NOT EXISTS (SELECT 1 FROM sf_state s
                       WHERE s.ns = p_ns AND s.key = p_key AND s.deleted = 0) THEN
            RETURN;
        END IF;
        UPDATE sf_state_ns SET revision = revision + 1 WHERE ns = p_ns RETURNING revision
            INTO rev;
        RETURN QUERY UPDATE sf_state s SET value = 'null', version = s.version + 1,
            revision = rev, author = p_author, trust = p_trust, written_at = p_now,
            lineage = s.lineage + 1, merge_op = NULL, merge_log = NULL, deleted = p_kind,
            expires_at = NULL
        WHERE s.ns = p_ns AND s.key = p_key RETURNING s.version, s.revision;
    END;
    $$;
    CREATE FUNCTION sf_state_sweep(p_ns TEXT, p_now DOUBLE PRECISION) RETURNS INTEGER
    LANGUAGE plpgsql AS $$
    DECLARE
        r RECORD;
        n INTEGER := 0;
    BEGIN
        FOR r IN SELECT s.key FROM sf_state s WHERE s.ns = p_ns AND s.expires_at <= p_now
                 ORDER BY s.expires_at, s.key LOOP
            PERFORM sf_state_tombstone(p_ns, r.key, 'system', 'system', p_now, 2::SMALLINT);
            n := n + 1;
        END LOOP;
        RETURN n;
    END;
    $$;
    DROP FUNCTION sf_state_write(TEXT, TEXT, TEXT, TEXT, TEXT, BIGINT, DOUBLE PRECISION,
        TEXT, BIGINT, BIGINT, BIGINT);
    CREATE FUNCTION sf_state_write(
        p_ns TEXT, p_key TEXT, p_value TEXT, p_author TEXT, p_trust TEXT,
        p_expect BIGINT, p_now DOUBLE PRECISION, p_fkey TEXT, p_fver BIGINT,
        p_sver BIGINT, p_slin BIGINT, p_exp DOUBLE PRECISION)
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
        IF EXISTS (SELECT 1 FROM sf_state s WHERE s.ns = p_ns AND s.expires_at <= p_now) THEN
            PERFORM sf_state_sweep(p_ns, p_now);
        END IF;
        IF p_fkey IS NOT NULL THEN
            SELECT s.value, s.version, s.author, s.deleted INTO cur
            FROM sf_state s WHERE s.ns = p_ns AND s.key = p_fkey;
            IF NOT FOUND OR cur.version <> p_fver OR cur.deleted <> 0 THEN
                RETURN QUERY SELECT 'fence', p_fkey,
                    CASE WHEN cur.deleted <> 0 THEN NULL ELSE cur.value END,
                    COALESCE(cur.version, 0), 0::BIGINT, cur.author, 0::BIGINT;
                RETURN;
            END IF;
        END IF;
        SELECT s.value, s.version, s.author, s.lineage, s.deleted INTO cur
        FROM sf_state s WHERE s.ns = p_ns AND s.key = p_key;
        ver := COALESCE(cur.version, 0);
        IF p_expect IS NULL AND p_sver IS NOT NULL AND p_sver < ver THEN
            lin := p_slin + 1;  -- a stale write descends from what its writer read
        ELSE
            lin := COALESCE(cur.lineage, 0) + 1;
        END IF;
        IF p_expect IS NOT NULL AND p_expect <> ver
           AND NOT (p_expect = 0 AND COALESCE(cur.deleted, 1) <> 0) THEN
            RETURN QUERY SELECT 'conflict', p_key,
                CASE WHEN cur.deleted <> 0 THEN NULL ELSE cur.value END, ver, 0::BIGINT,
                cur.author, 0::BIGINT;
            RETURN;
        END IF;
        UPDATE sf_state_ns SET revision = revision + 1 WHERE ns = p_ns RETURNING revision
            INTO rev;
        INSERT INTO sf_state AS s
            (ns, key, value, version, revision, author, trust, written_at, lineage, expires_at)
        VALUES (p_ns, p_key, p_value, ver + 1, rev, p_author, p_trust, p_now, lin, p_exp)
        ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value,
            version = excluded.version, revision = excluded.revision,
            author = excluded.author, trust = excluded.trust, written_at = excluded.written_at,
            lineage = excluded.lineage, merge_op = NULL, merge_log = NULL, deleted = 0,
            expires_at = excluded.expires_at;
        RETURN QUERY SELECT 'ok', p_key, p_value, ver + 1, rev, p_author, lin;
    END;
    $$;
    CREATE OR REPLACE FUNCTION sf_state_merge(
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
        live BOOLEAN;
    BEGIN
        INSERT INTO sf_state_ns AS n (ns, revision) VALUES (p_ns, 0)
        ON CONFLICT (ns) DO UPDATE SET revision = n.revision;  -- locks the namespace
        IF EXISTS (SELECT 1 FROM sf_state s WHERE s.ns = p_ns AND s.expires_at <= p_now) THEN
            PERFORM sf_state_sweep(p_ns, p_now);
        END IF;
        SELECT s.value, s.version, s.revision, s.author, s.trust, s.written_at, s.lineage,
               s.merge_op, s.merge_log, s.deleted INTO cur
        FROM sf_state s WHERE s.ns = p_ns AND s.key = p_key;
        live := FOUND AND cur.deleted = 0;  -- a tombstone: the key starts again
        IF live THEN
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
        tr := CASE WHEN (live AND cur.trust = 'untrusted') OR p_trust = 'untrusted'
                        THEN 'untrusted'
                   WHEN (live AND cur.trust = 'trusted') OR p_trust = 'trusted' THEN 'trusted'
                   ELSE 'system' END;
        UPDATE sf_state_ns SET revision = revision + 1 WHERE ns = p_ns RETURNING revision
            INTO rev;
        INSERT INTO sf_state AS s (ns, key, value, version, revision, author, trust,
                                   written_at, lineage, merge_op, merge_log)
        VALUES (p_ns, p_key, v::text, COALESCE(cur.version, 0) + 1, rev, p_author, tr,
                p_now, COALESCE(cur.lineage, 0) + 1, p_op, lg::text)
        ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value,
            version = excluded.version, revision = excluded.revision,
            author = excluded.author, trust = excluded.trust, written_at = excluded.written_at,
            lineage = excluded.lineage, merge_op = excluded.merge_op,
            merge_log = excluded.merge_log, deleted = 0;
        RETURN QUERY SELECT 'ok', v::text, COALESCE(cur.version, 0) + 1, rev, p_author, tr,
            p_now, COALESCE(cur.lineage, 0) + 1, p_op, lg::text;
    END;
    $$
    """,
]
