"""Every example in docs/ runs, as a reader follows the guide: every page in ONE directory, in the
order of docs/index.md (index.md first), so a page that writes what an earlier page wrote (a run
directory, a file) fails here as it would for the reader.

Per page, in document order: ```python blocks are executed in one namespace of the page's own (a
page is a tutorial, read in a fresh Python session); ```python file=NAME blocks are written to NAME;
the ``$`` lines of ```console blocks are run in a shell (``proofgym`` is this checkout's CLI).
Blocks whose info string says ``no-run`` need a GPU or a model server and are skipped; any other
fence language fails the test. Every page must be linked from the index.

While editing one page: ``DOCS_PAGES=index.md,comparing-runs.md pytest tests/test_docs.py`` runs only
those pages (still in index order, in one directory).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

DOCS = sorted((REPO / "docs").glob("*.md"))
LINK = re.compile(r"\]\(([\w.-]+\.md)\)")
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```\s*$", re.M | re.S)

DRIVER = r'''
import subprocess, sys
namespace = {"__name__": "__docs__"}
def python(code, where):
    exec(compile(code, where, "exec"), namespace)
def console(command, where):
    print(f"$ {command}", flush=True)
    proc = subprocess.run(command, shell=True)
    if proc.returncode != 0:
        sys.exit(f"{where}: `{command}` exited {proc.returncode}")
'''


def blocks(page: Path) -> list[tuple[str, str, int]]:
    text = page.read_text()
    return [(m.group(1).strip(), m.group(2), text.count("\n", 0, m.start()) + 2)
            for m in FENCE.finditer(text)]


def driver_for(page: Path) -> str:
    # the page runs under the guard a script needs: the verifier pool's worker processes
    # re-import the script that starts them (a reader's session, having no script, needs none)
    lines = ["pass"]
    python = f"{sys.executable} -m proofgym"
    for info, body, line in blocks(page):
        where = f"{page.name}:{line}"
        words = info.split()
        lang, options = (words[0] if words else ""), words[1:]
        if "no-run" in options:
            continue
        if lang == "python" and options and options[0].startswith("file="):
            lines.append(f"open({options[0][5:]!r}, 'w').write({body!r})")
        elif lang == "python":
            lines.append(f"python({body!r}, {where!r})")
        elif lang == "console":
            for command in (c[2:] for c in body.splitlines() if c.startswith("$ ")):
                # the checkout's CLI, and PYTHONPATH=. keeps this checkout importable
                command = re.sub(r"(^|\s)proofgym ", rf"\1{python} ", command)
                command = command.replace("PYTHONPATH=. ", f"PYTHONPATH=.:{REPO} ")
                lines.append(f"console({command!r}, {where!r})")
        else:
            raise AssertionError(f"{where}: fence {info!r} is neither python, python file=NAME, console, "
                                 "nor marked no-run; the docs test cannot check it")
    return "\n".join([DRIVER, 'if __name__ == "__main__":', *(f"    {line}" for line in lines)])


def test_the_docs_exist_and_have_runnable_examples():
    assert {p.name for p in DOCS} >= {"index.md", "writing-a-task.md", "running-an-eval.md",
                                      "training-with-trl.md", "sandboxed-tasks.md"}
    runnable = [b for p in DOCS for b in blocks(p) if "no-run" not in b[0]]
    skipped = [b for p in DOCS for b in blocks(p) if "no-run" in b[0]]
    assert len(runnable) >= 15 and len(skipped) <= 3


def index_order() -> list[Path]:
    """index.md, then the pages in the order the index first links them."""
    order = ["index.md"]
    for name in LINK.findall((REPO / "docs" / "index.md").read_text()):
        if name not in order:
            order.append(name)
    return [REPO / "docs" / name for name in order]


def test_the_index_links_every_page_and_only_pages_that_exist():
    ordered = index_order()
    assert {p.name for p in ordered} == {p.name for p in DOCS}, (
        "docs/index.md must link every page of docs/ (the docs test follows the guide in its order): "
        f"unlinked {sorted({p.name for p in DOCS} - {p.name for p in ordered})}, "
        f"missing {sorted({p.name for p in ordered} - {p.name for p in DOCS})}")


# No xdist group: the walk is the suite's longest test, and in the Ray tests' group (for the one
# page that starts a local Ray cluster) it ran only after them, on one worker. A local cluster
# has its own session directory and ports: this page's ran beside tests/rollout/test_ray.py's
# cluster and tests/cli/test_ray_fit.py's local one, both passing.
@pytest.mark.slow
def test_every_page_runs_in_one_directory_in_index_order(tmp_path):
    chosen = {n.strip() for n in os.environ.get("DOCS_PAGES", "").split(",") if n.strip()}
    pages = [p for p in index_order() if not chosen or p.name in chosen]
    assert pages, f"DOCS_PAGES={os.environ['DOCS_PAGES']!r} names no page of docs/"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}", "COLUMNS": "120"}
    for page in pages:
        driver = tmp_path / f".driver-{page.stem}.py"
        driver.write_text(driver_for(page))
        proc = subprocess.run([sys.executable, driver.name], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=600)
        assert proc.returncode == 0, (f"{page.name} (after {[p.name for p in pages[:pages.index(page)]]} "
                                      f"in the same directory)\nstdout:\n{proc.stdout[-4000:]}\n"
                                      f"stderr:\n{proc.stderr[-4000:]}")
