"""sluglib: URL slugs."""

from sluglib.slugify import slugify
from sluglib.unique import unique_slug

__all__ = ["slugify", "unique_slug"]
