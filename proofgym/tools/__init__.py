"""Typed tools: schemas from type hints and docstrings, validation, typed errors."""

from proofgym.tools.registry import ToolRegistry
from proofgym.tools.result import ToolError, ToolResult, cut_output
from proofgym.tools.tool import Injected, Tool, ToolContext, render_output, schema_docstring, tool

__all__ = ["Injected", "Tool", "ToolContext", "ToolError", "ToolRegistry", "ToolResult", "cut_output",
           "render_output", "schema_docstring", "tool"]
