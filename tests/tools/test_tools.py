"""Tools: schemas from type hints and docstrings, validation, typed errors, output limits."""

from __future__ import annotations

import time

import pytest

from proofgym import InProcessRuntime, ToolError, ToolRegistry, tool
from proofgym.core import ToolErrorKind
from proofgym.tools import ToolContext, cut_output


@tool
def search(query: str, limit: int = 3, exact: bool = False) -> list[str]:
    """Search the notes.

    Longer explanation that the model also reads.

    Args:
        query: Words to look for.
        limit: At most this many results.
        exact: Match the whole phrase only.
    """
    return [f"{query}-{i}" for i in range(limit)]


@tool(name="remember")
def remember_fact(fact: str, ctx: ToolContext) -> str:
    """Store a fact for the rest of the episode.

    Args:
        fact: The fact.
    """
    ctx.state.setdefault("facts", []).append(fact)
    return f"{len(ctx.state['facts'])} facts"


@tool
def forbidden(path: str) -> str:
    """Read a path (always denied).

    Args:
        path: Any path.
    """
    raise ToolError(f"{path} is outside the workspace", "denied")


def test_schema_is_derived_from_hints_and_docstring():
    schema = search.schema
    assert schema["type"] == "function"
    fn = schema["function"]
    assert fn["name"] == "search"
    assert fn["description"].startswith("Search the notes.")
    assert "Longer explanation" in fn["description"]
    params = fn["parameters"]
    assert params["required"] == ["query"]
    assert params["additionalProperties"] is False
    assert params["properties"]["query"] == {"type": "string", "description": "Words to look for."}
    assert params["properties"]["limit"]["type"] == "integer"
    assert params["properties"]["limit"]["default"] == 3
    assert params["properties"]["exact"]["type"] == "boolean"


def test_injected_context_is_not_in_the_schema_and_keeps_state():
    assert set(remember_fact.parameters["properties"]) == {"fact"}
    runtime = InProcessRuntime([remember_fact])
    assert runtime.execute("remember", {"fact": "a"}).output == "1 facts"
    assert runtime.execute("remember", {"fact": "b"}).output == "2 facts"
    runtime.reset()
    assert runtime.execute("remember", {"fact": "c"}).output == "1 facts"


@pytest.mark.parametrize(
    ("name", "arguments", "kind", "mentions"),
    [
        ("nope", {}, ToolErrorKind.UNKNOWN_TOOL, "available tools: search"),
        ("search", {}, ToolErrorKind.INVALID_ARGUMENTS, "query: Field required"),
        ("search", {"query": "x", "colour": "red"}, ToolErrorKind.INVALID_ARGUMENTS, "colour"),
        ("search", {"query": 7}, ToolErrorKind.INVALID_ARGUMENTS, "valid string"),
        ("search", {"query": "x", "limit": "3"}, ToolErrorKind.INVALID_ARGUMENTS, "limit"),
        ("search", ["query"], ToolErrorKind.INVALID_ARGUMENTS, "must be a JSON object"),
        ("search", 5, ToolErrorKind.INVALID_ARGUMENTS, "must be a JSON object"),
        ("search", '{"query": ', ToolErrorKind.INVALID_ARGUMENTS, "not valid JSON"),
        ("forbidden", {"path": "/etc"}, ToolErrorKind.DENIED, "outside the workspace"),
        (None, {}, ToolErrorKind.UNKNOWN_TOOL, "unknown tool"),
    ],
)
def test_bad_calls_are_typed_errors(name, arguments, kind, mentions):
    registry = ToolRegistry([search, forbidden])
    result = registry.execute(name, arguments)
    assert not result.ok
    assert result.error_kind is kind
    assert mentions in result.output


def test_json_string_arguments_are_accepted():
    result = ToolRegistry([search]).execute("search", '{"query": "q", "limit": 2}')
    assert result.ok
    assert result.output == '["q-0","q-1"]'


def test_execution_errors_are_reported_not_raised():
    @tool
    def divide(a: int, b: int) -> float:
        """Divide.

        Args:
            a: Numerator.
            b: Denominator.
        """
        return a / b

    result = ToolRegistry([divide]).execute("divide", {"a": 1, "b": 0})
    assert result.error_kind is ToolErrorKind.EXECUTION_ERROR
    assert "ZeroDivisionError" in result.output


def test_tools_need_docstrings_and_hints():
    def undocumented(x: int) -> int:
        return x

    with pytest.raises(ValueError, match="docstring"):
        tool(undocumented)

    def unhinted(x):
        """Do it."""
        return x

    with pytest.raises(TypeError, match="type hint"):
        tool(unhinted)


def test_duplicate_tool_names_are_refused():
    with pytest.raises(ValueError, match="already registered"):
        ToolRegistry([search, search])


def test_long_output_is_cut_with_a_visible_marker():
    text = "".join(f"line {i}\n" for i in range(5000))
    cut, was_cut = cut_output(text, 1000)
    assert was_cut
    assert len(cut) <= 1000
    assert "characters cut by proofgym" in cut
    assert cut.startswith("line 0\n")
    assert cut.endswith("line 4999\n")
    assert cut_output("short", 1000) == ("short", False)

    @tool
    def flood(n: int) -> str:
        """Print a lot.

        Args:
            n: Characters.
        """
        return "x" * n

    result = InProcessRuntime([flood], max_output_chars=200).execute("flood", {"n": 10_000})
    assert result.ok and result.truncated
    assert len(result.output) <= 200 and "cut by proofgym" in result.output


def test_inprocess_timeout_is_typed_and_runtime_stays_usable():
    @tool
    def nap(seconds: float) -> str:
        """Sleep.

        Args:
            seconds: How long.
        """
        time.sleep(seconds)
        return "awake"

    runtime = InProcessRuntime([nap], timeout_s=0.2)
    result = runtime.execute("nap", {"seconds": 2.0})
    assert result.error_kind is ToolErrorKind.TIMEOUT
    assert "0.2" in result.output
    assert runtime.execute("nap", {"seconds": 0.0}).output == "awake"
    runtime.close()
