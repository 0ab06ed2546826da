"""A tool: a typed Python callable with an OpenAI function-calling schema derived from it."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, get_type_hints

import docstring_parser
import orjson
from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from proofgym.core.errors import ConfigError
from proofgym.tools.result import ToolError, ToolResult


@dataclass
class ToolContext:
    """Injected into a tool that declares a parameter of this type; never part of the schema.

    ``state`` is the runtime's per-episode state (reset with the runtime), so tools can keep an
    episode's world without the task holding per-episode state.
    """

    state: dict[str, Any] = field(default_factory=dict)


class Injected:
    """Base of the parameter types a runtime fills in: a tool function with a parameter typed as a
    subclass (for example :class:`~proofgym.runtimes.sandbox.tools.Sandbox`) receives the
    runtime's object of that type when it runs. Such a parameter is never part of the schema."""


class Tool:
    """A callable the agent may invoke, with its schema and argument validation.

    Invariant: the JSON schema in :attr:`schema` is generated from the same pydantic model that
    :meth:`validate` uses, so what the agent is told and what is enforced cannot drift apart.

    A tool also reads as the plain function it wraps: ``__name__`` is its name, ``__doc__`` a
    Google-style docstring of its description and parameters, ``__signature__`` its parameters
    (without an injected :class:`ToolContext`). It pickles by reference when it is what its
    module's attribute names (the ``@tool`` decorator's result), else with the function it wraps.
    Frameworks that accept only real functions (TRL's ``GRPOTrainer(tools=...)``, transformers'
    chat templates) take :meth:`as_function`.
    """

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None,
                 description: str | None = None, cheap: bool = False) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        #: Declared by the author: the tool returns within microseconds and never blocks (pure
        #: Python on in-memory state). An orchestrator may then run it on its event loop rather
        #: than hand each call to a thread (see ``InProcessRuntime.cheap``).
        self.cheap = cheap
        if not self.name.replace("_", "").replace("-", "").isalnum():
            raise ConfigError(f"tool name {self.name!r} must be letters, digits, '_' or '-'")
        doc = docstring_parser.parse(inspect.getdoc(fn) or "")
        self.description = description or "\n\n".join(
            part for part in (doc.short_description, doc.long_description) if part
        )
        if not self.description:
            raise ConfigError(
                f"tool {self.name!r} has no description: give the function a docstring "
                "(the model reads it to decide when to call the tool)"
            )
        param_docs = {p.arg_name: p.description for p in doc.params}
        self._context_param: str | None = None
        self._injected: dict[str, type] = {}
        self.model = self._build_model(fn, param_docs)
        self.parameters = self._json_schema()
        self._custom = (name, description, cheap)
        self.__name__ = self.name
        self.__qualname__ = getattr(fn, "__qualname__", self.name)
        self.__module__ = getattr(fn, "__module__", None)  # type: ignore[assignment]
        self.__doc__ = self.docstring()
        self.__signature__ = self.signature()

    def signature(self) -> inspect.Signature:
        """The parameters the agent passes (keyword-only, typed, with defaults)."""
        return inspect.Signature([
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=field.annotation,
                              default=inspect.Parameter.empty if field.is_required() else field.default)
            for name, field in self.model.model_fields.items()])

    def docstring(self) -> str:
        """The description and parameter docs as a Google-style docstring (one line per argument,
        as function-schema parsers read it)."""
        return schema_docstring(self.description, self.parameters)

    def as_function(self) -> Callable[..., str]:
        """A plain function standing for this tool (same name, docstring, signature and
        annotations). It validates its arguments like the registry and returns the output text;
        a bad call or a failing tool raises :class:`ToolError` with the text the agent would see."""
        tool = self

        def function(**arguments: Any) -> str:
            kwargs = tool.validate(arguments)
            result = kwargs if isinstance(kwargs, ToolResult) else tool.invoke(kwargs)
            if not result.ok:
                raise ToolError(result.output, result.error_kind or "execution_error")
            return result.output

        function.__name__ = function.__qualname__ = self.name
        function.__doc__ = self.__doc__
        function.__signature__ = self.__signature__  # type: ignore[attr-defined]
        function.__annotations__ = {p.name: p.annotation for p in self.__signature__.parameters.values()}
        function.__module__ = self.__module__
        return function

    def __reduce__(self) -> Any:
        module = sys.modules.get(self.__module__ or "")
        if module is not None and "." not in self.__qualname__ and \
                getattr(module, self.__qualname__, None) is self:
            return self.__qualname__  # pickled as the global it is (``@tool`` replaced the function)
        return _rebuild_tool, (self.fn, *self._custom)

    def _build_model(self, fn: Callable[..., Any], param_docs: dict[str, str | None]) -> type[BaseModel]:
        # ToolContext resolves even when the tool is defined in a function under postponed annotations
        try:
            hints = get_type_hints(fn, localns={"ToolContext": ToolContext})
        except NameError as exc:
            raise TypeError(f"tool {self.name!r}: cannot resolve its type hints ({exc}); define the "
                            "types it uses at module level") from None
        fields: dict[str, Any] = {}
        for pname, param in inspect.signature(fn).parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"tool {self.name!r}: *args/**kwargs cannot be described to a model")
            annotation = hints.get(pname)
            if annotation is None:
                raise TypeError(f"tool {self.name!r}: parameter {pname!r} needs a type hint")
            if annotation is ToolContext:
                self._context_param = pname
                continue
            if isinstance(annotation, type) and issubclass(annotation, Injected):
                self._injected[pname] = annotation
                continue
            from pydantic import Field

            default = ... if param.default is param.empty else param.default
            fields[pname] = (annotation, Field(default, description=param_docs.get(pname)))
        config = ConfigDict(strict=True, extra="forbid")
        return create_model(f"{self.name}_arguments", __config__=config, **fields)

    def _json_schema(self) -> dict[str, Any]:
        schema = self.model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        schema.setdefault("properties", {})
        schema["additionalProperties"] = False
        return schema

    @property
    def schema(self) -> dict[str, Any]:
        """The OpenAI function-calling schema (``{"type": "function", "function": {...}}``)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    def validate(self, tool_input: Any) -> dict[str, Any] | ToolResult:
        """Check ``tool_input`` against the schema: validated kwargs, or an error result."""
        if isinstance(tool_input, (str, bytes)):
            try:
                tool_input = orjson.loads(tool_input) if tool_input.strip() else {}
            except orjson.JSONDecodeError as exc:
                return ToolResult.error(
                    "invalid_arguments",
                    f"arguments for {self.name!r} are not valid JSON ({exc}); "
                    "send a JSON object matching the tool's parameters",
                )
        if not isinstance(tool_input, dict):
            return ToolResult.error(
                "invalid_arguments",
                f"arguments for {self.name!r} must be a JSON object, got {type(tool_input).__name__}",
            )
        try:
            parsed = self.model.model_validate(tool_input)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or '(arguments)'}: {e['msg']}" for e in exc.errors()
            )
            expected = ", ".join(self.parameters.get("properties", {})) or "no arguments"
            return ToolResult.error(
                "invalid_arguments",
                f"invalid arguments for {self.name!r}: {problems}. Expected: {expected}.",
            )
        return {name: getattr(parsed, name) for name in type(parsed).model_fields}

    @property
    def injected(self) -> tuple[type, ...]:
        """The :class:`Injected` types this tool needs from its runtime."""
        return tuple(self._injected.values())

    def invoke(self, kwargs: dict[str, Any], context: ToolContext | None = None, *,
               resources: tuple[Injected, ...] = ()) -> ToolResult:
        """Run the tool on validated ``kwargs``; exceptions become typed error results.
        ``resources`` are the runtime's objects for parameters typed :class:`Injected`."""
        if self._context_param is not None:
            kwargs = {**kwargs, self._context_param: context or ToolContext()}
        for pname, kind in self._injected.items():
            given = next((r for r in resources if isinstance(r, kind)), None)
            if given is None:
                return ToolResult.error("execution_error", f"tool {self.name!r} needs a "
                                        f"{kind.__name__}, which this runtime does not provide")
            kwargs = {**kwargs, pname: given}
        try:
            value = self.fn(**kwargs)
        except ToolError as exc:
            return ToolResult.error(exc.kind, str(exc))
        except Exception as exc:  # the tool's bug or the agent's bad input: report, don't crash
            return ToolResult.error("execution_error", f"{type(exc).__name__}: {exc}")
        return ToolResult(render_output(value))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"


def _rebuild_tool(fn: Callable[..., Any], name: str | None, description: str | None,
                  cheap: bool = False) -> Tool:
    return Tool(fn, name=name, description=description, cheap=cheap)


def render_output(value: Any) -> str:
    """A tool's return value as the text the agent reads."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return str(value)


def tool(fn: Callable[..., Any] | None = None, *, name: str | None = None,
         description: str | None = None, cheap: bool = False) -> Any:
    """Make a :class:`Tool` from a type-hinted function with a Google-style docstring.

    Usable bare (``@tool``) or with arguments (``@tool(name="calc")``). ``cheap=True`` declares
    that the tool returns within microseconds and never blocks (see :attr:`Tool.cheap`).
    """
    if fn is None:
        return lambda f: Tool(f, name=name, description=description, cheap=cheap)
    return Tool(fn, name=name, description=description, cheap=cheap)


def schema_docstring(description: str, parameters: Mapping[str, Any]) -> str:
    """A tool's ``description`` and its JSON-schema ``parameters`` as a Google-style docstring:
    one ``Args:`` line per property (its description, else its name), as function-schema
    parsers such as transformers' read it."""
    lines = [description]
    props = parameters.get("properties", {})
    if props:
        lines += ["", "Args:"]
        lines += [f"    {name}: {' '.join(str(prop.get('description') or name).split())}"
                  for name, prop in props.items()]
    return "\n".join(lines)
