"""PostgreSQL: a second search column, `search_pairs`, holds each pair of adjacent words
of an entry as one lexeme, with a GIN index of its own, so a phrase is looked up by its
pairs (bus.rules.search.tsquery_lookup): a phrase of two words is its pair; a longer one
is checked for its words in order on the entries holding its pairs, on the words column
(`search`, migration 0017, unchanged).

Without them a phrase of common words ("is for") was asked as its words: the index gave
every entry holding both (most of a million), and each was read to check the positions.

The pairs are a column of their own, not lexemes added to `search`: in one column they
made every entry's tsvector 2.3 times larger (1,099 bytes against 473 on average at a
million entries), often compressed or moved out of the row, and read back for every
match a word or a prefix query checks or ranks; and they filled a third of the column's
statistics (the 1,000 most common lexemes ANALYZE keeps), so a rare word was guessed in
3,000 entries and planned through the rooms' index (bench/RESULTS.md, 2026-12-06). A
query without a phrase reads `search` alone, as before this migration.

A pair is one lexeme, each of its two words after a `~` (`~is~for`); the words are the
lexemes of `search` (runs of letters and digits, to_tsvector 'simple'). The pairs are
made from that tsvector itself, position by position: two lexemes are a pair exactly
when they stand at positions n and n + 1 (every lexeme at a position with every one at
the next: past the last position a tsvector keeps, 16383, all later words stand at it),
which is what the phrase operator `<->` checks, so a pair is found in every entry the
phrase check would accept (words of more than PAIR_WORD_CHARS characters make no pair; a
query never asks one). The pairs carry no positions and are never ranked.

`entry_search_pairs(content)` is the column's whole expression (a generated column may
only call IMMUTABLE functions). Adding the column writes it for every row a store holds
(the table is rewritten: at a million entries, some minutes). SQLite: nothing (FTS5
answers a phrase from its own positions).
"""

from django.db import migrations

PAIR_WORD_CHARS = 100

# One function, calling only pg_catalog's, so it answers whatever the search_path of the
# session writing a row (a restore sets an empty one).
POSTGRES_FUNCTION = f"""
CREATE OR REPLACE FUNCTION entry_search_pairs(content text) RETURNS tsvector
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
  RETURN array_to_tsvector(pairs);
END
$$
"""
POSTGRES_COLUMN = (
    "ALTER TABLE bus_entry ADD COLUMN IF NOT EXISTS search_pairs tsvector "
    "GENERATED ALWAYS AS (entry_search_pairs(content)) STORED"
)
POSTGRES_INDEX = (
    "CREATE INDEX IF NOT EXISTS entry_search_word_pairs ON bus_entry USING gin (search_pairs)"
)
POSTGRES_DROP = [
    "DROP INDEX IF EXISTS entry_search_word_pairs",
    "ALTER TABLE bus_entry DROP COLUMN IF EXISTS search_pairs",
]


# ANALYZE keeps the 10,000 most common lexemes of the words column, not 1,000: with
# 1,000, a word outside them is guessed at half the rarest one's share, and a prefix
# (`bud*`) matching 62,547 entries of a million was guessed at 1,834, so the planner
# read every match through the index, not the newest entries first (190 ms against
# 16). ANALYZE of a million entries: 10 s.
POSTGRES_STATISTICS = "ALTER TABLE bus_entry ALTER COLUMN search SET STATISTICS 1000"


def install_postgres(execute) -> None:
    """The function, the column (every row's pairs written) and its index; the words
    column's statistics, and both columns' counted (the planner weighs a pair by them:
    until they are, every pair is guessed alike)."""
    execute(POSTGRES_FUNCTION)
    execute(POSTGRES_COLUMN)
    execute(POSTGRES_INDEX)
    execute(POSTGRES_STATISTICS)
    execute("ANALYZE bus_entry")


def build(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        install_postgres(schema_editor.execute)


def unbuild(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for statement in POSTGRES_DROP:
            schema_editor.execute(statement)
        schema_editor.execute("DROP FUNCTION IF EXISTS entry_search_pairs(text)")
        schema_editor.execute("ALTER TABLE bus_entry ALTER COLUMN search SET STATISTICS -1")


class Migration(migrations.Migration):
    dependencies = [("bus", "0018_file_claims")]

    operations = [migrations.RunPython(build, unbuild, elidable=False)]
