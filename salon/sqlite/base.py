"""Django's SQLite backend, with each statement's placeholders converted once.

Django writes SQL with `%s` placeholders, and its SQLite cursor turns them into SQLite's
`?` on every execute, with a regular expression behind a lazy proxy: 2 % of the daemon's
CPU for a send and its push (bench/RESULTS.md). The statements the bus runs are a small
fixed set (the ORM writes the same text for the same shape of query), so the converted
text is kept per statement text.

No stored row may make a read fail (a row changed outside the bus can hold anything its
column type lets SQLite keep): text that is not UTF-8 reads with U+FFFD where its bad
bytes were, and a UUID column holding something else reads as that text. Either way the
row's signature no longer matches, so it reads as tampered. Everything else is Django's
own backend.
"""

from __future__ import annotations

import uuid
from functools import lru_cache, partial

from django.db.backends.sqlite3 import base, operations

# sqlite3 decodes every TEXT value with this (C functions: no cost per value over the
# default, which refuses a row whose bytes are not UTF-8).
_decode_text = partial(str, encoding="utf-8", errors="replace")


@lru_cache(maxsize=1024)
def _qmark(query: str) -> str:
    return base.FORMAT_QMARK_REGEX.sub("?", query).replace("%%", "%")


class SQLiteCursorWrapper(base.SQLiteCursorWrapper):
    def convert_query(self, query, *, param_names=None):
        if param_names is None:
            return _qmark(query)
        return super().convert_query(query, param_names=param_names)


class DatabaseOperations(operations.DatabaseOperations):
    def convert_uuidfield_value(self, value, expression, connection):
        if value is None or isinstance(value, uuid.UUID):
            return value
        try:
            return uuid.UUID(value)
        except (TypeError, ValueError, AttributeError):
            return str(value)  # not a UUID: read as its text (bus.strict.stored_uuid)


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations

    def get_new_connection(self, conn_params):
        connection = super().get_new_connection(conn_params)
        connection.text_factory = _decode_text
        return connection

    def create_cursor(self, name=None):
        return self.connection.cursor(factory=SQLiteCursorWrapper)
