"""The schema of a SQLite file: numbered migrations per component, and the record of the
ones applied (``surefoot_schema``), checked before it is trusted.

A damaged record would make a store run its migrations again over the tables they made
(a retryable-looking "table already exists"), so the record is read both through its index
and by a scan, and a migration that does not fit the tables the file holds is refused as
damage (``CorruptionError``), or as another program's table (``SchemaVersionError``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from ...errors import CorruptionError, SchemaVersionError, StoreError

__all__ = ["apply"]


class SQLiteDB(Protocol):
    """What the schema needs of its database (``_db.SQLiteDB``): its URL and path, for
    messages, and a ``BEGIN IMMEDIATE`` write transaction."""

    url: str
    path: str

    def write(self) -> AbstractContextManager[sqlite3.Connection]: ...


def apply(db: SQLiteDB, component: str, migrations: Sequence[str]) -> int:
    """Apply ``component``'s missing ``migrations`` in one ``BEGIN IMMEDIATE`` transaction
    (see :meth:`SQLiteDB.migrate`); the migration number the file had (0: none)."""
    with db.write() as c:
        has_meta = c.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='surefoot_schema'"
        ).fetchone()
        if not has_meta:
            others = [
                r[0]
                for r in c.execute(
                    "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
                )
            ]
            if others:
                raise SchemaVersionError(
                    db.url,
                    f"{db.path!r} is not a surefoot database (it has tables "
                    f"{', '.join(sorted(others)[:5])} and no surefoot_schema); it was "
                    "left untouched. Use a new file for surefoot.",
                )
            c.execute(
                "CREATE TABLE surefoot_schema (component TEXT PRIMARY KEY, "
                "version INTEGER NOT NULL)"
            )
        current = _recorded(db, c, component)
        if current > len(migrations):
            raise SchemaVersionError(
                db.url,
                f"{db.path!r} has {component} schema version {current}, newer than this "
                f"surefoot knows ({len(migrations)}); upgrade surefoot. Nothing was changed. "
                "(If no newer surefoot ever used the file, its record is damaged: restore "
                "it from a backup.)",
            )
        for number in range(current + 1, len(migrations) + 1):
            for stmt in _statements(migrations[number - 1]):
                try:
                    c.execute(stmt)
                except sqlite3.OperationalError as exc:
                    if not _misfit(exc, current):
                        raise
                    raise _disagrees(db, component, current, number, exc) from exc
        if current < len(migrations):
            c.execute(
                "INSERT INTO surefoot_schema(component, version) VALUES (?, ?) "
                "ON CONFLICT(component) DO UPDATE SET version=excluded.version",
                (component, len(migrations)),
            )
        return current


def _recorded(db: SQLiteDB, c: sqlite3.Connection, component: str) -> int:
    """The migration number ``surefoot_schema`` records for ``component`` (0: none).

    The row is read twice, through the table's primary-key index and by a scan of the
    table itself (a few rows): a damaged index would otherwise hide the row, and the
    migrations would run again over the tables they made.

    Raises:
        CorruptionError: the two reads disagree, or the version is not a whole number
            from 1 (surefoot records only those).
    """
    sql = "SELECT version FROM surefoot_schema {} WHERE component=?"
    by_index = [r[0] for r in c.execute(sql.format(""), (component,))]
    by_scan = [r[0] for r in c.execute(sql.format("NOT INDEXED"), (component,))]
    if by_index != by_scan:
        raise _damaged_record(
            db,
            component,
            f"its index finds {_versions(by_index)} and the table holds {_versions(by_scan)}",
        )
    if not by_scan:
        return 0
    version = by_scan[0]
    if type(version) is not int or version < 1:
        raise _damaged_record(db, component, f"the version is {version!r}, not a migration number")
    return version


def _damaged_record(db: SQLiteDB, component: str, found: str) -> CorruptionError:
    """The error for a damaged ``surefoot_schema`` row of ``component``."""
    return CorruptionError(
        db.url,
        f"{db.path} (surefoot_schema, {component})",
        f"{db.path!r}: the record of which {component} migrations the file has "
        f"applied (table surefoot_schema) is damaged: {found}. It was refused and "
        f"nothing was changed. {_RESTORE}",
    )


def _disagrees(
    db: SQLiteDB, component: str, current: int, number: int, exc: sqlite3.Error
) -> StoreError:
    """The error for migration ``number`` of ``component`` not fitting the tables the
    file holds (``exc``: what it creates is there already, or what it rebuilds has its
    new shape) though the record says ``current``: a damaged record, or (no record at
    all) another program's table."""
    text = " ".join(str(exc).split())
    if current == 0:
        return SchemaVersionError(
            db.url,
            f"{db.path!r} already has a table, index or column of surefoot's "
            f"{component} store ({text}) that this surefoot did not create (no "
            f"{component!r} row in surefoot_schema): another program made it, or damage "
            "lost the record. It was left untouched. Run `PRAGMA integrity_check` on a "
            "copy: if it finds damage, restore the file from a backup; if not, use a new "
            "file or move that table away.",
        )
    return CorruptionError(
        db.url,
        f"{db.path} (surefoot_schema, {component})",
        f"{db.path!r}: the record of which {component} migrations the file has "
        f"applied (table surefoot_schema) says version {current}, but migration "
        f"{number} does not fit the tables the file holds ({text}): the record is "
        f"damaged. It was refused and nothing was changed. {_RESTORE}",
    )


_RESTORE = (
    "Stop every process using the file and restore it from a backup; `PRAGMA "
    "integrity_check` on a copy, or opening it with ?check=full in the URL, lists any "
    "other damage (docs/reliability.md, section 4)."
)


_EXISTS = ("already exists", "duplicate column name")
_MISSING = ("no such table", "no such column", "no such index")


def _misfit(exc: sqlite3.Error, current: int) -> bool:
    """Whether ``exc``, from a migration above ``current``, says the file's tables are not
    at ``current``: what it creates is there already, or (after a recorded migration)
    what it reads or rebuilds is gone or has its new shape."""
    text = str(exc)
    return any(s in text for s in _EXISTS) or (current > 0 and any(s in text for s in _MISSING))


def _versions(found: list[Any]) -> str:
    """The versions one read of the record found, for a message."""
    return f"version {', '.join(map(repr, found))}" if found else "no row"


def _statements(script: str) -> Iterator[str]:
    """The statements of ``script``, split at the ``;`` that end one (not those inside a
    trigger's ``BEGIN … END``)."""
    stmt = ""
    for part in script.split(";"):
        stmt += part + ";"
        if sqlite3.complete_statement(stmt):
            if stmt.strip(" \n\t;"):
                yield stmt
            stmt = ""
    if stmt.strip(" \n\t;"):
        yield stmt
