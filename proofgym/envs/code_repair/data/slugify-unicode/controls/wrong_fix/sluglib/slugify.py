"""Turning titles into URL slugs."""

import re

_NOT_ALNUM = re.compile(r"[^a-z0-9]+")
_ACCENTS = str.maketrans("àáâäãçèéêëìíîïñòóôöõùúûüý", "aaaaaceeeeiiiinooooouuuuy")


def slugify(text, separator="-", max_length=None):
    """A lowercase ASCII slug of ``text``.

    Accented letters become their base letter (``"é" -> "e"``); every run of other characters
    becomes one ``separator``. With ``max_length`` the slug is cut to at most that many characters
    without leaving a separator at the end.
    """
    ascii_text = text.lower().translate(_ACCENTS).encode("ascii", "ignore").decode("ascii")
    slug = _NOT_ALNUM.sub(separator, ascii_text).strip(separator)
    if max_length is not None:
        slug = slug[:max_length].rstrip(separator)
    return slug
