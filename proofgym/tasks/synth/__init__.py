"""Task synthesis from real PyPI projects: pinned sdists, their own tests, seeded bug operators.

See ``docs/real-repositories.md``. The pieces: :mod:`.fetch` (sdists, verified and cached),
:mod:`.testrun` (the suite in a sandbox, per-test outcomes), :mod:`.operators` (the bugs),
:mod:`.pipeline` (screening and validation), :mod:`.hiding` (what the agent sees),
:mod:`.manifest` (the committed records and the task directories), :mod:`.stats` (the report).
"""

from proofgym.tasks.synth.fetch import FetchError, cache_dir, fetch_sdist, unpack
from proofgym.tasks.synth.manifest import TaskRecord, materialize, read_manifest, write_manifest
from proofgym.tasks.synth.operators import OPERATORS, Site, apply_site, mutate, sites
from proofgym.tasks.synth.patch import PatchError, apply_patch, make_patch
from proofgym.tasks.synth.pipeline import ProjectReport, ProjectSynth, Validator, synthesize_project
from proofgym.tasks.synth.recipe import ProjectPin, Recipe, RecipeError

__all__ = ["OPERATORS", "FetchError", "PatchError", "ProjectPin", "ProjectReport", "ProjectSynth",
           "Recipe", "RecipeError", "Site", "TaskRecord", "Validator", "apply_patch", "apply_site",
           "cache_dir", "fetch_sdist", "make_patch", "materialize", "mutate", "read_manifest",
           "sites", "synthesize_project", "unpack", "write_manifest"]
