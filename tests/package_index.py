"""A real package index on loopback for tests: PyPI's JSON API (``/pypi/NAME/json``) and file
URLs (``/files/NAME``), served by ``http.server`` from a table of sdists, and made the
process's index (``PROOFGYM_PYPI``) with a fresh cache (``PROOFGYM_CACHE``) by :func:`serving`.

With ``barrier`` set, a file download waits (up to 5 s) until a second one has been in flight,
so ``most`` (downloads seen at once) shows whether downloads ran in parallel without timing
anything; ``requests`` counts every request, ``paths`` lists them in the order they came."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any


class PackageIndex:
    def __init__(self, releases: Mapping[str, Mapping[str, list[dict[str, Any]]]],
                 files: Mapping[str, bytes]) -> None:
        """``releases``: project -> version -> its PyPI file entries (``url`` ``/files/NAME``);
        ``files``: NAME -> the file's bytes."""
        self.releases, self.files = releases, files
        self.requests = self.in_flight = self.most = 0
        self.paths: list[str] = []
        self.barrier = False
        self.cond = threading.Condition()
        index = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep the test output clean
                return

            def do_GET(self) -> None:
                index.requests += 1
                index.paths.append(self.path)
                parts = self.path.strip("/").split("/")
                if parts[0] == "pypi" and len(parts) == 3 and parts[1] in index.releases:
                    self._send(json.dumps({"releases": index.releases[parts[1]]}).encode())
                elif parts[0] == "files" and len(parts) == 2 and parts[1] in index.files:
                    with index.cond:
                        index.in_flight += 1
                        index.most = max(index.most, index.in_flight)
                        index.cond.notify_all()
                        if index.barrier:
                            index.cond.wait_for(lambda: index.most >= 2, timeout=5)
                    try:
                        self._send(index.files[parts[1]])
                    finally:
                        with index.cond:
                            index.in_flight -= 1
                else:
                    self.send_error(404)

            def _send(self, body: bytes) -> None:
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @classmethod
    def of_sdists(cls, sdists: Mapping[str, bytes]) -> PackageIndex:
        """An index of sdists named ``PROJECT-VERSION.tar.gz`` -> bytes, each its project's
        release of that version."""
        import hashlib

        releases: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for filename, data in sdists.items():
            project, _, version = filename.removesuffix(".tar.gz").rpartition("-")
            releases.setdefault(project, {})[version] = [{
                "packagetype": "sdist", "url": f"/files/{filename}",
                "digests": {"sha256": hashlib.sha256(data).hexdigest()}}]
        return cls(releases, dict(sdists))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def serving(index: PackageIndex, cache: Path, monkeypatch) -> Iterator[PackageIndex]:
    """``index`` as this test's package index, with ``cache`` as its proofgym cache."""
    monkeypatch.setenv("PROOFGYM_PYPI", index.url)
    monkeypatch.setenv("PROOFGYM_CACHE", str(cache))
    try:
        yield index
    finally:
        index.close()
