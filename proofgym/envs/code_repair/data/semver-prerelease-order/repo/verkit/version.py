"""Parsing and ordering semantic versions."""

import re
from functools import total_ordering

_IDENT = r"[0-9A-Za-z-]+"
_PATTERN = re.compile(
    rf"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    rf"(?:-({_IDENT}(?:\.{_IDENT})*))?"
    rf"(?:\+({_IDENT}(?:\.{_IDENT})*))?$"
)


class InvalidVersion(ValueError):
    """The text is not a semantic version."""


@total_ordering
class Version:
    """A semantic version. Ordering is SemVer precedence; build metadata does not take part."""

    def __init__(self, major, minor, patch, prerelease=(), build=()):
        self.major, self.minor, self.patch = major, minor, patch
        self.prerelease = tuple(prerelease)
        self.build = tuple(build)

    @classmethod
    def parse(cls, text):
        match = _PATTERN.match(text.strip())
        if match is None:
            raise InvalidVersion(f"not a semantic version: {text!r}")
        major, minor, patch, pre, build = match.groups()
        return cls(int(major), int(minor), int(patch),
                   pre.split(".") if pre else (), build.split(".") if build else ())

    @property
    def is_prerelease(self):
        return bool(self.prerelease)

    def _key(self):
        # A release has higher precedence than any of its pre-releases.
        return (self.major, self.minor, self.patch, 0 if self.prerelease else 1, self.prerelease)

    def __eq__(self, other):
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() == other._key()

    def __lt__(self, other):
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() < other._key()

    def __hash__(self):
        return hash(self._key())

    def __str__(self):
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += "-" + ".".join(self.prerelease)
        if self.build:
            text += "+" + ".".join(self.build)
        return text

    def __repr__(self):
        return f"Version.parse({str(self)!r})"
