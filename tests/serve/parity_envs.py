"""SearchQA-v0 with one thing changed in ``find_in_document``, for ``proofgym parity`` to catch.

* ``tests.serve.parity_envs:SchemaChanged-v0``: its description says something else.
* ``tests.serve.parity_envs:ErrorKindChanged-v0``: an unknown document is an ``execution_error``
  instead of ``not_found``.
"""

from __future__ import annotations

import functools

import gymnasium

from proofgym import InProcessRuntime, Limits, Tool, ToolError
from proofgym.envs.search_qa import SearchQAEnv, search_qa_tasks
from proofgym.envs.search_qa.faults import initial_state, resolve_faults
from proofgym.envs.search_qa.tools import OPEN, SEARCH, WAIT, find_in_document


@functools.wraps(find_in_document)
def _other_kind(doc_id: str, pattern: str, ctx):  # type: ignore[no-untyped-def]
    try:
        return find_in_document(doc_id, pattern, ctx)
    except ToolError as exc:
        if exc.kind == "not_found":
            raise ToolError(str(exc), "execution_error") from None
        raise


def _env(find: Tool) -> SearchQAEnv:
    runtime = InProcessRuntime([SEARCH, OPEN, find, WAIT], timeout_s=None,
                               initial_state=initial_state(resolve_faults("realistic")))
    return SearchQAEnv(runtime, tasks=search_qa_tasks(), limits=Limits(max_turns=1, max_tool_calls=80))


def schema_changed() -> SearchQAEnv:
    return _env(Tool(find_in_document, name="find_in_document", description="Grep a document."))


def error_kind_changed() -> SearchQAEnv:
    return _env(Tool(_other_kind, name="find_in_document"))


gymnasium.register("SchemaChanged-v0", entry_point=schema_changed)
gymnasium.register("ErrorKindChanged-v0", entry_point=error_kind_changed)
