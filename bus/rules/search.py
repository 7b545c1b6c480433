"""Search: the query language, parsed once, and what each store is asked with it.

The language, the same in every face (`salon search`, the MCP tool, the admin's text box):

* ``word`` — every word must be in the entry (in any case);
* ``"a phrase"`` — these words, one after the other;
* ``prefix*`` — a word starting with this (``"a phr"*`` for a phrase whose last word);
* ``-word`` / ``-"a phrase"`` — leave out the entries that hold it.

No string is an error. Text is cut into words the way both stores' indexes cut entries:
a word is a run of letters and digits, anything else separates (so ``cart.py`` is the
phrase ``cart py``, and ``AND``, ``NEAR(``, ``:*`` or ``!`` are not operators but words
or nothing). A quote left open is taken as words; characters that make no word are left
out; past MAX_QUERY_CHARS characters, MAX_QUERY_TERMS terms or a word of
MAX_WORD_CHARS, the rest is left out and a note says so. A query with no word to look
for (empty, or only ``-word``) finds nothing, and a note says why.

The parsed query is rendered once per store: an FTS5 MATCH expression (`fts5_match`) and
a PostgreSQL tsquery text for ``to_tsquery('simple', …)`` (`tsquery_text`, and
`tsquery_lookup`: a phrase asked of the index as its word pairs); `relevance`
scores a match on SQLite from its hits and length. Both are
built from words of letters and digits only, each quoted, so no user text is ever read
as the store's query syntax. `snippet` finds the words again in an entry's text for the
highlighted extract every face shows.
"""

from __future__ import annotations

import itertools
import re
from collections import namedtuple

MAX_QUERY_CHARS = 1000
MAX_QUERY_TERMS = 16
MAX_WORD_CHARS = 100
SNIPPET_CHARS = 160
# How far before the first hit a snippet starts, at most.
_SNIPPET_LEAD = 50

# A word of the index: letters and digits (SQLite's unicode61 and the PostgreSQL column,
# which replaces every run of other characters with a space before to_tsvector).
_WORD = re.compile(r"[^\W_]+")
_SPACE = re.compile(r"\s+")


class Term(namedtuple("Term", "words prefix negated")):
    """One term: ``words`` (lower case; more than one is a phrase), ``prefix`` (the last
    word is a beginning), ``negated`` (entries holding it are left out)."""

    __slots__ = ()


class Query(namedtuple("Query", "terms notes")):
    """A parsed query: its terms, in order, without repeats, and the notes on what was
    left out of it (each a sentence for the person who typed it)."""

    __slots__ = ()

    @property
    def wanted(self) -> tuple[Term, ...]:
        return tuple(t for t in self.terms if not t.negated)

    @property
    def unwanted(self) -> tuple[Term, ...]:
        return tuple(t for t in self.terms if t.negated)

    @property
    def searchable(self) -> bool:
        """True when the query has a word to look for (a `-word` alone has none)."""
        return bool(self.wanted)

    def shown(self) -> str:
        """The query as it was understood, in the language itself."""
        parts = []
        for term in self.terms:
            text = " ".join(term.words)
            text = f'"{text}"' if len(term.words) > 1 else text
            parts.append(("-" if term.negated else "") + text + ("*" if term.prefix else ""))
        return " ".join(parts)


def _pieces(text: str):
    """(raw text, prefix, negated) for each term of `text`, left to right."""
    i, n = 0, len(text)
    while i < n:
        if text[i].isspace():
            i += 1
            continue
        negated = text[i] == "-" and i + 1 < n and not text[i + 1].isspace()
        if negated:
            i += 1
        if text[i] == '"':
            close = text.find('"', i + 1)
            if close >= 0:
                end = close + 1
                prefix = end < n and text[end] == "*"
                yield text[i + 1 : close], prefix, negated
                i = end + (1 if prefix else 0)
                continue
            i += 1  # a quote left open: what follows is words
            if negated:
                negated = False
        end = i
        while end < n and not text[end].isspace() and text[end] != '"':
            end += 1
        raw = text[i:end]
        yield raw.rstrip("*"), raw.endswith("*"), negated
        i = max(end, i + 1)


def parse_query(text: object) -> Query:
    """`text` as a Query. Never raises: anything that is no term is left out."""
    notes: list[str] = []
    text = text if isinstance(text, str) else ""
    if len(text) > MAX_QUERY_CHARS:
        notes.append(f"only the first {MAX_QUERY_CHARS} characters of the query were searched")
        text = text[:MAX_QUERY_CHARS]
    terms: list[Term] = []
    long_word = dropped = False
    for raw, prefix, negated in _pieces(text):
        words = tuple(w.lower() for w in _WORD.findall(raw))
        if not words:
            continue
        if any(len(w) > MAX_WORD_CHARS for w in words):
            long_word = True
            continue
        term = Term(words, prefix, negated)
        if term in terms:
            continue
        if len(terms) >= MAX_QUERY_TERMS:
            dropped = True
            continue
        terms.append(term)
    if long_word:
        notes.append(f"a word of more than {MAX_WORD_CHARS} characters was left out")
    if dropped:
        notes.append(f"only the first {MAX_QUERY_TERMS} terms of the query were searched")
    if not any(not t.negated for t in terms):
        notes.append(
            "nothing to look for: give at least one word (letters or digits); "
            "a -word only leaves entries out"
        )
    return Query(tuple(terms), tuple(notes))


def _fts5_term(term: Term) -> str:
    return '"' + " ".join(term.words) + '"' + ("*" if term.prefix else "")


def fts5_match(query: Query, rooms=None) -> str | None:
    """The FTS5 MATCH expression of `query` (None when it has nothing to look for), on
    the `content` column; with `rooms` (room ids), only entries of those rooms (the
    index's `room_id` column holds each entry's room id as a word)."""
    if not query.searchable:
        return None
    wanted = " AND ".join(_fts5_term(t) for t in query.wanted)
    if query.unwanted:
        wanted = f"({wanted}) NOT ({' OR '.join(_fts5_term(t) for t in query.unwanted)})"
    match = f"{{content}} : ({wanted})"
    if rooms is not None:
        match += " AND {room_id} : (" + " OR ".join(f'"{int(r)}"' for r in rooms) + ")"
    return match


def relevance(hits: int, length: int, mean_length: float) -> float:
    """How well an entry matches: BM25's term-frequency part (k1 = 1.2, b = 0.75) over
    the number of places the query's words were found (`hits`) in an entry of `length`
    characters, against the `mean_length` of the entries ranked with it."""
    norm = 0.25 + 0.75 * (length / mean_length if mean_length > 0 else 1.0)
    return hits * 2.2 / (hits + 1.2 * norm) if hits > 0 else 0.0


def _tsquery_term(term: Term) -> str:
    last = len(term.words) - 1
    words = [
        f"'{w}'" + (":*" if term.prefix and i == last else "") for i, w in enumerate(term.words)
    ]
    return "(" + " <-> ".join(words) + ")"


def tsquery_text(query: Query) -> str | None:
    """The text for PostgreSQL's ``to_tsquery('simple', …)`` (None: nothing to look for)."""
    if not query.searchable:
        return None
    parts = [_tsquery_term(t) for t in query.wanted]
    parts += ["!" + _tsquery_term(t) for t in query.unwanted]
    return " & ".join(parts)


# A word PostgreSQL's parser keeps whole, as itself: ASCII letters and digits starting
# with a letter, or digits alone (a run like `1e10abc` it cuts into `1e10` and `abc`).
_WHOLE_WORD = re.compile(r"[a-z][a-z0-9]*|[0-9]+")
# Before each word of a pair lexeme, `~is~for` (migration 0019_entry_search_pairs).
PAIR_JOIN = "~"


def _pairs(term: Term) -> list[str]:
    """The pair lexemes of a phrase: each two adjacent words both kept whole by the
    parser (so each is one lexeme, itself, in the entries), the last word left out when
    it is a prefix."""
    words = term.words[:-1] if term.prefix else term.words
    return [
        PAIR_JOIN + a + PAIR_JOIN + b
        for a, b in itertools.pairwise(words)
        if _WHOLE_WORD.fullmatch(a) and _WHOLE_WORD.fullmatch(b)
    ]


def tsquery_lookup(query: Query) -> tuple[str, str | None, bool] | None:
    """PostgreSQL: what the index is asked when a phrase can be looked up by its word
    pairs (None: no phrase can; ask `tsquery_text` alone).

    Returns (the text for ``…::tsquery`` of the pair lexemes, all AND-ed, asked of the
    pairs column: not normalised, as the column writes them; the text for
    ``to_tsquery('simple', …)`` of the query's other terms, wanted and left out, asked
    of the words column, or None; whether the two are the whole query). They are when
    every phrase asked by its pairs is of two words, its pair being the phrase itself
    (the pairs are made from the words' positions). A longer phrase, or one ending in a
    prefix, is found in entries holding its pairs in another order too, so the whole
    query (`tsquery_text`) is still to be checked on the entries found."""
    if not query.searchable:
        return None
    pairs: list[str] = []
    others: list[Term] = []
    exact = True
    for term in query.wanted:
        found = _pairs(term)
        if found:
            pairs += [p for p in found if p not in pairs]
            exact = exact and len(term.words) == 2 and not term.prefix and len(found) == 1
        else:
            others.append(term)
    if not pairs:
        return None
    rest = [_tsquery_term(t) for t in others] + ["!" + _tsquery_term(t) for t in query.unwanted]
    return " & ".join(f"'{p}'" for p in pairs), " & ".join(rest) or None, exact


def _hits_pattern(query: Query) -> re.Pattern | None:
    """One expression for every word the query looks for, as whole words of letters and
    digits (a prefix: the start of one), in any case."""
    words = {w for t in query.wanted for w in (t.words[:-1] if t.prefix else t.words)}
    alternatives = sorted((re.escape(w) for w in words), key=len, reverse=True)
    alternatives += [re.escape(t.words[-1]) + r"[^\W_]*" for t in query.wanted if t.prefix]
    if not alternatives:
        return None
    return re.compile(r"(?<![^\W_])(?:" + "|".join(alternatives) + r")(?![^\W_])", re.IGNORECASE)


def snippet(content: str, query: Query, width: int = SNIPPET_CHARS) -> tuple[str, list]:
    """A one-line extract of `content` of about `width` characters around the first word
    the query looks for, and the [start, end) offsets of each such word in it.

    Whitespace is folded to single spaces; `…` marks text cut off at either end. The
    extract is plain text: each face escapes it and marks the hits its own way."""
    pattern = _hits_pattern(query)
    found = pattern.search(content) if pattern else None
    first = found.start() if found else None
    start = 0 if first is None or first <= _SNIPPET_LEAD else first - _SNIPPET_LEAD
    if len(content) <= width:
        start = 0  # the whole text fits
    if start:
        space = content.find(" ", start, first)
        start = space + 1 if space >= 0 else start
    window = content[start : start + width * 2]  # folded whitespace takes less room
    pieces: list[tuple[str, bool]] = []
    at = 0
    for match in pattern.finditer(window) if pattern else ():
        pieces += [(window[at : match.start()], False), (match.group(), True)]
        at = match.end()
    pieces.append((window[at:], False))
    text, hits = ("…" if start else ""), []
    for number, (piece, is_hit) in enumerate(pieces):
        piece = _SPACE.sub(" ", piece)
        if number == 0 and not start:
            piece = piece.lstrip()
        if len(text) + len(piece) > width:
            if not is_hit:
                text += piece[: max(0, width - len(text))]
            break
        if is_hit:
            hits.append([len(text), len(text) + len(piece)])
        text += piece
    else:
        piece = None
    if start + len(window) < len(content) or piece is not None:
        text = text.rstrip() + "…"
    return text.rstrip(), hits


def marked(text: str, hits: list, before: str, after: str, escape=lambda s: s) -> str:
    """`text` with each hit between `before` and `after`, every piece through `escape`."""
    out, at = [], 0
    for start, end in hits:
        out += [escape(text[at:start]), before, escape(text[start:end]), after]
        at = end
    out.append(escape(text[at:]))
    return "".join(out)
