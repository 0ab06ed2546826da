"""The frozen corpus and its search engine: SQLite FTS5 (BM25 ranking, snippets), in memory."""

from __future__ import annotations

import gzip
import re
import sqlite3
import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import orjson

from proofgym.core.errors import SearchError as SearchError

CORPUS_PATH = Path(__file__).with_name("data") / "corpus.jsonl.gz"
#: The order fields are rendered in a document: facts that questions ask about sit past the long
#: ``Depends`` line, so they are often in the second window of ``open``.
DOC_FIELDS = ("Package", "Description", "Source", "Version", "Architecture", "Maintainer", "Depends",
              "Recommends", "Suggests", "Installed-Size", "Section", "Priority", "Homepage", "Tag")
PAGE_SIZE = 5
WINDOW = 600
MAX_QUERY_TERMS = 16
#: A query that is exactly a package name finds that package first (as a search engine boosts an
#: exact id match); the rest by BM25 (name, then description, then the whole record), then rowid.
_ORDER = "name != ?, bm25(docs, 10.0, 4.0, 1.0), rowid"
_TERM = re.compile(r"[^\W_]+")  # letters and digits, as FTS5's unicode61 tokenizer splits


@dataclass(frozen=True)
class Hit:
    rank: int
    doc_id: str
    description: str
    snippet: str


@dataclass(frozen=True)
class Page:
    query: str
    page: int
    total: int
    hits: tuple[Hit, ...]

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // PAGE_SIZE))


def render(fields: dict[str, str]) -> str:
    return "".join(f"{k}: {fields[k]}\n" for k in DOC_FIELDS if k in fields)


def fts_query(query: str) -> str:
    """The agent's words as an FTS5 query: every term required, each quoted (so FTS5 operators
    and punctuation in the query are plain text, never syntax)."""
    terms = _TERM.findall(query)[:MAX_QUERY_TERMS]
    if not terms:
        raise SearchError(f"the query {query!r} has no words to search for; give one or more terms")
    return " ".join(f'"{t}"' for t in terms)


class Corpus:
    """The documents (package records) and an FTS5 index over them.

    One connection is shared by every env of a process, behind a lock (FTS5 queries on it take
    well under a millisecond, and episodes in threads must not interleave on one connection).
    """

    def __init__(self, records: list[dict[str, str]]) -> None:
        self.fields: dict[str, dict[str, str]] = {r["Package"]: r for r in records}
        self.text: dict[str, str] = {name: render(r) for name, r in self.fields.items()}
        self.ids: list[str] = list(self.fields)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute("CREATE VIRTUAL TABLE docs USING fts5(name, description, body, "
                         "tokenize = 'unicode61 remove_diacritics 2')")
        self._db.executemany(
            "INSERT INTO docs(rowid, name, description, body) VALUES (?, ?, ?, ?)",
            [(i, name, self.fields[name].get("Description", ""), self.text[name])
             for i, name in enumerate(self.ids)])
        self._db.execute("CREATE VIRTUAL TABLE vocab USING fts5vocab(docs, 'row')")
        self._db.commit()
        self._df: dict[str, int] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def search(self, query: str, page: int = 1) -> Page:
        """Page ``page`` (from 1) of the BM25-ranked documents containing every term of ``query``
        (name matches weigh most, then the description, then the whole record)."""
        match = fts_query(query)
        offset = (page - 1) * PAGE_SIZE
        with self._lock:
            total = self._db.execute("SELECT count(*) FROM docs WHERE docs MATCH ?", (match,)).fetchone()[0]
            rows = self._db.execute(
                "SELECT rowid, snippet(docs, 2, '[', ']', '…', 10) FROM docs WHERE docs MATCH ? "
                f"ORDER BY {_ORDER} LIMIT ? OFFSET ?",
                (match, query.strip(), PAGE_SIZE, offset)).fetchall()
        hits = tuple(Hit(offset + n + 1, self.ids[rowid],
                         self.fields[self.ids[rowid]].get("Description", ""),
                         " ".join(snippet.split()))
                     for n, (rowid, snippet) in enumerate(rows))
        return Page(query, page, total, hits)

    def count(self, query: str) -> int:
        """How many documents contain every term of ``query``."""
        with self._lock:
            return self._db.execute("SELECT count(*) FROM docs WHERE docs MATCH ?",
                                    (fts_query(query),)).fetchone()[0]

    def document_frequency(self, term: str) -> int:
        """How many documents contain ``term`` (as the index tokenizes it)."""
        if self._df is None:
            with self._lock:
                self._df = dict(self._db.execute("SELECT term, doc FROM vocab").fetchall())
        return self._df.get(term.casefold(), 0)

    def ranked_ids(self, query: str, limit: int) -> list[str]:
        """The ids of the first ``limit`` results of ``query``, in the order ``search`` gives."""
        with self._lock:
            rows = self._db.execute(f"SELECT rowid FROM docs WHERE docs MATCH ? ORDER BY {_ORDER} LIMIT ?",
                                    (fts_query(query), query.strip(), limit)).fetchall()
        return [self.ids[r] for (r,) in rows]

    def window(self, doc_id: str, offset: int) -> tuple[str, int, int]:
        """``(text, start, end)``: the window of the document starting at ``offset``, at most
        ``WINDOW`` characters, ending at a line break when one falls in its second half."""
        text = self.text[doc_id]
        end = min(len(text), offset + WINDOW)
        if end < len(text):
            cut = text.rfind("\n", offset + WINDOW // 2, end)
            end = cut + 1 if cut >= 0 else end
        return text[offset:end], offset, end

    def linear_search(self, query: str) -> list[str]:
        """Every document containing all words of ``query``, by tokenizing each document's text
        (the bench's baseline: the same result set as FTS5, without an index)."""
        terms = {t.casefold() for t in _TERM.findall(query)[:MAX_QUERY_TERMS]}
        return [d for d in self.ids if terms <= set(_TERM.findall(self.text[d].casefold()))]


def load_records(path: Path = CORPUS_PATH) -> list[dict[str, str]]:
    with gzip.open(path, "rb") as f:
        return [orjson.loads(line) for line in f if line.strip()]


@cache
def corpus() -> Corpus:
    """The shipped corpus, built once per process."""
    return Corpus(load_records())


def rank_of(docs: Corpus, query: str, doc_id: str, limit: int = 100) -> int | None:
    """The 1-based rank of ``doc_id`` among the results of ``query`` (``None`` past ``limit``)."""
    ids = docs.ranked_ids(query, limit)
    return ids.index(doc_id) + 1 if doc_id in ids else None
