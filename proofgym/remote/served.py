"""The client's stand-ins for what stays on the server: its tasks, its runtime, its verdicts.

A :class:`RemoteTask` is a served task as the client knows it (id, content hash, grader version:
never its content); its grade is the server's verdict for the episode, fetched by trajectory id.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import httpx
import orjson
import pydantic

from proofgym.core import ConfigError, ProofgymError, Task, TaskSpec, Trace, Verdict
from proofgym.core.errors import RemoteError as RemoteError
from proofgym.core.tls import tls_context
from proofgym.runtimes import Artifact
from proofgym.tools import schema_docstring
from proofgym.wire import Described, ServedTask


def http_base(url: str) -> str:
    """``http://host:port`` from ``ws://host:port[/ws]`` or ``http://host:port``."""
    parts = urlsplit(url)
    if parts.scheme not in ("ws", "wss", "http", "https") or not parts.netloc:
        raise ConfigError(f"env url {url!r} must be ws://HOST:PORT or http://HOST:PORT (proofgym serve "
                          "prints it)")
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    path = parts.path[:-3] if parts.path.endswith("/ws") else parts.path
    return urlunsplit((scheme, parts.netloc, path.rstrip("/"), "", ""))


def request_headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


class RemoteTask(Task):
    """A served task as the client knows it: id, content hash, grader version. Its grade is the
    server's verdict for the episode named in the artifact (the server grades what it saw)."""

    def __init__(self, entry: ServedTask, server: str, token: str | None,
                 specs: ServedSpecs | None = None) -> None:
        self._id = entry.id
        self.multi_turn: bool = entry.multi_turn
        self._specs = specs or ServedSpecs(server, token)
        self._hash = entry.content_hash
        self.grader_type = entry.grader_type
        self.verifier_version = entry.verifier_version
        self._rubric = entry.rubric
        self.server, self.token = server, token

    @property
    def id(self) -> str:
        return self._id

    @property
    def content_hash(self) -> str:  # type: ignore[override]
        return self._hash

    def rubric(self) -> Any:
        """The served rubric's description (``None`` for a task graded without one): what the
        rollout contract reads."""
        return None if self._rubric is None else _Described(self._rubric)

    def get_spec(self) -> TaskSpec:
        """What the task shows the agent, as the server states it (``GET /prompts``)."""
        return self._specs.get(self._id)

    def content(self) -> dict[str, Any]:
        return {"id": self._id, "served_content_hash": self._hash}

    def verify(self, trace: Trace, runtime: Any) -> Verdict:
        meta = runtime.artifact.meta
        return fetch_verdict(meta["server"], meta["trajectory_id"], self.token)


def fetch_verdict(server: str, trajectory_id: str, token: str | None, *,
                  timeout_s: float = 600.0) -> Verdict:
    """The server's verdict for ``trajectory_id``, waiting while it is pending."""
    deadline = time.monotonic() + timeout_s
    with httpx.Client(headers=request_headers(token), timeout=70.0, verify=tls_context()) as client:
        while True:
            # an id is CONTRACT/TASK#ATTEMPT: '#' would end the path
            response = client.get(f"{server}/verdicts/{quote(trajectory_id, safe='')}", params={"wait": 60})
            if response.status_code != 200:
                raise RemoteError(f"the server has no verdict for {trajectory_id}: {response.text[:300]}")
            record = response.json()
            if record["status"] != "pending":
                return Verdict.from_dict(record["verdict"])
            if time.monotonic() > deadline:
                raise RemoteError(f"the verdict for {trajectory_id} was still pending after {timeout_s:g} s")


class _Described:
    def __init__(self, described: Any) -> None:
        self._described = described

    def describe(self) -> Any:
        return self._described


_JSON_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool,
                               "array": list, "object": dict}


class RemoteTool:
    """A served tool as the client sees it: its name, description and parameters as the server
    states them, and a pydantic ``model`` of its arguments (what adapters that build typed
    methods, such as the TRL one, read). Calls go through ``env.step``."""

    def __init__(self, schema: dict[str, Any]) -> None:
        function = schema.get("function", schema)
        self.name: str = function["name"]
        self.description: str = function.get("description", "")
        self.parameters: dict[str, Any] = function.get("parameters", {})
        required = set(self.parameters.get("required", []))
        fields: dict[str, Any] = {}
        for key, prop in self.parameters.get("properties", {}).items():
            kind = prop.get("type")
            annotation = _JSON_TYPES.get(kind[0] if isinstance(kind, list) else kind, Any)
            fields[key] = (annotation, ... if key in required else prop.get("default"))
        self.model = pydantic.create_model(f"{self.name}_arguments", **fields)

    def schema(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.parameters}}

    def docstring(self) -> str:
        """As :meth:`proofgym.tools.Tool.docstring`: the description and one line per argument."""
        return schema_docstring(self.description, self.parameters)


class _Tools:
    def __init__(self, schemas: list[dict[str, Any]]) -> None:
        self._schemas = schemas
        self._tools = [RemoteTool(s) for s in schemas]

    def schemas(self) -> list[dict[str, Any]]:
        return orjson.loads(orjson.dumps(self._schemas))

    def __iter__(self) -> Any:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)


class ServedSpecs:
    """The specs the server's tasks show the agent (``GET /prompts``), fetched once, on first use."""

    def __init__(self, server: str, token: str | None) -> None:
        self.server, self.token = server, token
        self._specs: dict[str, Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"server": self.server, "token": self.token, "_specs": None}

    def get(self, task_id: str) -> TaskSpec:
        if self._specs is None:
            response = httpx.get(f"{self.server}/prompts", headers=request_headers(self.token), timeout=120,
                                 verify=tls_context())
            if response.status_code != 200:
                raise RemoteError(f"the server refused /prompts ({response.status_code}): "
                                  f"{response.text[:300]}")
            self._specs = response.json()["prompts"]
        entry = self._specs[task_id]
        return TaskSpec(entry["prompt"], metadata=entry.get("metadata"))


class RemoteRuntime:
    """The server's runtime as the client sees it: its tools and settings. Tool calls run on
    the server, inside the env's own runtime; this one only describes it."""

    kind = "remote"
    cheap = False

    def __init__(self, described: Described) -> None:
        self.tools = _Tools(described.tools)
        self._config = described.runtime_config

    def config(self) -> dict[str, Any]:
        return orjson.loads(orjson.dumps(self._config))

    def reset(self) -> None:
        return None

    def execute(self, tool_name: str, tool_input: Any) -> Any:
        raise ProofgymError("a RemoteEnv's tools run on the server: use env.step()")

    def snapshot(self) -> Artifact:
        raise ProofgymError("a RemoteEnv's final state stays on the server, which grades it")

    def close(self) -> None:
        return None
