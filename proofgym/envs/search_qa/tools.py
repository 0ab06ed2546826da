"""The agent's tools over the shared corpus, with faults: ``search``, ``open``,
``find_in_document`` and ``wait``.

Faults are reported the way a remote API reports them: a typed error (``timeout``,
``rate_limited`` with a retry-after, ``server_error``, ``not_found`` for a stale index entry) or
a page that says it was cut short. Each error message starts with its kind.
"""

from __future__ import annotations

from typing import Any

from proofgym.envs.search_qa.corpus import PAGE_SIZE, Page, SearchError, corpus
from proofgym.envs.search_qa.faults import FaultProfile, draw
from proofgym.tools import Tool, ToolContext, ToolError

MAX_PAGE = 200
MAX_WAIT_S = 60.0


def _fault(state: dict[str, Any], tool: str) -> str | None:
    kind = draw(state, tool)
    state["log"].append([state["calls"] - 1, tool, kind])
    profile = FaultProfile(**state["profile"])
    if kind == "timeout":
        raise ToolError(f"timeout: {tool} did not answer within its {2.0:g} s budget; retry the call",
                        "timeout")
    if kind == "rate_limited":
        left = max(state["blocked_until"] - state["clock"], 0.5)
        raise ToolError(f"rate_limited: too many requests; retry after {left:g} s "
                        f"(call wait(seconds={left:g}) first). Limit window: {profile.retry_after_s:g} s",
                        "rate_limited")
    if kind == "server_error":
        raise ToolError(f"server_error: 503 Service Unavailable from the {tool} service "
                        "(transient); retry the call", "server_error")
    return kind


def format_page(page: Page, shown: int | None = None) -> str:
    hits = page.hits if shown is None else page.hits[:shown]
    if page.total == 0:
        return f'No documents match "{page.query}". Try fewer or different words.'
    if not page.hits:
        return (f'Page {page.page} is past the end: "{page.query}" has {page.total} results '
                f"on {page.pages} pages.")
    first, last = page.hits[0].rank, page.hits[-1].rank
    lines = [f'Results {first}-{last} of {page.total} for "{page.query}" '
             f"(page {page.page} of {page.pages}):"]
    for h in hits:
        lines.append(f"{h.rank}. [{h.doc_id}] {h.description}")
        lines.append(f"   {h.snippet}")
    if shown is not None:
        lines.append(f"[truncated response: {len(hits)} of {len(page.hits)} results of this page "
                     "were delivered; repeat the request for the full page]")
    if page.page < page.pages:
        lines.append(f"More results: search(query=..., page={page.page + 1})")
    return "\n".join(lines)


def search(query: str, ctx: ToolContext, page: int = 1) -> str:
    """Search the Debian package index. Results are ranked, 5 per page, each with its document id
    in brackets, its one-line description and a snippet. Every word of the query must occur.

    Args:
        query: Words to look for (package names, description words, field values).
        page: Which page of results, from 1.
    """
    if not 1 <= page <= MAX_PAGE:
        raise ToolError(f"page must be between 1 and {MAX_PAGE}, got {page}", "invalid_arguments")
    state = ctx.state
    kind = _fault(state, "search")
    try:
        result = corpus().search(query, page)
    except SearchError as exc:
        raise ToolError(str(exc), "invalid_arguments") from None
    state["stale_doc"] = None  # a fresh search sees the current index
    if kind == "truncated" and result.hits:
        return format_page(result, shown=len(result.hits) // 2)
    return format_page(result)


def open_document(doc_id: str, ctx: ToolContext, offset: int = 0) -> str:
    """Read a document of the index in windows of at most 600 characters.

    Args:
        doc_id: The document id shown in brackets in search results (a package name).
        offset: Character offset to start reading at (each window says where the next starts).
    """
    docs = corpus()
    if doc_id not in docs.text:
        raise ToolError(f"not_found: no document {doc_id!r}; use an id from search results", "not_found")
    size = len(docs.text[doc_id])
    if not 0 <= offset < size:
        raise ToolError(f"offset must be between 0 and {size - 1} for {doc_id!r}, got {offset}",
                        "invalid_arguments")
    state = ctx.state
    kind = _fault(state, "open")
    if kind is None and state["stale_doc"] == doc_id:
        kind = state["log"][-1][2] = "stale"  # still stale: nothing refreshed the index entry
    if kind == "stale":
        state["stale_doc"] = doc_id
        raise ToolError(f"not_found: the index entry for {doc_id!r} is stale (the document was moved "
                        "after indexing); search again to refresh it, then open it", "not_found")
    text, start, end = docs.window(doc_id, offset)
    tail = (f"[more: open(doc_id={doc_id!r}, offset={end})]" if end < size else "[end of document]")
    return f"Document {doc_id} (characters {start}-{end} of {size}):\n{text}{tail}"


def find_in_document(doc_id: str, pattern: str, ctx: ToolContext) -> str:
    """List the lines of a document that contain some text (case-insensitive), with the offset
    each starts at, to jump there with open.

    Args:
        doc_id: The document id shown in brackets in search results (a package name).
        pattern: Plain text to look for (not a regular expression), at most 100 characters.
    """
    docs = corpus()
    if doc_id not in docs.text:
        raise ToolError(f"not_found: no document {doc_id!r}; use an id from search results", "not_found")
    if not 0 < len(pattern) <= 100:
        raise ToolError("pattern must be 1 to 100 characters of plain text", "invalid_arguments")
    _fault(ctx.state, "find_in_document")
    text, needle = docs.text[doc_id], pattern.casefold()
    found, offset = [], 0
    for line in text.splitlines(keepends=True):
        if needle in line.casefold():
            found.append(f"offset {offset}: {line.rstrip()}")
        offset += len(line)
    if not found:
        return f"{pattern!r} does not occur in {doc_id} ({len(text)} characters)."
    return f"{len(found)} line(s) of {doc_id} contain {pattern!r}:\n" + "\n".join(found)


def wait(seconds: float, ctx: ToolContext) -> str:
    """Wait before the next call (what a rate limit's retry-after asks for).

    Args:
        seconds: How long to wait, at most 60.
    """
    if not 0 < seconds <= MAX_WAIT_S:
        raise ToolError(f"seconds must be in (0, {MAX_WAIT_S:g}], got {seconds}", "invalid_arguments")
    ctx.state["clock"] += seconds
    ctx.state["log"].append([None, "wait", None])
    return f"waited {seconds:g} s"


SEARCH = Tool(search, name="search")
OPEN = Tool(open_document, name="open")
FIND = Tool(find_in_document, name="find_in_document")
WAIT = Tool(wait, name="wait")
TOOLS = (SEARCH, OPEN, FIND, WAIT)

__all__ = ["FIND", "OPEN", "PAGE_SIZE", "SEARCH", "TOOLS", "WAIT", "format_page"]
