"""The offline statement writer: a bug report in a user's words, from the failures alone.

What the user called (the title), what they expected and what they got (the values a failed
comparison saw, or the exception), and how to trigger it (the evaluated call, or the call the
test made into the project with its arguments). The API named is the one the test called and
whose call path reached the bug (traced on the buggy source), else the bug's own function:
never a function the bug is not in or reached from. Neither the hidden tests' names nor their
lines are written (a sentence holding a line of a hidden test file is left out).
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from proofgym.tasks.synth.evidence import (
    BugEvidence,
    Failure,
    Observation,
    Statement,
    clean,
    observe,
    quotes_hidden_test,
    where_the_bug_is,
    without_hidden_names,
)
from proofgym.tasks.synth.hiding import definition

#: values this short go into the title
_TITLE_VALUES = 48
#: the cases a report describes at most (the rest are like them)
_CASES = 3


def display_api(qualname: str) -> str:
    """How a user names a qualified function: ``Cls.__init__`` is ``Cls``."""
    parts = [p for p in qualname.split(".") if p != "<locals>"]
    if len(parts) >= 2 and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _public(qualname: str) -> bool:
    """Whether a user calls this: no ``<locals>`` and no private part (dunders are public)."""
    parts = qualname.split(".")
    return "<locals>" not in parts and not any(
        p.startswith("_") and not (p.startswith("__") and p.endswith("__")) for p in parts)


def api_of(failure: Failure, fallback: str) -> str:
    """The API to name: the first public function on the path from the call the test made to
    the bug's function, else the bug's function (qualified when traced)."""
    for name in failure.path:
        if _public(name):
            return display_api(name)
    return display_api(failure.path[-1]) if failure.path else fallback


def _article(word: str) -> str:
    return f"an `{word}`" if word[:1].lower() in "aeiou" else f"a `{word}`"


_ARG = re.compile(r"^<class '([\w.]+)'>$")
#: dunder -> how a user writes the call (``o`` is the object, ``a`` the arguments)
_SYNTAX = {"__getitem__": "o[{0}]", "__setitem__": "o[{0}] = {1}", "__delitem__": "del o[{0}]",
           "__contains__": "{0} in o", "__len__": "len(o)", "__iter__": "list(o)",
           "__reversed__": "reversed(o)", "__repr__": "repr(o)", "__str__": "str(o)",
           "__eq__": "o == {0}", "__ne__": "o != {0}",
           "__call__": "o({all})", "__bool__": "bool(o)", "__hash__": "hash(o)",
           "__lt__": "o < {0}", "__le__": "o <= {0}", "__gt__": "o > {0}", "__ge__": "o >= {0}",
           "__add__": "o + {0}", "__sub__": "o - {0}", "__or__": "o | {0}", "__and__": "o & {0}"}


def _call(failure: Failure) -> tuple[str, str | None] | None:
    """(the call the test made into the project as a user writes it, the class of the object
    it is made on, if any)."""
    if not failure.path or not _public(failure.path[0]):
        return None
    parts = failure.path[0].split(".")
    args = [_ARG.sub(r"\1", clean(a)) for a in failure.args]
    # the trace sees every parameter, passed or defaulted: a module is never one a user passes
    args = args[:next((i for i, a in enumerate(args) if a.startswith("<module ")), len(args))]
    joined = ", ".join(args)
    name, owner = parts[-1], ".".join(parts[:-1])
    if owner and name == "__init__":
        return f"{owner}({joined})", None
    if owner and name in ("__setattr__", "__getattr__", "__getattribute__", "__delattr__") and \
            args and re.fullmatch(r"'\w+'", args[0]):
        attr = args[0].strip("'")
        text = {"__setattr__": f"o.{attr} = {', '.join(args[1:])}", "__delattr__": f"del o.{attr}"
                }.get(name, f"o.{attr}")
        return text, owner
    if owner and name in _SYNTAX:
        try:
            return _SYNTAX[name].format(*args, "", "", all=joined), owner
        except (IndexError, KeyError):
            return None
    if owner:
        return f"o.{name}({joined})", owner
    return f"{name}({joined})", None


@dataclass(frozen=True)
class _Case:
    failure: Failure
    obs: Observation
    api: str  # displayed name of the API the user called

    @property
    def trigger(self) -> tuple[str, str | None] | None:
        """A call that shows the behaviour: the evaluated call pytest printed for the observed
        value, else the call the test made into the project (with its receiver's class)."""
        if self.obs.call:
            return (f"o.{self.obs.call}", self.obs.receiver) if self.obs.receiver else \
                (self.obs.call, None)
        return _call(self.failure)

    def prose(self) -> str | None:
        found = self.trigger
        if found is None:
            return None
        call, owner = found
        return f"`{call}` (where `o` is {_article(owner)})" if owner else f"`{call}`"

    def returns(self) -> bool:
        """Whether the observed value is what the API itself returned."""
        name = self.api.rsplit(".", 1)[-1]
        return re.match(rf"^(?:[\w.]*\.)?{re.escape(name)}\(", self.obs.call or "") is not None

    @property
    def weak(self) -> bool:
        """Whether the case says neither values nor an exception."""
        return self.obs.relation is None and self.obs.exception in (None, "AssertionError")


def _expected_observed(obs: Observation) -> tuple[str, str]:
    """(what was expected, what happened), in prose."""
    o, e = obs.observed, obs.expected
    if obs.relation in ("==", "is"):
        return f"`{e}`", f"`{o}`"
    if obs.relation in ("!=", "is not"):
        return f"anything but `{o}`", f"`{o}`"
    if obs.relation == "in":
        return f"`{o}` to be in the result", f"it is missing: the result is `{e}`"
    if obs.relation == "not in":
        return f"`{o}` not to be in the result", f"it is there: the result is `{e}`"
    if obs.relation == "matches":
        return f"an error whose message matches `{e}`", f"the message is `{o}`"
    if obs.relation in ("<", "<=", ">", ">="):
        return f"a value {obs.relation} `{e}`", f"`{o}`"
    if obs.relation == "true":
        return "a true result", f"`{o}`"
    if obs.relation == "false":
        return "a false result", f"`{o}`"
    if obs.relation == "raises":
        return f"`{obs.exception}` to be raised", "no exception is raised"
    if obs.exception and obs.exception != "AssertionError":
        return "no error", f"`{obs.exception}`" + (f": {obs.message}" if obs.message else "")
    return "the behaviour it had before", "a different result" + (
        f" (the check says: {obs.message})" if obs.message else "")


def _title(project: str, case: _Case) -> str:
    api, obs = f"`{case.api}`", case.obs
    if obs.relation in ("==", "is") and obs.observed is not None and \
            len(obs.observed or "") + len(obs.expected or "") <= _TITLE_VALUES:
        verb = "returns" if case.returns() else "gives"
        return f"{project}: {api} {verb} `{obs.observed}` instead of `{obs.expected}`"
    if obs.relation in ("true", "false") and case.returns() and len(obs.observed or "") <= _TITLE_VALUES:
        return f"{project}: {api} returns `{obs.observed}`"
    if obs.relation == "raises":
        return f"{project}: {api} no longer raises `{obs.exception}`"
    if obs.exception and obs.exception != "AssertionError":
        message = f": {obs.message}" if obs.message and len(obs.message) <= _TITLE_VALUES else ""
        return f"{project}: {api} raises `{obs.exception}`{message}"
    return f"{project}: {api} gives a wrong result"


def _own_call(obs: Observation, hidden_sources: Sequence[bytes]) -> Observation:
    """``obs`` without its call when that calls a function of the hidden tests (a helper's
    name is the test's own words)."""
    name = re.match(r"^(?:[\w.]*\.)?(\w+)\(", obs.call or "")
    if name and (any(f"def {name.group(1)}(".encode() in s for s in hidden_sources) or
                 ("." not in obs.call.split("(")[0] and hasattr(builtins, name.group(1)))):
        return replace(obs, call=None, receiver=None)  # a builtin's call shows nothing of the API
    return obs


_EQUALITY = {"assertEqual", "assertEquals", "assertNotEqual", "assertNotEquals",
             "assertListEqual", "assertTupleEqual", "assertDictEqual", "assertSetEqual",
             "assertSequenceEqual", "assertMultiLineEqual"}


def _compared_literals(test: str, sources: Sequence[bytes]) -> set[str]:
    """The reprs of the literals the test's own checks compare with (``assert 'a' == f()``,
    ``f() == 'a'``, ``self.assertEqual('a', f())``), read from the hidden test's source."""
    names = [n.split("[", 1)[0] for n in test.split("::")[1:]]
    found: set[str] = set()
    for source in sources:
        try:
            body = ast.parse(source).body
        except (SyntaxError, ValueError):
            continue
        node = definition(body, names)
        if node is None:
            continue
        for sub in ast.walk(node):
            sides: list[ast.expr] = []
            if isinstance(sub, ast.Compare) and len(sub.ops) == 1 and \
                    isinstance(sub.ops[0], (ast.Eq, ast.NotEq)):
                sides = [sub.left, sub.comparators[0]]
            elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and \
                    sub.func.attr in _EQUALITY:
                sides = list(sub.args[:2])
            for side in sides:
                try:
                    found.add(repr(ast.literal_eval(side)))
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    continue
    return found


def _sides(failure: Failure, obs: Observation, hidden_sources: Sequence[bytes]) -> Observation:
    """``obs`` with what was expected and what was observed the right way round where the
    failure's text could not tell (no evaluated call: ``assert 'a' == f()`` prints as ``assert
    'a' == 'b'``, unittest as ``'a' != 'b'``): the expected value is the test's literal."""
    if obs.call is not None or obs.relation not in ("==", "!=") or obs.expected is None:
        return obs
    literals = _compared_literals(failure.test, hidden_sources)
    if obs.observed in literals and obs.expected not in literals:
        return replace(obs, observed=obs.expected, expected=obs.observed)
    return obs


class OfflineWriter:
    """The default writer: a report from the failures themselves (see the module docstring)."""

    name = "offline"

    def write(self, evidence: BugEvidence) -> Statement:
        places = where_the_bug_is(evidence.bugs)
        # a bug outside any function (a release's fix of a module-level table) is named by its
        # module
        fallback = next((f for _, f in places if f), places[0][0] if places else evidence.project)
        cases = [_Case(f, _own_call(_sides(f, observe(f), evidence.hidden_sources),
                                    evidence.hidden_sources), api_of(f, fallback))
                 for f in evidence.failures]
        # the most telling case first: compared values, a call to show, an exception
        cases.sort(key=lambda c: (not c.obs.compares, c.trigger is None, c.weak, c.failure.test))
        if any(not c.weak for c in cases):
            cases = [c for c in cases if not c.weak]
        lead = cases[0] if cases else None
        title = _title(evidence.project, lead) if lead else \
            f"{evidence.project}: `{fallback}` gives a wrong result"
        if lead and quotes_hidden_test(title, evidence.hidden_sources):
            title = _title(evidence.project, _Case(lead.failure, replace(
                lead.obs, message=None, observed=None, expected=None), lead.api))
        lines = [f"# {title}", ""]
        seen: set[str] = set()
        shown_cases: list[_Case] = []
        shown = 0
        for case in cases:
            block = self._case(case, first=shown == 0)
            for strip in ({"call": None, "receiver": None, "message": None},
                          {"observed": None, "expected": None, "relation": None}):
                if not quotes_hidden_test(block, evidence.hidden_sources):
                    break
                # less of it, until nothing of a hidden test is left
                case = _Case(replace(case.failure, path=(), args=()),
                             replace(case.obs, **strip), case.api)
                block = self._case(case, first=shown == 0, with_call=False)
            if quotes_hidden_test(block, evidence.hidden_sources):
                continue
            key = self._case(case, first=False)
            if key in seen:
                continue
            seen.add(key)
            if shown == _CASES:
                lines += ["Other uses of the same API misbehave in the same way.", ""]
                break
            shown_cases.append(case)
            if shown == 1:
                lines += ["It is not the only case:", ""]
            lines += [block, ""]
            shown += 1
        text = "\n".join(lines).rstrip("\n") + "\n"
        # a value's repr or a message may name a test (its function or class): never the report
        text = without_hidden_names(text, evidence.failures)
        title = without_hidden_names(title, evidence.failures)
        text = f"# {title}\n" + text.split("\n", 1)[1]
        apis = list(dict.fromkeys(c.api for c in cases))
        # what the report states of each comparison it shows: "- Expected: ..." and "- Observed: ..."
        compared = [list(reversed(_expected_observed(c.obs))) for c in shown_cases if c.obs.compares]
        provenance: dict[str, object] = {
            "writer": self.name, "apis": apis,
            "call_path": sorted({n for f in evidence.failures for n in f.path})}
        if compared:
            provenance["compared"] = compared
        return Statement(title, text, {"statement": provenance})

    @staticmethod
    def _case(case: _Case, *, first: bool, with_call: bool = True) -> str:
        expected, observed = _expected_observed(case.obs)
        trigger = case.prose() if with_call else None
        if first:
            opening = f"Calling {trigger}" if trigger else f"Using `{case.api}`"
            head = f"{opening} does not behave as it should."
        else:
            head = f"Calling {trigger}:" if trigger else f"Another use of `{case.api}`:"
        text = [head, "", f"- Expected: {expected}", f"- Observed: {observed}"]
        found = case.trigger if with_call else None
        if first and found:
            text += ["", "To reproduce:", "", "```python", _snippet(found, case.obs), "```"]
        return "\n".join(text)


def _snippet(found: tuple[str, str | None], obs: Observation) -> str:
    call, owner = found
    lines = [f">>> o = ...  # {_article(owner).replace('`', '')}"] if owner else []
    if obs.relation in ("==", "is", "true", "false") and obs.call:
        return "\n".join([*lines, f">>> {call}", str(obs.observed)])
    if obs.exception and obs.exception != "AssertionError" and obs.relation != "raises":
        return "\n".join([*lines, f">>> {call}", "Traceback (most recent call last):", "  ...",
                          f"{obs.exception}" + (f": {obs.message}" if obs.message else "")])
    return "\n".join([*lines, f">>> {call}"])


def names_in_title(title: str) -> list[str]:
    """The API a written title names: its first backticked name (what follows are values and
    exception types, ``returns `IDLE` instead of `ERROR```)."""
    first = re.search(r"`([^`]+)`", title)
    return [first.group(1)] if first and re.fullmatch(r"[A-Za-z_][\w.]*", first.group(1)) else []


def allowed_names(bugs: Sequence[dict], call_path: Sequence[str]) -> set[str]:
    """Names a title may use: the bug's functions and modules, and the functions of the call
    path from the API the user called down to the bug (as a user names them)."""
    out = {str(b["function"]) for b in bugs} | {m for m, _ in where_the_bug_is(bugs)}
    for name in call_path:
        out |= {name, display_api(name)}
    return out


__all__ = ["OfflineWriter", "allowed_names", "display_api", "names_in_title"]
