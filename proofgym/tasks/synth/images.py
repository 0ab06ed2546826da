"""A project's environment image: the minimal system plus its test dependencies from pinned
wheels (``PackagesImage``), never the project itself (the workspace is its checkout).

A project whose recipe names no ``requirements`` runs on the default minimal system (pytest and
its dependencies staged from the host). One that does gets a lock of pytest (at the host's
version, the grader's runner is tested against it) and those requirements, each wheel pinned by
its sha256; the lock lines are committed in the recipe, and the image is built from them on
first use (``proofgym image``'s cache).
"""

from __future__ import annotations

from collections.abc import Callable

from proofgym.runtimes.sandbox import PackagesImage, WheelLock, lock_packages
from proofgym.tasks.synth.recipe import ProjectPin


def pytest_requirement() -> str:
    import pytest

    return f"pytest=={pytest.__version__}"


def lock_lines(pin: ProjectPin, progress: Callable[[str], None] | None = None) -> tuple[str, ...]:
    """The pinned lock of ``pin``'s test dependencies (pip resolves them from the index)."""
    lock = lock_packages([pytest_requirement(), *pin.requirements], progress=progress)
    return tuple(line for line in lock.to_text().splitlines() if line.strip())


def project_image(pin: ProjectPin) -> PackagesImage | None:
    """``pin``'s image (unbuilt: sandboxes build it on first use), or ``None`` for the default
    system. A project with requirements but no lock is an error: lock it first."""
    if not pin.requirements:
        return None
    if not pin.lock:
        raise ValueError(f"project {pin.name!r} names requirements {list(pin.requirements)} but "
                         "no lock; `proofgym tasks synth` writes it into the recipe")
    return PackagesImage(WheelLock.parse("\n".join(pin.lock) + "\n"))
