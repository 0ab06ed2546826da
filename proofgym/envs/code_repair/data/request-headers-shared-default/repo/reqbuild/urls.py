"""Query strings."""

from urllib.parse import urlencode, urlsplit, urlunsplit


def with_query(url, params=None):
    """``url`` with ``params`` appended to its query string (existing parameters are kept)."""
    if not params:
        return url
    parts = urlsplit(url)
    extra = urlencode(sorted(params.items()), doseq=True)
    query = f"{parts.query}&{extra}" if parts.query else extra
    return urlunsplit(parts._replace(query=query))
