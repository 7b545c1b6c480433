"""The full-text index over every entry (bus.services.search), built for the rows a store
already holds.

SQLite: `entry_search`, an FTS5 table over bus_entry's content and room (external
content: the text is stored once, in bus_entry; the index keys it by bus_entry's rowid),
kept by three triggers and filled here by FTS5's own `rebuild`. The room id is indexed
as a word of its own column, so a seat's rooms narrow a search inside the index, with no
look at bus_entry for the entries of other rooms. PostgreSQL: `bus_entry.search`, a
stored generated tsvector column (written by the server with each row, so nothing else
keeps it), with a GIN index.

Both cut text into words of letters and digits (bus.rules.search): FTS5's unicode61
tokenizer does by itself (diacritics kept, as on PostgreSQL); PostgreSQL gets the text
with every other run of characters replaced by a space, so its parser sees no file
names, URLs or hyphenated words to keep whole.

A later migration that remakes bus_entry on SQLite (Django copies the table, which drops
its triggers) must run `install_sqlite` again; tests/test_search.py checks the triggers
are there after every migration.
"""

from django.db import migrations

SQLITE_TABLE = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS entry_search USING fts5("
    "content, room_id, content='bus_entry', content_rowid='rowid', "
    "tokenize='unicode61 remove_diacritics 0')"
)
SQLITE_TRIGGERS = {
    "entry_search_added": (
        "AFTER INSERT ON bus_entry BEGIN "
        "INSERT INTO entry_search(rowid, content, room_id) "
        "VALUES (new.rowid, new.content, new.room_id); END"
    ),
    "entry_search_removed": (
        "AFTER DELETE ON bus_entry BEGIN INSERT INTO entry_search(entry_search, rowid, "
        "content, room_id) VALUES ('delete', old.rowid, old.content, old.room_id); END"
    ),
    # Entries are append-only; a row changed outside the bus is still found by its text.
    "entry_search_changed": (
        "AFTER UPDATE OF content, room_id ON bus_entry BEGIN INSERT INTO entry_search("
        "entry_search, rowid, content, room_id) VALUES ('delete', old.rowid, old.content, "
        "old.room_id); INSERT INTO entry_search(rowid, content, room_id) "
        "VALUES (new.rowid, new.content, new.room_id); END"
    ),
}

POSTGRES_COLUMN = (
    "ALTER TABLE bus_entry ADD COLUMN IF NOT EXISTS search tsvector GENERATED ALWAYS AS "
    "(to_tsvector('simple'::regconfig, regexp_replace(content, '[^[:alnum:]]+', ' ', 'g'))) "
    "STORED"
)
POSTGRES_INDEX = "CREATE INDEX IF NOT EXISTS entry_search_words ON bus_entry USING gin (search)"


def install_sqlite(execute) -> None:
    """The FTS5 table and its triggers, and every row indexed (idempotent)."""
    execute(SQLITE_TABLE)
    for name, body in SQLITE_TRIGGERS.items():
        execute(f"DROP TRIGGER IF EXISTS {name}")
        execute(f"CREATE TRIGGER {name} {body}")
    execute("INSERT INTO entry_search(entry_search) VALUES ('rebuild')")


def build(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        install_sqlite(schema_editor.execute)
    elif vendor == "postgresql":
        schema_editor.execute(POSTGRES_COLUMN)
        schema_editor.execute(POSTGRES_INDEX)


def unbuild(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        for name in SQLITE_TRIGGERS:
            schema_editor.execute(f"DROP TRIGGER IF EXISTS {name}")
        schema_editor.execute("DROP TABLE IF EXISTS entry_search")
    elif vendor == "postgresql":
        schema_editor.execute("DROP INDEX IF EXISTS entry_search_words")
        schema_editor.execute("ALTER TABLE bus_entry DROP COLUMN IF EXISTS search")


class Migration(migrations.Migration):
    dependencies = [("bus", "0016_request_ask")]

    operations = [migrations.RunPython(build, unbuild, elidable=False)]
