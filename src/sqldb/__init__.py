"""The SQL plumbing every room that keeps tables shares, below all of them.

- :mod:`exai.sqldb.executor`: the four calls a room's SQL makes on a connection
  (:class:`~exai.sqldb.executor.Executor`), how each backend spells a statement
  (:class:`~exai.sqldb.executor.Dialect`), and the sqlite3 connection that runs a
  whole transaction's body at once (:func:`~exai.sqldb.executor.drive`);
- :mod:`exai.sqldb.migrations`: the versioned migration runners (SQLite, Postgres);
- :mod:`exai.sqldb.thread`: a SQLite connection on a thread of its own;
- :mod:`exai.sqldb.postgres`: a URL's options for asyncpg, a safe schema name, and
  the executor over an asyncpg connection.

The conversation store, memory, jobs and the audit outbox all stand on these, so
they sit in the foundation: the audit outbox is below the store.
"""
