"""Questions generated from the corpus's structured facts, at five levels of difficulty.

1. A field of a package named in the question (search, open).
2. The name of the package with a given description (search, read past page 1 when needed).
3. A field of the package with a given description (search, open).
4. A field of the first dependency of a named package (two documents).
5. A field of the first dependency of a described package (two documents, found by description).

Answers are graded by normalised exact match against the fact and its other spellings.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Any

from proofgym.core import (
    ActionScript,
    AgentAction,
    Task,
    TaskSpec,
    ToolCallAction,
    Trace,
    TurnCompleteAction,
    Verdict,
)
from proofgym.core.errors import ReferenceSolutionError
from proofgym.envs.search_qa.build_corpus import first_dependency
from proofgym.envs.search_qa.corpus import PAGE_SIZE, Corpus, rank_of
from proofgym.verify import HedgedAnswer, extract_final_answer, normalize_text

LEVELS = (1, 2, 3, 4, 5)
FIELDS = ("Version", "Installed-Size", "Maintainer", "Section", "Homepage")
_FIELD_TEXT = {"Version": "version", "Installed-Size": "installed size (in KiB)",
               "Maintainer": "maintainer", "Section": "archive section", "Homepage": "homepage URL"}
_GUESSES = {"Version": ("1.0-1", "2.0-1"), "Installed-Size": ("100", "200"),
            "Maintainer": ("Debian QA Group <packages@qa.debian.org>", "Debian Python Team"),
            "Section": ("utils", "misc"), "Homepage": ("https://www.debian.org/", "https://example.org/"),
            None: ("debian-archive-keyring", "base-files")}
INSTRUCTIONS = ("Use the tools (search, open, find_in_document, wait) to find the answer in the "
                "Debian package index (the tools are a remote service: calls can time out, be "
                "rate-limited or fail, and should be retried). End your reply with a line "
                "'Answer: ...' giving only the answer.")
_HIT = re.compile(r"^\d+\. \[([^\]]+)\] (.*)$", re.MULTILINE)
_RETRY_AFTER = re.compile(r"retry after ([0-9.]+) s")


def aliases(field: str | None, value: str) -> tuple[str, ...]:
    """The spellings of a fact that count as correct."""
    out = [value]
    if field == "Version" and re.match(r"^\d+:", value):
        out.append(value.split(":", 1)[1])
    elif field == "Installed-Size":
        out += [f"{value} KiB", f"{value} kB", f"{value} KB"]
    elif field == "Maintainer":
        m = re.match(r"^(.*?)\s*<([^>]+)>$", value)
        if m:
            out += [m.group(1), m.group(2)]
    elif field == "Homepage":
        out.append(value.rstrip("/") if value.endswith("/") else value + "/")
    return tuple(dict.fromkeys(out))


@dataclass(frozen=True)
class Plan:
    """How the reference solution finds the answer: the search that finds the first document
    (matched by id or by its exact description), whether to follow its first dependency, and
    which field to read (``None``: the answer is the document's id)."""

    query: str
    target: str | None
    description: str | None
    follow_dependency: bool
    field: str | None


@dataclass(frozen=True)
class SearchQATask(Task):
    task_id: str
    level: int
    question: str
    answer: str
    accepted: tuple[str, ...]
    plan: Plan
    gold_docs: tuple[str, ...]
    wrong_answers: tuple[tuple[str, str], ...]  # (control name, answer), each not accepted

    verifier_version = "searchqa-1"

    @property
    def id(self) -> str:
        return self.task_id

    def get_spec(self) -> TaskSpec:
        return TaskSpec(f"{self.question}\n\n{INSTRUCTIONS}", metadata={"level": self.level})

    def is_correct(self, candidate: str) -> bool:
        return normalize_text(candidate) in {normalize_text(a) for a in self.accepted}

    def verify(self, trace: Trace, runtime: Any) -> Verdict:
        metrics = episode_metrics(trace, runtime, self.gold_docs[0])
        message = trace.final_message()
        try:
            candidate = extract_final_answer(message) if message else None
        except HedgedAnswer:
            return Verdict(0.0, {"correct": 0.0}, {**metrics, "answered": 1.0, "hedged": 1.0})
        correct = float(candidate is not None and self.is_correct(candidate))
        return Verdict(correct, {"correct": correct},
                       {**metrics, "answered": float(candidate is not None), "hedged": 0.0})

    def reference_solution(self) -> ActionScript:
        return _reference(self.plan)

    def controls(self) -> Mapping[str, ActionScript]:
        out: dict[str, ActionScript] = {}
        for name, wrong in self.wrong_answers:
            if name == "first_snippet":  # searched, then trusted the top hit of page 1
                out[name] = [ToolCallAction("search", {"query": self.plan.query}),
                             TurnCompleteAction(f"Answer: {wrong}")]
            else:
                out[name] = [TurnCompleteAction(f"Answer: {wrong}")]
        guess = dict(self.wrong_answers)["guess"]
        out["hedge"] = [TurnCompleteAction(f"It is \\boxed{{{guess}}} or \\boxed{{{self.answer}}}.")]
        out["empty"] = [TurnCompleteAction("")]
        return out

    def content(self) -> Mapping[str, Any]:
        return {"id": self.task_id, "level": self.level, "question": self.question,
                "answer": self.answer, "accepted": list(self.accepted),
                "instructions": INSTRUCTIONS}


# ---------------------------------------------------------------- the reference solution
Step = Generator[AgentAction, Mapping[str, Any], Any]


def _call(tool: str, args: dict[str, Any]) -> Step:
    """Make a call until it succeeds: wait out rate limits, retry timeouts, server errors and
    truncated pages. Returns the observation text, or ``None`` for a stale index entry."""
    while True:
        obs = yield ToolCallAction(tool, args)
        text = str(obs.get("observation", ""))
        # errors are told by their leading kind, as a model reads them (a chat transcript keeps
        # the text of a tool message, not the observation's type)
        kind = text.split(":", 1)[0] if obs.get("type") != "turn_transition" else ""
        if kind == "rate_limited":
            m = _RETRY_AFTER.search(text)
            yield ToolCallAction("wait", {"seconds": float(m.group(1)) if m else 2.0})
            continue
        if kind in ("timeout", "server_error"):
            continue
        if kind == "not_found" and "stale" in text:
            return None
        if obs.get("type") == "tool_error" or kind in ("not_found", "invalid_arguments"):
            raise ReferenceSolutionError(f"reference solution: unexpected error from {tool}: {text[:200]}")
        if "[truncated response" in text:
            continue
        return text


def _find(query: str, target: str | None, description: str | None) -> Step:
    """Page through the results of ``query`` until the wanted hit shows up; its doc id."""
    page = 1
    while True:
        text = yield from _call("search", {"query": query, "page": page})
        for doc_id, desc in _HIT.findall(text):
            if doc_id == target or (description is not None and desc == description):
                return doc_id
        if "More results:" not in text:
            raise ReferenceSolutionError(f"reference solution: {target or description!r} not in the results "
                                         f"of {query!r}")
        page += 1


def _read(doc_id: str) -> Step:
    """The whole document, window by window; a stale entry is refreshed by searching again."""
    parts: list[str] = []
    offset = 0
    while True:
        text = yield from _call("open", {"doc_id": doc_id, "offset": offset})
        if text is None:  # any successful search refreshes the index; then open it again
            yield from _call("search", {"query": doc_id})
            continue
        body = text.split("\n", 1)[1]
        more = re.search(r"\[more: open\(doc_id=.*, offset=(\d+)\)\]$", body)
        parts.append(body[:more.start()] if more else body.removesuffix("[end of document]"))
        if not more:
            return "".join(parts)
        offset = int(more.group(1))


def field_of(text: str, field: str) -> str:
    m = re.search(rf"^{re.escape(field)}: (.*)$", text, re.MULTILINE)
    if not m:
        raise ReferenceSolutionError(f"reference solution: no {field} field in the document")
    return m.group(1)


def _reference(plan: Plan) -> Step:
    doc_id = yield from _find(plan.query, plan.target, plan.description)
    if plan.follow_dependency:
        doc_id = first_dependency(field_of((yield from _read(doc_id)), "Depends"))  # an id: open it
    answer = doc_id if plan.field is None else field_of((yield from _read(doc_id)), plan.field)
    yield TurnCompleteAction(f"I found it in document {doc_id}.\nAnswer: {answer}")


# ---------------------------------------------------------------- metrics
def episode_metrics(trace: Trace, runtime: Any, first_doc: str) -> dict[str, float]:
    """Searches, result pages and document windows read, faults met and recovered from, and the
    results page on which the first document needed was first seen (0: never)."""
    state = getattr(runtime, "state", None) or {}
    log = [entry for entry in state.get("log", []) if entry[0] is not None]
    faults = [(i, e[1]) for i, e in enumerate(log) if e[2] is not None]
    recovered = sum(any(e[1] == tool and e[2] is None for e in log[i + 1:]) for i, tool in faults)
    searches = pages = windows = 0
    answer_page = 0
    for step in trace:
        action = step.action
        if not isinstance(action, ToolCallAction):
            continue
        ok = step.observation_type == "tool_output"
        if action.tool_name == "search":
            searches += 1
            if ok and "[truncated response" not in str(step.observation.get("observation", "")):
                pages += 1
                if not answer_page and f"[{first_doc}]" in str(step.observation.get("observation")):
                    answer_page = int(action.tool_input.get("page", 1)) if isinstance(
                        action.tool_input, Mapping) else 1
        elif action.tool_name == "open" and ok:
            windows += 1
    metrics = {"searches": float(searches), "pages_read": float(pages), "windows_read": float(windows),
               "faults_met": float(len(faults)), "faults_recovered": float(recovered),
               "answer_page": float(answer_page),
               "found_after_first_page": float(answer_page > 1)}
    for kind in ("timeout", "rate_limited", "server_error", "truncated", "stale"):
        metrics[f"fault_{kind}"] = float(sum(e[2] == kind for e in log))
    return metrics


# ---------------------------------------------------------------- generation
def _order(name: str, seed: int) -> str:
    return hashlib.sha256(f"searchqa:{seed}:{name}".encode()).hexdigest()


#: Broad queries are kept when the wanted package is within this many results (ten pages).
MAX_RANK = 50
#: Words in more documents than this (``for``, ``the``) make poor queries and slow counts.
MAX_TERM_DF = 1500


def broad_query(docs: Corpus, description: str) -> str | None:
    """The most common words of ``description`` (as few as possible) whose search gives at most
    ``MAX_RANK`` results: a query that finds the package among others, often past page 1."""
    words = sorted(dict.fromkeys(w.casefold() for w in re.findall(r"\w+", description)),
                   key=lambda w: (-docs.document_frequency(w), w))
    words = [w for w in words if 1 < docs.document_frequency(w) <= MAX_TERM_DF]
    for k in range(2, min(len(words), 4) + 1):
        query = " ".join(words[:k])
        if PAGE_SIZE < docs.count(query) <= MAX_RANK:
            return query
    return None


def _words(text: str) -> int:
    return len(re.findall(r"\w+", text))


def generate(docs: Corpus, n_per_level: int = 120, *, seed: int = 0) -> list[SearchQATask]:
    """``n_per_level`` tasks of each level, a pure function of the corpus and ``seed``."""
    names = sorted(docs.ids, key=lambda n: _order(n, seed))
    desc_count: dict[str, int] = {}
    for f in docs.fields.values():
        desc_count[f.get("Description", "")] = desc_count.get(f.get("Description", ""), 0) + 1

    def dep_of(name: str) -> str | None:
        dep = first_dependency(docs.fields[name].get("Depends", ""))
        return dep if dep in docs.fields and dep != name else None

    def described(name: str) -> bool:
        d = docs.fields[name].get("Description", "")
        return desc_count[d] == 1 and 3 <= _words(d) <= 12 and "[" not in d

    tasks: list[SearchQATask] = []
    for level in LEVELS:
        made: list[tuple[str, Plan, str, str | None]] = []  # (question, plan, first doc, field)
        start = (level - 1) * len(names) // len(LEVELS)  # each level starts elsewhere in the order
        for i, name in enumerate(names[start:] + names[:start]):
            if len(made) >= n_per_level:
                break
            field = None if level == 2 else FIELDS[(i + level) % len(FIELDS)]
            source = dep_of(name) if level in (4, 5) else name
            if source is None or (field is not None and field not in docs.fields[source]):
                continue
            desc = docs.fields[name].get("Description", "")
            if level in (2, 3, 5):
                if not described(name):
                    continue
                query = broad_query(docs, desc)
                if query is None or rank_of(docs, query, name, limit=MAX_RANK) is None:
                    continue
                plan = Plan(query, None, desc, level == 5, field)
                who = (f'the package that the search "{query}" finds with the one-line description '
                       f'"{desc}"')
            else:
                plan = Plan(name, name, None, level == 4, field)
                who = f"the package {name!r}"
            if level == 2:
                question = f"In the Debian package index, what is the name of {who}?"
            elif level in (1, 3):
                question = f"In the Debian package index, what is the {_FIELD_TEXT[field]} of {who}?"
            else:
                question = (f"In the Debian package index, take {who} and the first package named in "
                            f"its Depends field. What is the {_FIELD_TEXT[field]} of that dependency?")
            made.append((question, plan, name, field))
        tasks += _finish(docs, level, made, seed)
    return tasks


def _finish(docs: Corpus, level: int, made: list[tuple[str, Plan, str, str | None]],
            seed: int) -> list[SearchQATask]:
    out: list[SearchQATask] = []
    answers = []
    for _, plan, first, field in made:
        source = (first_dependency(docs.fields[first]["Depends"]) if plan.follow_dependency else first)
        answers.append((source, field, source if field is None else docs.fields[source][field]))
    for i, ((question, plan, first, field), (_, _, answer)) in enumerate(zip(made, answers, strict=True)):
        accepted = aliases(field, answer)
        ok = {normalize_text(a) for a in accepted}
        wrong: list[tuple[str, str]] = []
        guess = next(g for g in _GUESSES[field] if normalize_text(g) not in ok)
        wrong.append(("guess", guess))
        for j in range(1, len(answers)):  # the answer of the nearest other question like it
            other = answers[(i + j) % len(answers)]
            if other[1] == field and normalize_text(other[2]) not in ok:
                wrong.append(("neighbour", other[2]))
                break
        if level in (2, 3, 5):
            top = docs.ranked_ids(plan.query, 1)[0]  # search()'s first hit (same order)
            if top != first:
                if field is None:
                    top_answer = top
                elif plan.follow_dependency:  # the top hit's own first dependency
                    dep = first_dependency(docs.fields[top].get("Depends", ""))
                    top_answer = docs.fields.get(dep or "", {}).get(field, "")
                else:
                    top_answer = docs.fields[top].get(field, "")
                if top_answer and normalize_text(top_answer) not in ok:
                    wrong.append(("first_snippet", top_answer))
        docs_used = (first, source) if plan.follow_dependency else (first,)
        out.append(SearchQATask(f"searchqa-l{level}-s{seed}-{i:04d}", level, question, answer,
                                accepted, plan, docs_used, tuple(wrong)))
    return out
