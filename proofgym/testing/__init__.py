"""Testing aids that are real parts: a scripted OpenAI-compatible server and its scripts."""

from proofgym.testing.scripts import ChatScript, ReferenceScript, UnknownPrompt
from proofgym.testing.server import FAULT_KINDS, Fault, ScriptedServer

__all__ = ["FAULT_KINDS", "ChatScript", "Fault", "ReferenceScript", "ScriptedServer", "UnknownPrompt"]
