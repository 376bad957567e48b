"""The SQL journal and stream, written once for SQLite and PostgreSQL.

:mod:`.journal` and :mod:`.stream` hold every shared statement and the logic around it;
each backend gives them a :class:`~.dialect.Dialect` (its placeholder style, its row locks,
how a statement runs and commits) and keeps only what truly differs in its own package.
"""
