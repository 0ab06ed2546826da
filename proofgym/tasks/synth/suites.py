"""Every task's pass-to-pass as its project's whole stable suite, listed once per project.

``python -m proofgym.tasks.synth.suites MANIFEST RECIPE [--projects ...] [--all]`` computes the
stable suite of each project of ``MANIFEST`` that ``MANIFEST``'s ``.stable.json`` does not list
yet at its pinned version (``--all``: every project again) with synthesis' own baseline (the
suite run 3 times in the project's sandbox: the tests that pass every time,
:meth:`~proofgym.tasks.synth.pipeline.ProjectSynth.stable_suite`), writes the list, and rewrites
the manifest so that each record's pass-to-pass is that suite less its fail-to-pass tests
(written as :data:`~proofgym.tasks.synth.manifest.WHOLE_SUITE`). Re-running it after records or
projects were added converts just those.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from proofgym.tasks.synth.manifest import (
    StableSuite,
    read_manifest,
    read_suites,
    write_manifest,
    write_suites,
)
from proofgym.tasks.synth.pipeline import ProjectSynth
from proofgym.tasks.synth.recipe import Recipe


def whole_suites(manifest: str | Path, recipe: str | Path, *, projects: Sequence[str] | None = None,
                 again: bool = False, quiet: bool = False) -> dict[str, StableSuite]:
    """Give every record of ``manifest`` (of ``projects``, default all) its project's whole
    stable suite as pass-to-pass; returns the suites (see the module docstring)."""
    records = read_manifest(manifest)
    pins = Recipe.load(recipe)
    suites = read_suites(manifest)
    names = sorted({r.project for r in records} if projects is None else set(projects))
    for name in names:
        pin = pins.project(name)
        known = suites.get(name)
        if known is not None and known.version == pin.version and not again:
            continue
        tests = ProjectSynth(pin, quiet=quiet).stable_suite()
        suites[name] = StableSuite(pin.version, tuple(tests))
        if not quiet:
            sys.stderr.write(f"proofgym suites: {name} {pin.version}: {len(tests)} stable tests\n")
    write_suites(manifest, suites)
    out = []
    for record in records:
        suite = suites.get(record.project)
        if record.project in names and suite is not None and suite.version == record.version:
            record = replace(record, pass_to_pass=suite.pass_to_pass(record.fail_to_pass))
        out.append(record)
    write_manifest(manifest, out)
    return suites


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m proofgym.tasks.synth.suites",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("manifest")
    parser.add_argument("recipe")
    parser.add_argument("--projects", nargs="*", default=None)
    parser.add_argument("--all", action="store_true", help="compute every listed suite again")
    args = parser.parse_args(argv)
    whole_suites(args.manifest, args.recipe, projects=args.projects, again=args.all)
    return 0


if __name__ == "__main__":
    sys.exit(main())
