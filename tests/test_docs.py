"""Every example in docs/ runs.

Per page, in a fresh directory and in document order: ```python blocks are executed in one shared
namespace (a page is a tutorial); ```python file=NAME blocks are written to NAME; the ``$`` lines of
```console blocks are run in a shell (``proofgym`` is this checkout's CLI). Blocks whose info string
says ``no-run`` need a GPU or a model server and are skipped; any other fence language fails the test.
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
    lines = [DRIVER]
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
    return "\n".join(lines)


def test_the_docs_exist_and_have_runnable_examples():
    assert {p.name for p in DOCS} >= {"index.md", "writing-a-task.md", "running-an-eval.md",
                                      "training-with-trl.md", "sandboxed-tasks.md"}
    runnable = [b for p in DOCS for b in blocks(p) if "no-run" not in b[0]]
    skipped = [b for p in DOCS for b in blocks(p) if "no-run" in b[0]]
    assert len(runnable) >= 15 and len(skipped) <= 3


#: pages that start a local Ray cluster run on the test worker that runs tests/rollout/test_ray.py
_RAY_PAGES = {"scaling-out.md"}


@pytest.mark.parametrize("page", [pytest.param(p, marks=pytest.mark.xdist_group("ray"))
                                  if p.name in _RAY_PAGES else p for p in DOCS], ids=[p.name for p in DOCS])
@pytest.mark.slow
def test_every_example_on_the_page_runs(page, tmp_path):
    (tmp_path / "driver.py").write_text(driver_for(page))
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}", "COLUMNS": "120"}
    proc = subprocess.run([sys.executable, "driver.py"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, (f"{page.name}\nstdout:\n{proc.stdout[-4000:]}\n"
                                  f"stderr:\n{proc.stderr[-4000:]}")
