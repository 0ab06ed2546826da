"""Slugs that do not collide with existing ones."""

from sluglib.slugify import slugify


def unique_slug(text, existing, separator="-"):
    """``slugify(text)``, with ``-2``, ``-3``, ... appended until it is not in ``existing``."""
    base = slugify(text, separator) or "item"
    candidate, n = base, 1
    while candidate in existing:
        n += 1
        candidate = f"{base}{separator}{n}"
    return candidate
