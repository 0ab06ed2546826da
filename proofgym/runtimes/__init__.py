"""Runtimes execute tool calls; they know nothing of the task's objective."""

from proofgym.runtimes.artifact import Artifact, ArtifactView
from proofgym.runtimes.base import Runtime
from proofgym.runtimes.inprocess import InProcessRuntime

__all__ = ["Artifact", "ArtifactView", "InProcessRuntime", "Runtime"]
