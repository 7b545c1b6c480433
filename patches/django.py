"""Django: lookups and inserts of one fixed shape, their SQL compiled by the ORM once per
database connection, then run with new keys or rows.

Django compiles a queryset's SQL every time it runs. For the lookups every request or
every claim makes (an MCP session with its seat and agent; the entries a claim pushes,
with their room) the compilation was most of their CPU. A CompiledLookup asks the ORM for
the SQL once per connection (Django has one per thread) and per number of keys, runs it
with the new keys, and turns each row into its models with the ORM's own converters and
from_db, each related object cached on its parent as select_related caches it. A
CompiledInsert does the same for the rows a send writes (the entry, its wake rows, its
decision counts): the INSERT is the ORM's, written once per connection and row count,
and each row's values are the ORM's own (pre_save, then get_db_prep_save, by the
compiler's methods). The ORM stays the one author of the SQL and of the values.

Measured (bench/RESULTS.md): load_session (every MCP request; 10 % of a send's samples)
0.64 -> 0.09-0.12 ms of CPU, the claim's entry read likewise; send_entry alone with 100
receivers 2.56 -> 2.23 ms of CPU; a broadcast QUESTION to 1,000 live readers 198-221 ->
89-109 ms of CPU in process.

Reached into: django.db.models.sql.InsertQuery, a query's compiler (as_sql, select,
prepare_value, pre_save_val) and a foreign key's set_cached_value. Each compiled shape
checks that its parameters are the keys, or the rows' values, in order, and a shape that
does not hold keeps the ORM's own path.
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Iterable
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, models
from django.db.models import Model
from django.db.models.sql import InsertQuery

WRITTEN_FOR = {"django": ("5.2", "6.1")}

# Key counts compiled per connection (a lookup with more keys runs through the ORM), and
# rows per compiled INSERT (more are written in several).
MAX_SHAPES = 32


class CompiledLookup:
    """`model` rows whose `key` field is one of the keys given, with the chain of foreign
    keys `related` (as select_related("a__b"); "" for none) and the fixed `filters`."""

    def __init__(self, model: type[Model], key: str, related: str = "", **filters: Any) -> None:
        self.model, self.key, self.related, self.filters = model, key, related, filters
        self.chain: list[tuple[type[Model], Any]] = [(model, None)]  # (model, its FK field)
        for name in related.split("__") if related else ():
            field = self.chain[-1][0]._meta.get_field(name)
            self.chain.append((field.related_model, field))
        self._compiled: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def queryset(self, keys: Iterable):
        query = self.model.objects.filter(**{f"{self.key}__in": list(keys)}, **self.filters)
        return query.select_related(self.related) if self.related else query

    def fetch(self, keys: Iterable) -> list[Model]:
        keys = list(dict.fromkeys(keys))
        if not keys:
            return []
        if len(keys) > MAX_SHAPES:
            return list(self.queryset(keys))
        conn = connections[DEFAULT_DB_ALIAS]
        shapes = self._compiled.setdefault(conn, {})
        shape = shapes.get(len(keys))
        if shape is None:
            shape = shapes[len(keys)] = _Shape(self, conn, len(keys))
        return shape.run(keys)


class _Shape:
    """One lookup's SQL for one number of keys on one connection, and its row reader."""

    def __init__(self, lookup: CompiledLookup, conn, count: int) -> None:
        key_field = lookup.model._meta.get_field(lookup.key)
        samples = [_sample(key_field, n) for n in range(count)]
        compiler = lookup.queryset(samples).query.get_compiler(connection=conn)
        self.sql, params = compiler.as_sql()
        expected = [_prep(key_field, sample, conn) for sample in samples]
        if list(params) != expected:  # the keys must be the only parameters, in order
            raise RuntimeError(f"unexpected parameters in {lookup.model.__name__}'s lookup")
        self.conn, self.key_field = conn, key_field
        self.models = []  # (model, its FK field, [(column, converters)]) in SELECT order
        selected = [column.target for column, _, _ in compiler.select]
        start = 0
        for model, link in lookup.chain:
            fields = list(model._meta.concrete_fields)
            if selected[start : start + len(fields)] != fields:
                raise RuntimeError(f"unexpected columns in {lookup.model.__name__}'s lookup")
            start += len(fields)
            columns = []
            for field in fields:
                column = field.get_col(model._meta.db_table)
                converters = conn.ops.get_db_converters(column) + field.get_db_converters(conn)
                columns.append((column, converters))
            self.models.append((model, link, columns))

    def run(self, keys: list) -> list[Model]:
        with self.conn.cursor() as cursor:
            cursor.execute(self.sql, [_prep(self.key_field, key, self.conn) for key in keys])
            rows = cursor.fetchall()
        return [self._objects(row) for row in rows]

    def _objects(self, row) -> Model:
        start, parent, first = 0, None, None
        for model, link, columns in self.models:
            values = row[start : start + len(columns)]
            start += len(columns)
            obj = None
            if values[0] is not None or link is None:  # a LEFT JOIN's empty side is None
                converted = []
                for value, (column, converters) in zip(values, columns, strict=True):
                    for convert in converters:
                        value = convert(value, column, self.conn)
                    converted.append(value)
                obj = model.from_db(DEFAULT_DB_ALIAS, None, converted)
            if link is None:
                first = obj
            else:
                link.set_cached_value(parent, obj)
            if obj is None:
                break  # nothing hangs off a missing object
            parent = obj
        return first


def _sample(field, n: int):
    """A distinct key value of the field's type, for compiling (the ORM drops repeats)."""
    if field.get_internal_type() == "UUIDField":
        return uuid.UUID(int=n + 1)
    if field.get_internal_type() in ("AutoField", "BigAutoField", "IntegerField"):
        return n + 1
    return f"sample-{n}"


def _prep(field, value, conn):
    return field.get_db_prep_value(value, conn, prepared=False)


class CompiledInsert:
    """INSERTs of `model` rows. A model whose primary key the database assigns has it
    left out (as bulk_create leaves it out) and not read back: the rows' pk stays None."""

    def __init__(self, model: type[Model]) -> None:
        self.model = model
        opts = model._meta
        self.fields = [
            f for f in opts.local_concrete_fields if not (f.primary_key and f.db_returning)
        ]
        self._compiled: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def insert(self, objs: list[Model]) -> None:
        """The rows in statements of at most MAX_SHAPES rows each (a broadcast's wake rows:
        one per reader), in order."""
        conn = connections[DEFAULT_DB_ALIAS]
        shapes = self._compiled.setdefault(conn, {})
        for start in range(0, len(objs), MAX_SHAPES):
            chunk = objs[start : start + MAX_SHAPES]
            shape = shapes.get(len(chunk))
            if shape is None:
                shape = shapes[len(chunk)] = _InsertShape.compile(self, conn, chunk)
            if not shape:
                # A statement not of one row's values each (PostgreSQL's several rows):
                # the ORM writes what is left, in as few statements as it can.
                self.model.objects.bulk_create(objs[start:])
                return
            shape.run(chunk)
            for obj in chunk:
                obj._state.adding, obj._state.db = False, DEFAULT_DB_ALIAS


# Values the ORM may write unchanged, by column type: for a column whose type is here and
# whose preparation on this connection gives such a value back as it is (checked once, when
# the shape is compiled: PostgreSQL wraps a big integer, for one), params() takes the
# value as it is, without the ORM's chain of calls (most of preparing a send's INSERT). Any
# other value, and every other column, goes through the ORM.
_SAMPLES = {
    "CharField": "sample",
    "TextField": "sample",
    "BooleanField": True,
    "IntegerField": 12345,
    "BigIntegerField": 12345,
    "PositiveIntegerField": 12345,
    "PositiveSmallIntegerField": 123,
    "SmallIntegerField": 123,
}


def _written_as_is(field, conn) -> type | None:
    """The exact type of value this field writes unchanged on this connection, or None."""
    sample = _SAMPLES.get(field.get_internal_type())
    if sample is None or type(field).pre_save is not models.Field.pre_save:
        return None  # a pre_save of its own (auto_now_add) keeps the ORM's path
    prepared = field.get_db_prep_save(sample, connection=conn)
    return type(sample) if type(prepared) is type(sample) and prepared == sample else None


class _InsertShape:
    def __init__(self, conn, compiler, fields, sql: str) -> None:
        self.conn, self.compiler, self.fields, self.sql = conn, compiler, fields, sql
        self.columns = [(f.attname, _written_as_is(f, conn)) for f in fields]

    @classmethod
    def compile(cls, insert: CompiledInsert, conn, objs: list[Model]) -> _InsertShape | bool:
        """The ORM's statement for these rows; False when its parameters are not each
        row's values in order (a backend that lays them out otherwise keeps the ORM)."""
        query = InsertQuery(insert.model)
        query.insert_values(insert.fields, objs, raw=False)
        compiler = query.get_compiler(connection=conn)
        statements = compiler.as_sql()
        shape = cls(conn, compiler, insert.fields, statements[0][0])
        if len(statements) != 1 or list(statements[0][1]) != shape.params(objs):
            return False
        return shape

    def params(self, objs: list[Model]) -> list:
        prepare, pre_save = self.compiler.prepare_value, self.compiler.pre_save_val
        values = []
        for obj in objs:
            for field, (attname, as_is) in zip(self.fields, self.columns, strict=True):
                if as_is is not None:
                    value = getattr(obj, attname)
                    if value is None or type(value) is as_is:
                        values.append(value)
                        continue
                values.append(prepare(field, pre_save(field, obj)))
        return values

    def run(self, objs: list[Model]) -> None:
        with self.conn.cursor() as cursor:
            cursor.execute(self.sql, self.params(objs))
