"""Imported last by the process backend's forkserver, after the task modules it knows of: warms
the math check up there if one of them uses it (:mod:`proofgym.verify.pool.warmup`), so that every
worker forked from the server starts warm."""

from proofgym.verify.pool.warmup import loaded_task_modules, warm_up_for

warm_up_for(loaded_task_modules())
