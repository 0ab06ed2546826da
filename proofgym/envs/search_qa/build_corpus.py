"""Freeze the SearchQA corpus from a Debian ``Packages`` index (run by hand; pinned and offline).

    apt-cache dumpavail > /tmp/Packages   # or: lz4cat /var/lib/apt/lists/*bookworm_main*Packages.lz4
    python -m proofgym.envs.search_qa.build_corpus /tmp/Packages

The shipped ``data/corpus.jsonl.gz`` was built from Debian 12 "bookworm" main, amd64 (the
``apt-cache dumpavail`` of these machines). Selection is a pure function of the input: every
package whose name hashes into ``1/STRIDE`` of the space, plus the first dependency of each
selected package (so two-hop questions stay inside the corpus). Debian package metadata is
distributed under the DFSG-free licenses of each package (see docs/search-qa.md).
"""

from __future__ import annotations

import gzip
import hashlib
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson

STRIDE = 9
FIELDS = ("Package", "Source", "Version", "Installed-Size", "Maintainer", "Architecture",
          "Depends", "Recommends", "Suggests", "Section", "Priority", "Homepage", "Tag",
          "Description")
OUT = Path(__file__).with_name("data") / "corpus.jsonl.gz"
_DEP_NAME = re.compile(r"^\s*([a-z0-9][a-z0-9+.-]*)")


def stanzas(text: str) -> Iterator[dict[str, str]]:
    """The ``Field: value`` records of a Packages file (continuation lines joined by spaces)."""
    for block in text.split("\n\n"):
        record: dict[str, str] = {}
        key = None
        for line in block.splitlines():
            if line.startswith((" ", "\t")) and key is not None:
                record[key] += " " + line.strip()
            elif ":" in line:
                key, _, value = line.partition(":")
                record[key] = value.strip()
        if record.get("Package"):
            yield record


def first_dependency(depends: str) -> str | None:
    """The package named first in a ``Depends`` field (the first alternative of the first item)."""
    match = _DEP_NAME.match(depends.split(",")[0].split("|")[0]) if depends else None
    return match.group(1) if match else None


def build(text: str) -> list[dict[str, str]]:
    packages: dict[str, dict[str, str]] = {}
    for record in stanzas(text):
        packages.setdefault(record["Package"], record)  # the first stanza of a name wins
    chosen = {name for name in packages
              if int(hashlib.sha256(name.encode()).hexdigest(), 16) % STRIDE == 0}
    for name in sorted(chosen):
        dep = first_dependency(packages[name].get("Depends", ""))
        if dep in packages:
            chosen.add(dep)
    return [{k: packages[name][k] for k in FIELDS if k in packages[name]}
            for name in sorted(chosen)]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    docs = build(Path(argv[0]).read_text(encoding="utf-8", errors="replace"))
    payload = b"".join(orjson.dumps(d) + b"\n" for d in docs)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz:
        gz.write(payload)
    print(f"{len(docs)} documents, {len(payload)} bytes, {OUT.stat().st_size} compressed -> {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
