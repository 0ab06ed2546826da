"""Task sets: the distribution of tasks an env draws from."""

from proofgym.tasks.taskset import TaskSet

__all__ = ["TaskSet"]
