"""A project's environment image: the minimal system plus its test dependencies from pinned
wheels (``PackagesImage``), never the project itself (the workspace is its checkout).

A project whose recipe names no ``requirements`` runs on the default minimal system (pytest and
its dependencies staged from the host). One that does gets a lock of pytest (at the host's
version, the grader's runner is tested against it) and those requirements, each wheel pinned by
its sha256; the lock lines are committed in the recipe, and the image is built from them on
first use (``proofgym image``'s cache).

Neither image may hold the project's own modules (the agent would copy the original source out
of ``site-packages``): :func:`check_project_image` and :func:`project_image` refuse a project the
default system stages (pytest's own dependencies: ``packaging``, ``iniconfig``, ``pluggy``...),
and a lock that pins the project or a distribution installing one of its top-level modules
(``python-dateutil``, which ``freezegun`` needs, for a ``dateutil`` project).
"""

from __future__ import annotations

from collections.abc import Callable

from proofgym.core.errors import RecipeError
from proofgym.runtimes.sandbox import (
    ImageError,
    PackagesImage,
    WheelLock,
    default_system_modules,
    lock_packages,
    own_module_refusal,
)
from proofgym.tasks.synth.recipe import ProjectPin


def pytest_requirement() -> str:
    import pytest

    return f"pytest=={pytest.__version__}"


def lock_lines(pin: ProjectPin, progress: Callable[[str], None] | None = None) -> tuple[str, ...]:
    """The pinned lock of ``pin``'s test dependencies (pip resolves them from the index), refused
    (:class:`ImageError`) when it would install the project's own modules."""
    lock = lock_packages([pytest_requirement(), *pin.requirements], progress=progress)
    PackagesImage(lock, project=pin.name, modules=pin.modules).check_wheels()  # wheels are cached
    return tuple(line for line in lock.to_text().splitlines() if line.strip())


def check_project_image(pin: ProjectPin) -> None:
    """Refuse (:class:`ImageError`, one line: what, why, what to do) a project whose image holds
    its own modules: the default system's (no requirements), or its lock's (the project pinned, or
    a cached wheel installing one of its modules; wheels not cached yet are checked when the image
    is built)."""
    if not pin.requirements:
        why = own_module_refusal(default_system_modules(), pin.name, pin.modules,
                                 "the default system", "pytest needs it, so the project cannot be "
                                 "a task on any image with pytest: drop it from the recipe")
        if why:
            raise ImageError(why)
    elif pin.lock:
        _locked(pin).check_wheels()


def _locked(pin: ProjectPin) -> PackagesImage:
    return PackagesImage(WheelLock.parse("\n".join(pin.lock) + "\n"), project=pin.name,
                         modules=pin.modules)


def project_image(pin: ProjectPin) -> PackagesImage | None:
    """``pin``'s image (unbuilt: sandboxes build it on first use, and refuse it then if it
    installs the project's modules), or ``None`` for the default system. A project with
    requirements but no lock is an error: lock it first. A project the default system or its
    lock holds is refused (:func:`check_project_image`)."""
    if not pin.requirements:
        check_project_image(pin)
        return None
    if not pin.lock:
        raise RecipeError(f"project {pin.name!r} names requirements {list(pin.requirements)} but "
                          "no lock; `proofgym tasks synth` writes it into the recipe")
    image = _locked(pin)
    image.refuse_project_pin()
    return image
