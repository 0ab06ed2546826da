"""Sorting, picking and constraining lists of versions."""

import operator

from verkit.version import Version

_OPERATORS = {
    ">=": operator.ge,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    "<": operator.lt,
}


def sort_versions(versions):
    """Version strings sorted by precedence, lowest first."""
    return sorted(versions, key=Version.parse)


def latest(versions, include_prereleases=False):
    """The highest version string, or None. Pre-releases only count when asked for."""
    candidates = [v for v in versions if include_prereleases or not Version.parse(v).is_prerelease]
    if not candidates:
        return None
    return max(candidates, key=Version.parse)


def satisfies(version, constraint):
    """True when ``version`` meets every comma-separated clause of ``constraint``, e.g. ">=1.0, <2"."""
    current = Version.parse(version)
    for clause in constraint.split(","):
        clause = clause.strip()
        for symbol in sorted(_OPERATORS, key=len, reverse=True):
            if clause.startswith(symbol):
                bound = Version.parse(clause[len(symbol):].strip())
                if not _OPERATORS[symbol](current, bound):
                    return False
                break
        else:
            raise ValueError(f"constraint clause {clause!r} has no operator (use one of {list(_OPERATORS)})")
    return True
