"""The recorders: chatledger's three storage backends, each implementing the
:class:`~eventlog.recorder.Recorder` contract of :mod:`eventlog.recorder` under the one ledger,
:class:`~eventlog.store.EventStore`, that adds hash chains, keys, verification and erasure.

- :mod:`eventlog.recorders.memory`: ``InMemoryEventStore``, records in Python lists.
- :mod:`eventlog.recorders.sqlite`: ``SQLiteEventStore``, with its parts in ``sqlite_base``,
  ``sqlite_erase``, ``sqlite_open``, ``sqlite_schema`` and ``sqlite_sql``.
- :mod:`eventlog.recorders.postgres`: ``PostgresEventStore``, with its parts in
  ``postgres_base``, ``postgres_erase``, ``postgres_open``, ``postgres_races``,
  ``postgres_reads``, ``postgres_sql`` and ``postgres_waits``.

This package imports none of them: each backend (and sqlite-utils or psycopg with it) loads
only when used. Import the stores from :mod:`eventlog`, or from their public paths
:mod:`eventlog.memory`, :mod:`eventlog.sqlite` and :mod:`eventlog.postgres`.
"""
