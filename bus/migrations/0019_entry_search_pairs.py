"""PostgreSQL: the search column also holds each pair of adjacent words of an entry, so a
phrase is looked up in the GIN index as its pairs (bus.rules.search.tsquery_lookup) and
only the entries holding them are checked for the words in order.

Without them a phrase of common words ("is for") was asked as its words: the index gave
every entry holding both (most of a million), and each was read to check the positions.

A pair is one lexeme, each of its two words after a `~` (`~is~for`). The column's words
are runs of letters and digits (migration 0017 replaces every other character with a
space before to_tsvector), so no word holds a `~` and no pair can be taken for a word or
for another pair; nor does a prefix (`tot*`, `"cart tot"*`) reach a pair, since none
starts with a letter or digit (a pair without positions found by a prefix inside a
phrase would make PostgreSQL's phrase check fail). The pairs are made from the tsvector
itself, position by position: two lexemes are a pair exactly when they stand at
positions n and n + 1, which is what the phrase operator `<->` checks, so a pair is
found in every entry the phrase check would accept (words of more than PAIR_WORD_CHARS
characters make no pair; a query never asks one). The pairs carry no positions and
change no ranking: ts_rank weighs only the query's own lexemes.

`entry_search_vector(content)` is the column's whole expression (a generated column may
only call IMMUTABLE functions). PostgreSQL 15 cannot change a generated column's
expression, so the column and its index are made again (the table is rewritten: at a
million entries, some minutes). SQLite: nothing (FTS5 answers a phrase from its own
positions).
"""

from django.db import migrations

PAIR_WORD_CHARS = 100

# One function, calling only pg_catalog's, so it answers whatever the search_path of the
# session writing a row (a restore sets an empty one).
POSTGRES_FUNCTION = f"""
CREATE OR REPLACE FUNCTION entry_search_vector(content text) RETURNS tsvector
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
  words tsvector := to_tsvector('simple'::regconfig,
                                regexp_replace(content, '[^[:alnum:]]+', ' ', 'g'));
  lexemes text[];
  places int[];
  pairs text[] := '{{}}';
  n int;
  i int := 1;
  j int;
  k int;
BEGIN
  SELECT array_agg(u.lexeme ORDER BY p), array_agg(p ORDER BY p) INTO lexemes, places
    FROM unnest(words) u, unnest(u.positions) p
    WHERE char_length(u.lexeme) <= {PAIR_WORD_CHARS};
  n := coalesce(array_length(lexemes, 1), 0);
  -- lexemes[i .. j - 1] stand at one position, lexemes[j .. k - 1] at the next one
  -- (more than one lexeme at a position: past the last one a tsvector keeps, 16383).
  WHILE i <= n LOOP
    j := i + 1;
    WHILE j <= n AND places[j] = places[i] LOOP
      j := j + 1;
    END LOOP;
    k := j;
    WHILE k <= n AND places[k] = places[i] + 1 LOOP
      k := k + 1;
    END LOOP;
    FOR a IN i .. j - 1 LOOP
      FOR b IN j .. k - 1 LOOP
        pairs := pairs || ('~' || lexemes[a] || '~' || lexemes[b]);
      END LOOP;
    END LOOP;
    i := j;
  END LOOP;
  RETURN words || array_to_tsvector(pairs);
END
$$
"""
POSTGRES_COLUMN = (
    "ALTER TABLE bus_entry ADD COLUMN IF NOT EXISTS search tsvector "
    "GENERATED ALWAYS AS (entry_search_vector(content)) STORED"
)
POSTGRES_INDEX = "CREATE INDEX IF NOT EXISTS entry_search_words ON bus_entry USING gin (search)"
POSTGRES_DROP = [
    "DROP INDEX IF EXISTS entry_search_words",
    "ALTER TABLE bus_entry DROP COLUMN IF EXISTS search",
]


def install_postgres(execute) -> None:
    """The function, the column (every row's pairs written) and its index."""
    execute(POSTGRES_FUNCTION)
    for statement in POSTGRES_DROP:
        execute(statement)
    execute(POSTGRES_COLUMN)
    execute(POSTGRES_INDEX)


def build(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        install_postgres(schema_editor.execute)


def unbuild(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        before = __import__("bus.migrations.0017_entry_search", fromlist=["POSTGRES_COLUMN"])
        for statement in POSTGRES_DROP:
            schema_editor.execute(statement)
        schema_editor.execute(before.POSTGRES_COLUMN)
        schema_editor.execute(before.POSTGRES_INDEX)
        schema_editor.execute("DROP FUNCTION IF EXISTS entry_search_vector(text)")


class Migration(migrations.Migration):
    dependencies = [("bus", "0018_file_claims")]

    operations = [migrations.RunPython(build, unbuild, elidable=False)]
