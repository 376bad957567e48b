"""The SQL journal and stream, written once for SQLite and PostgreSQL.

:mod:`.journal` (composed of parts named by what they do: :mod:`.queues`, :mod:`.children`,
:mod:`.schedules`, :mod:`.pruning`, :mod:`.chunks`, :mod:`.liveness`, :mod:`.claims`,
:mod:`.operations`, :mod:`.listing`, over the columns of :mod:`.schema`) and :mod:`.stream`
hold every shared statement and the logic around it; each backend gives them a
:class:`~.dialect.Dialect` (its placeholder style, its row locks, how a statement runs and
commits) and keeps only what truly differs in its own package.
"""
