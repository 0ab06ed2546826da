"""One TLS context per process for the library's HTTP clients (sdist downloads, remote envs)."""

from __future__ import annotations

import functools
import os
import ssl


def tls_context() -> ssl.SSLContext:
    """httpx's default TLS context (its CA bundle, or ``$SSL_CERT_FILE`` / ``$SSL_CERT_DIR``),
    made once per setting: an ``httpx`` client made without one builds its own, and loading the
    CA bundle is some 40 ms of CPU, paid on every client (plain-HTTP ones too)."""
    return _context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.cache
def _context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    import httpx  # the env's settings above are what httpx reads

    return httpx.create_ssl_context()
