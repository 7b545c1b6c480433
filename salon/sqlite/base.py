"""Django's SQLite backend, with each statement's placeholders converted once.

Django writes SQL with `%s` placeholders, and its SQLite cursor turns them into SQLite's
`?` on every execute, with a regular expression behind a lazy proxy: 2 % of the daemon's
CPU for a send and its push (bench/RESULTS.md). The statements the bus runs are a small
fixed set (the ORM writes the same text for the same shape of query), so the converted
text is kept per statement text. Everything else is Django's own backend.
"""

from __future__ import annotations

from functools import lru_cache

from django.db.backends.sqlite3 import base


@lru_cache(maxsize=1024)
def _qmark(query: str) -> str:
    return base.FORMAT_QMARK_REGEX.sub("?", query).replace("%%", "%")


class SQLiteCursorWrapper(base.SQLiteCursorWrapper):
    def convert_query(self, query, *, param_names=None):
        if param_names is None:
            return _qmark(query)
        return super().convert_query(query, param_names=param_names)


class DatabaseWrapper(base.DatabaseWrapper):
    def create_cursor(self, name=None):
        return self.connection.cursor(factory=SQLiteCursorWrapper)
