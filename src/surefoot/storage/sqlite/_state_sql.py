"""The SQL of the SQLite ``StateStore`` (see ``_state``): its schema migrations, with the
triggers that write the change log, and the statements the store runs."""

from __future__ import annotations

__all__ = [
    "CHAIN",
    "COLS",
    "CURRENT",
    "DUE",
    "FENCE_OK",
    "HISTORY",
    "JOINED",
    "LIST_LOGGED",
    "LIST_ROW",
    "LIVE",
    "LOGGED",
    "LOG_COLS",
    "MERGE",
    "MERGE_LIST",
    "MERGE_LIST_UPDATE",
    "MIGRATIONS",
    "NEXT_REV",
    "READ_AT",
    "SELECT",
    "SKIP",
    "TOMBSTONE",
    "UPDATE",
    "UPDATE_NOFENCE",
    "UPDATE_ONE",
    "UPDATE_ONE_NOFENCE",
    "UPSERT",
    "UPSERT_NOFENCE",
    "UPSERT_ONE",
    "UPSERT_ONE_NOFENCE",
    "WATCH_READ",
    "WRITE_READ",
]

# The log row of a change, from the sf_state row it made (``new``): a tombstone's kind is
# delete (1) or expire (2); a list merge's value is NULL (its items up to that version).
LOGGED = """
    INSERT INTO sf_state_log (ns, revision, key, kind, value, version, author, trust, at,
                              expires_at, prev)
    VALUES (new.ns, new.revision, new.key,
            CASE new.deleted WHEN 1 THEN 'delete' WHEN 2 THEN 'expire'
                 ELSE CASE WHEN new.merge_op IS NULL THEN 'put' ELSE 'merge' END END,
            CASE WHEN new.deleted <> 0 OR new.merge_op IN ('append', 'set_add') THEN NULL
                 ELSE new.value END,
            new.version, new.author, new.trust, new.written_at, new.expires_at, {prev})
"""
# One in SKIP of a key's changes is indexed by (ns, key, revision): a read at an old
# revision starts from the nearest one after it and walks back at most SKIP changes.
SKIP = 64

MIGRATIONS = [
    """
    CREATE TABLE sf_state (
        ns TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
        version INTEGER NOT NULL, revision INTEGER NOT NULL,
        author TEXT NOT NULL, trust TEXT NOT NULL, written_at REAL NOT NULL,
        PRIMARY KEY (ns, key)
    );
    CREATE INDEX sf_state_revision ON sf_state (ns, revision)
    """,
    # Lost updates are counted per key: versions its value does not descend from.
    """
    ALTER TABLE sf_state ADD COLUMN lineage INTEGER NOT NULL DEFAULT 0;
    UPDATE sf_state SET lineage = version
    """,
    # Merges applied by the store: the op a key merges by and its log of contributions.
    # A list merge (append, set_add) adds one row to sf_state_items instead of rewriting
    # the whole list: the list is read back in one statement, in order.
    """
    ALTER TABLE sf_state ADD COLUMN merge_op TEXT;
    ALTER TABLE sf_state ADD COLUMN merge_log TEXT;
    ALTER TABLE sf_state ADD COLUMN merge_size INTEGER;
    CREATE TABLE sf_state_items (
        ns TEXT NOT NULL, key TEXT NOT NULL, n INTEGER NOT NULL, item TEXT NOT NULL,
        entry TEXT NOT NULL, mid TEXT, member TEXT,
        PRIMARY KEY (ns, key, n)
    );
    CREATE UNIQUE INDEX sf_state_items_mid ON sf_state_items (ns, key, mid)
        WHERE mid IS NOT NULL;
    CREATE UNIQUE INDEX sf_state_items_member ON sf_state_items (ns, key, member)
        WHERE member IS NOT NULL
    """,
    # History, tombstones and TTLs: every change is logged by revision in the transaction
    # that makes it; a deleted (1) or expired (2) key stays as a tombstone row so its
    # version keeps counting. A list merge's logged value is NULL: its items up to that
    # version are the value. Changes made before this migration were not logged: the log
    # starts with each key's current version, and older revisions read as compacted.
    """
    ALTER TABLE sf_state ADD COLUMN deleted INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE sf_state ADD COLUMN expires_at REAL;
    ALTER TABLE sf_state ADD COLUMN compacted INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX sf_state_expiry ON sf_state (ns, expires_at) WHERE expires_at IS NOT NULL;
    CREATE TABLE sf_state_log (
        ns TEXT NOT NULL, revision INTEGER NOT NULL, key TEXT NOT NULL, kind TEXT NOT NULL,
        value TEXT, version INTEGER NOT NULL, author TEXT NOT NULL, trust TEXT NOT NULL,
        at REAL NOT NULL, expires_at REAL,
        PRIMARY KEY (ns, revision)
    ) WITHOUT ROWID;
    CREATE INDEX sf_state_log_key ON sf_state_log (ns, key, revision);
    CREATE TABLE sf_state_meta (ns TEXT PRIMARY KEY, compacted INTEGER NOT NULL);
    INSERT INTO sf_state_log
        SELECT ns, revision, key, CASE WHEN merge_op IS NULL THEN 'put' ELSE 'merge' END,
               CASE WHEN merge_op IN ('append', 'set_add') THEN NULL ELSE value END,
               version, author, trust, written_at, NULL FROM sf_state;
    UPDATE sf_state SET compacted = revision WHERE version > 1;
    INSERT INTO sf_state_meta SELECT ns, MAX(revision) FROM sf_state GROUP BY ns
    """,
    # The change log is written by triggers, inside the statement that makes the change:
    # a write is one statement (and one round trip from Python) instead of two. A row whose
    # revision moves is a change; kind and logged value follow from the row (see LOGGED).
    # The namespace's revision is read from the log's primary key (every key's latest change
    # is logged and never compacted), so sf_state's revision index, one more page written
    # per change, goes.
    # A list merge's item rows are keyed by (ns, key, n) without a rowid: one b-tree
    # written per item instead of the table and its primary-key index.
    #
    # A key's changes are chained instead of indexed: each log row holds the revision of
    # the key's change before it (prev), and history, read_at and a list key's replacement
    # walk the chain down from the key's current revision (compaction removes a prefix, so
    # the chain ends where the kept changes do). That is one b-tree less per change; one
    # change in SKIP is indexed, so a read at an old revision walks at most SKIP rows.
    f"""
    ALTER TABLE sf_state_log ADD COLUMN prev INTEGER;
    UPDATE sf_state_log SET prev = (
        SELECT MAX(p.revision) FROM sf_state_log p
        WHERE p.ns = sf_state_log.ns AND p.key = sf_state_log.key
          AND p.revision < sf_state_log.revision
    );
    DROP INDEX sf_state_log_key;
    CREATE INDEX sf_state_log_skip ON sf_state_log (ns, key, revision)
        WHERE version % {SKIP} = 0;
    DROP INDEX sf_state_revision;
    CREATE TABLE sf_state_items_v5 (
        ns TEXT NOT NULL, key TEXT NOT NULL, n INTEGER NOT NULL, item TEXT NOT NULL,
        entry TEXT NOT NULL, mid TEXT, member TEXT,
        PRIMARY KEY (ns, key, n)
    ) WITHOUT ROWID;
    INSERT INTO sf_state_items_v5 SELECT ns, key, n, item, entry, mid, member FROM sf_state_items;
    DROP TABLE sf_state_items;
    ALTER TABLE sf_state_items_v5 RENAME TO sf_state_items;
    CREATE UNIQUE INDEX sf_state_items_mid ON sf_state_items (ns, key, mid)
        WHERE mid IS NOT NULL;
    CREATE UNIQUE INDEX sf_state_items_member ON sf_state_items (ns, key, member)
        WHERE member IS NOT NULL;
    CREATE TRIGGER sf_state_logged_insert AFTER INSERT ON sf_state
        BEGIN {LOGGED.format(prev="NULL")}; END;
    CREATE TRIGGER sf_state_logged_update AFTER UPDATE OF revision ON sf_state
        WHEN new.revision <> old.revision BEGIN {LOGGED.format(prev="old.revision")}; END
    """,
    # A list item's dedup id is its primary key: an item is keyed by (ns, key, slot), where
    # slot is its id (text) or, without one, its n (an integer; SQLite never finds a text
    # equal to an integer, so the two kinds cannot collide). The index on (ns, key, mid), one
    # more page written by every merge with an id, goes; a list is read in n order by a sort
    # of its items (set_add's member index stays).
    """
    CREATE TABLE sf_state_items_v6 (
        ns TEXT NOT NULL, key TEXT NOT NULL, slot NOT NULL, n INTEGER NOT NULL,
        item TEXT NOT NULL, entry TEXT NOT NULL, member TEXT,
        PRIMARY KEY (ns, key, slot)
    ) WITHOUT ROWID;
    INSERT INTO sf_state_items_v6
        SELECT ns, key, COALESCE(mid, n), n, item, entry, member FROM sf_state_items;
    DROP TABLE sf_state_items;
    ALTER TABLE sf_state_items_v6 RENAME TO sf_state_items;
    CREATE UNIQUE INDEX sf_state_items_member ON sf_state_items (ns, key, member)
        WHERE member IS NOT NULL
    """,
    # Each key's checksum of its key and value (storage/rowsum.py), checked when the row is
    # read: SQLite's pages carry none. NULL: not checked (a row written before, a list
    # merge's row, whose value is its items, or a tombstone).
    "ALTER TABLE sf_state ADD COLUMN checksum INTEGER",
]

COLS = (
    "key, value, version, revision, author, trust, written_at, lineage, merge_op, merge_log, "
    "expires_at"
)
# A key reads as present: not a tombstone, and not expired at :at (None: ignore TTLs).
LIVE = "s.deleted = 0 AND (:at IS NULL OR s.expires_at IS NULL OR s.expires_at > :at)"
# A bare MAX() subquery, so SQLite reads one index entry instead of scanning the namespace.
NEXT_REV = "(COALESCE((SELECT MAX(revision) FROM sf_state_log WHERE ns = :ns), 0) + 1)"
FENCE_OK = (
    "(:fkey IS NULL OR EXISTS (SELECT 1 FROM sf_state WHERE ns = :ns AND key = :fkey "
    "AND version = :fver AND deleted = 0))"
)
# expect None (last-writer-wins) or 0 (create only): one upsert.
UPSERT = f"""
INSERT INTO sf_state (ns, key, value, version, revision, author, trust, written_at, lineage,
                      expires_at, checksum)
SELECT :ns, :key, :value, 1, {NEXT_REV}, :author, :trust, :now, 1, :exp, :sum WHERE {FENCE_OK}
ON CONFLICT (ns, key) DO UPDATE SET
    value = excluded.value, checksum = excluded.checksum, version = sf_state.version + 1,
    revision = excluded.revision,
    author = excluded.author, trust = excluded.trust, written_at = excluded.written_at,
    lineage = CASE WHEN :sver IS NOT NULL AND :sver < sf_state.version THEN :slin + 1
                   ELSE sf_state.lineage + 1 END,
    merge_op = NULL, merge_log = NULL, deleted = 0, expires_at = excluded.expires_at
WHERE (:expect IS NULL OR sf_state.deleted <> 0) AND {FENCE_OK}
RETURNING {COLS}
"""
# expect n > 0: one conditional update. Its revision and the row's lineage come from the
# write's one read (WRITE_READ, under the same write lock), so no RETURNING is needed: the
# record written is known once the row count says the version matched.
UPDATE = f"""
UPDATE sf_state SET
    value = :value, checksum = :sum, version = version + 1, revision = :rev,
    author = :author, trust = :trust, written_at = :now, lineage = lineage + 1,
    merge_op = NULL, merge_log = NULL, deleted = 0, expires_at = :exp
WHERE ns = :ns AND key = :key AND version = :expect AND {FENCE_OK}
"""
# A versioned write's one read: is a key due to expire at ?3, the namespace's revision,
# and the key's lineage.
WRITE_READ = (
    "SELECT (SELECT 1 FROM sf_state WHERE ns = ?1 AND expires_at <= ?3 LIMIT 1), "
    "(SELECT MAX(revision) FROM sf_state_log WHERE ns = ?1), "
    "(SELECT lineage FROM sf_state WHERE ns = ?1 AND key = ?2)"
)


# A write as one statement in its own transaction (``SQLiteDB.write_returning``), with no
# read before it: the revision is read inside it, and it writes nothing while a key of the
# namespace is due to expire at :now (the caller then runs UPSERT or UPDATE in a transaction
# that tombstones those keys first, so each expiry takes its revision before the write).
NOT_DUE = "NOT EXISTS (SELECT 1 FROM sf_state WHERE ns = :ns AND expires_at <= :now)"
UPDATE_ONE = (
    UPDATE.replace("revision = :rev", f"revision = {NEXT_REV}")
    + f" AND {NOT_DUE} RETURNING revision, lineage"
)
UPSERT_ONE = UPSERT.replace(f"WHERE {FENCE_OK}", f"WHERE {FENCE_OK} AND {NOT_DUE}", 1).replace(
    f"AND {FENCE_OK}\nRETURNING", f"AND {FENCE_OK} AND {NOT_DUE}\nRETURNING"
)

# Without a fence the EXISTS clause is left out of the statement altogether.
UPSERT_NOFENCE = UPSERT.replace(f" WHERE {FENCE_OK}", " WHERE true").replace(f" AND {FENCE_OK}", "")
UPDATE_NOFENCE = UPDATE.replace(f" AND {FENCE_OK}", "")
UPDATE_ONE_NOFENCE = UPDATE_ONE.replace(f" AND {FENCE_OK}", "")
UPSERT_ONE_NOFENCE = UPSERT_ONE.replace(f"WHERE {FENCE_OK} AND", "WHERE").replace(
    f" AND {FENCE_OK}", ""
)


# A list merge key's items and log entries, joined in order, in the statement that reads it.
JOINED = (
    "CASE WHEN s.merge_op IN ('append', 'set_add') THEN (SELECT group_concat({col}, ',') FROM "
    "(SELECT {col} FROM sf_state_items i WHERE i.ns = s.ns AND i.key = s.key ORDER BY i.n)) END"
)
SELECT = (
    f"SELECT {', '.join('s.' + c for c in COLS.split(', '))}, "
    f"{JOINED.format(col='item')}, {JOINED.format(col='entry')}, s.checksum FROM sf_state s "
)


# A merge: the new value is computed in Python under the write lock, then one upsert.
MERGE = f"""
INSERT INTO sf_state (ns, key, value, version, revision, author, trust, written_at, lineage,
                      merge_op, merge_log, checksum)
VALUES (:ns, :key, :value, 1, {NEXT_REV}, :author, :trust, :now, 1, :op, :log, :sum)
ON CONFLICT (ns, key) DO UPDATE SET
    value = excluded.value, checksum = excluded.checksum, version = sf_state.version + 1,
    revision = excluded.revision,
    author = excluded.author, trust = excluded.trust, written_at = excluded.written_at,
    lineage = sf_state.lineage + 1, merge_op = excluded.merge_op, merge_log = excluded.merge_log,
    deleted = 0
RETURNING {COLS}
"""
# A list merge: one item row (inserted before), and the key's row moves on.
# The same when the key has a row (the one read found it): a plain UPDATE, no insert tried.
MERGE_LIST_UPDATE = """
UPDATE sf_state SET
    value = '', checksum = NULL, version = version + 1, revision = :rev, author = :author,
    trust = :trust,
    written_at = :now, lineage = lineage + 1, merge_op = :op, merge_log = NULL,
    merge_size = :size, deleted = 0
WHERE ns = :ns AND key = :key
"""
MERGE_LIST = """
INSERT INTO sf_state (ns, key, value, version, revision, author, trust, written_at, lineage,
                      merge_op, merge_log, merge_size)
VALUES (:ns, :key, '', 1, :rev, :author, :trust, :now, 1, :op, NULL, :size)
ON CONFLICT (ns, key) DO UPDATE SET
    value = '', checksum = NULL, version = sf_state.version + 1, revision = excluded.revision,
    author = excluded.author, trust = excluded.trust, written_at = excluded.written_at,
    lineage = sf_state.lineage + 1, merge_op = excluded.merge_op, merge_log = NULL,
    merge_size = excluded.merge_size, deleted = 0
"""


# A list merge's one read: the key's row (NULLs when it has none), whether some key of
# the namespace is due to expire at ?3, and the namespace's revision.
LIST_ROW = (
    "SELECT s.version, s.trust, s.merge_op, s.merge_size, s.revision, s.author, s.written_at, "
    "s.deleted, (SELECT 1 FROM sf_state WHERE ns = ?1 AND expires_at <= ?3 LIMIT 1), "
    "(SELECT MAX(revision) FROM sf_state_log WHERE ns = ?1) "
    "FROM (SELECT 1) LEFT JOIN sf_state s ON s.ns = ?1 AND s.key = ?2"
)
# A logged change's value: a list merge's items up to its version.
LOG_COLS = (
    "l.revision, l.key, l.kind, COALESCE(l.value, CASE WHEN l.kind = 'merge' THEN '[' || "
    "(SELECT group_concat(item, ',') FROM (SELECT item FROM sf_state_items i WHERE i.ns = l.ns "
    "AND i.key = l.key AND i.n <= l.version ORDER BY i.n)) || ']' END), l.version, l.author, "
    "l.trust, l.at, l.expires_at"
)
# A key's logged changes, newest first: the chain of prev revisions from its current one.
# (CROSS JOIN keeps the chain the outer loop: one primary-key look per change.)
CHAIN = """
WITH RECURSIVE chain(rev) AS (
    SELECT revision FROM sf_state WHERE ns = :ns AND key = :key
    UNION ALL
    SELECT l.prev FROM chain CROSS JOIN sf_state_log l ON l.ns = :ns AND l.revision = chain.rev
    WHERE l.prev IS NOT NULL
)
"""
HISTORY = (
    CHAIN + f"SELECT {LOG_COLS} FROM chain CROSS JOIN sf_state_log l "
    "ON l.ns = :ns AND l.revision = chain.rev ORDER BY l.revision"
)
# A list key's logged merges whose value is its items (NULL in the log).
LIST_LOGGED = (
    CHAIN + f"SELECT {LOG_COLS} FROM chain CROSS JOIN sf_state_log l "
    "ON l.ns = :ns AND l.revision = chain.rev WHERE l.value IS NULL AND l.kind = 'merge'"
)
# The key's change at or before :rev: the walk starts at the first indexed change after
# :rev (or the key's current one) and stops at or below :rev.
READ_AT = f"""
WITH RECURSIVE chain(rev) AS (
    SELECT COALESCE(
        (SELECT MIN(revision) FROM sf_state_log INDEXED BY sf_state_log_skip
         WHERE ns = :ns AND key = :key
             AND version % {SKIP} = 0 AND revision > :rev),
        (SELECT revision FROM sf_state WHERE ns = :ns AND key = :key))
    UNION ALL
    SELECT l.prev FROM chain CROSS JOIN sf_state_log l ON l.ns = :ns AND l.revision = chain.rev
    WHERE chain.rev > :rev AND l.prev IS NOT NULL
)
SELECT {LOG_COLS} FROM chain CROSS JOIN sf_state_log l ON l.ns = :ns AND l.revision = chain.rev
WHERE l.revision <= :rev ORDER BY l.revision DESC LIMIT 1
"""
# A watch's look (``watch_read``): one statement reads one snapshot, so the head, the
# compaction mark, the expiry check and the changes all agree.
WATCH_READ = f"""
SELECT (SELECT MAX(revision) FROM sf_state_log WHERE ns = :ns),
       (SELECT compacted FROM sf_state_meta WHERE ns = :ns),
       (SELECT 1 FROM sf_state WHERE ns = :ns AND expires_at <= :now LIMIT 1),
       CASE WHEN :after < COALESCE((SELECT compacted FROM sf_state_meta WHERE ns = :ns), 0)
            THEN (SELECT MIN(revision) FROM sf_state_log WHERE ns = :ns) END,
       x.*
FROM (SELECT 1) LEFT JOIN (
    SELECT {LOG_COLS} FROM sf_state_log l
    WHERE l.ns = :ns AND l.revision > :after AND substr(l.key, 1, :n) = :prefix
    ORDER BY l.revision LIMIT :limit
) x ON true
ORDER BY x.revision
"""
TOMBSTONE = f"""
UPDATE sf_state SET value = 'null', checksum = NULL, version = version + 1, revision = {NEXT_REV},
    author = :author, trust = :trust, written_at = :now, lineage = lineage + 1,
    merge_op = NULL, merge_log = NULL, merge_size = NULL, deleted = :kind, expires_at = NULL
WHERE ns = :ns AND key = :key AND deleted = 0
RETURNING version, revision
"""
# Is any key of the namespace due to expire at ?2 (one look at the expiry index)?
DUE = "SELECT 1 FROM sf_state WHERE ns = ?1 AND expires_at <= ?2 LIMIT 1"
CURRENT = "SELECT version, value, author, deleted, merge_op FROM sf_state WHERE ns = ? AND key = ?"
