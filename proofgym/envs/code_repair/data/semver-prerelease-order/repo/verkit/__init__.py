"""verkit: Semantic Versioning 2.0.0 helpers."""

from verkit.constraints import latest, satisfies, sort_versions
from verkit.version import InvalidVersion, Version

__all__ = ["InvalidVersion", "Version", "latest", "satisfies", "sort_versions"]
