"""Statements written out, with the ORM's column lists and values: for a join the ORM
would compile on every call, its SELECT list (`columns`) and its rows as models
(`model_from_row`); `update_by_ids` writes one UPDATE for thousands of ids, each value
prepared by its field. Only the field-level API custom fields implement (converters,
get_db_prep_*, from_db); the lookups and inserts that drive the ORM's compiler are
patches.django's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Model


def columns(model: type[Model], alias: str) -> str:
    """Every concrete column of `model`, in field order, as `alias`.<column>: the SELECT
    list whose rows model_from_row reads."""
    quote = connections[DEFAULT_DB_ALIAS].ops.quote_name
    return ", ".join(f"{alias}.{quote(f.column)}" for f in model._meta.concrete_fields)


def model_from_row(model: type[Model], row) -> Model:
    """A `model` instance from a row of columns(model, …), each value through the ORM's
    converters, as a queryset would have read it."""
    conn = connections[DEFAULT_DB_ALIAS]
    fields = model._meta.concrete_fields
    values = []
    for field, value in zip(fields, row, strict=True):
        column = field.get_col(model._meta.db_table)
        for convert in conn.ops.get_db_converters(column) + field.get_db_converters(conn):
            value = convert(value, column, conn)
        values.append(value)
    return model.from_db(DEFAULT_DB_ALIAS, [f.attname for f in fields], values)


# Ids per UPDATE: bounds a statement's parameters (SQLite allows 32,766).
ID_CHUNK = 1000


def update_by_ids(model: type[Model], ids: Iterable, **values: Any) -> None:
    """`UPDATE <table> SET <values> WHERE pk IN <ids>`, ID_CHUNK ids a statement, each
    value prepared by its field as the ORM prepares it. For the keep-alive round's
    thousands of ids: the ORM builds an IN lookup value by value (a tenth of an idle
    daemon's CPU with 3,000 streams, bench/RESULTS.md)."""
    conn = connections[DEFAULT_DB_ALIAS]
    quote, opts = conn.ops.quote_name, model._meta
    fields = [opts.get_field(name) for name in values]
    assignments = ", ".join(f"{quote(f.column)} = %s" for f in fields)
    prepared = [f.get_db_prep_save(values[f.name], connection=conn) for f in fields]
    pk = opts.pk
    ids = sorted(pk.get_db_prep_value(i, conn) for i in set(ids))
    with conn.cursor() as cursor:
        for start in range(0, len(ids), ID_CHUNK):
            chunk = ids[start : start + ID_CHUNK]
            cursor.execute(
                f"UPDATE {quote(opts.db_table)} SET {assignments} "
                f"WHERE {quote(pk.column)} IN ({', '.join(['%s'] * len(chunk))})",
                [*prepared, *chunk],
            )
