"""Mutant layouts are a function of their inputs and seed alone, in any process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

#: Every bundled task's layouts for three seeds, hashed (run in a fresh interpreter).
_FINGERPRINT = """
import hashlib, random
from proofgym.envs.code_repair import code_repair_tasks
from proofgym.verify.sandboxed.mutants import build_layout
h = hashlib.sha256()
for task in code_repair_tasks():
    visible = {p: (task.repo / p).read_bytes() for p in task.test_files if p not in task.hidden_files}
    for seed in range(3):
        layout = build_layout({**visible, **task.hidden_files}, task.test_ids,
                              rng=random.Random(seed), mutate_files=list(task.hidden_files))
        h.update(repr(sorted((k, bytes(v)) for k, v in layout.files.items())).encode())
        h.update(repr((layout.run, layout.mutant)).encode())
print(h.hexdigest())
"""


def _fingerprint(hash_seed: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", _FINGERPRINT], env=env, capture_output=True,
                          text=True, timeout=120, check=True)
    return proc.stdout.strip()


def test_layouts_do_not_depend_on_the_process_string_hashing():
    """Gradings of one trajectory run in different worker processes, each with its own string
    hashing: the same seed must give the same mutants there (it did not while candidate words
    came out of a set: the money-split and slugify tasks differed under hash seeds 1 and 2)."""
    assert _fingerprint("1") == _fingerprint("2")


def test_a_loop_over_a_module_constant_with_other_constants_after_it():
    """boltons' tests/test_urlutils.py loops over a module-level list with further module
    assignments below it: the loop's source lookup compared each later name with the list it had
    already found (AttributeError: 'List' object has no attribute 'id'), so every grading that
    included the file raised instead of grading."""
    from proofgym.verify.sandboxed.mutants import build_layout

    source = (b"CASES = [1, 2]\nOTHER = 3\nCASES_TOO = CASES\n\n\n"
              b"def test_loop():\n    for c in CASES:\n        assert c > 0\n")
    layout = build_layout({"tests/test_m.py": source}, ["tests/test_m.py::test_loop"])
    assert layout is not None


def test_a_batch_s_canaries_are_the_same_mutants_built_alone():
    """A batch's canaries (``mutants_only``) are built for the first tests, in the drawn order,
    that have a mutant, until there are enough: each is the mutant a full layout builds for
    that test (same seed), no real test is laid out, and no mutant of the rest is built."""
    import ast

    from proofgym.verify.sandboxed.mutants import build_layout

    source = b"def double(x):\n    return 2 * x\n\n\n" + b"".join(
        b"def test_%d():\n    assert double(%d) == %d\n\n\n" % (i, i, 2 * i) for i in range(1, 7))
    ids = [f"tests/test_m.py::test_{i}" for i in (4, 1, 6, 2, 5, 3)]

    def mutants(layout) -> dict[str, str]:  # real id -> the mutated assert
        out = {}
        for gen, of in layout.mutant.items():
            tree = ast.parse(layout.files[gen.split("::", 1)[0]])
            out[of] = next(ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Assert))
        return out

    full = build_layout({"tests/test_m.py": source}, ids, mutant_seed=b"s")
    some = build_layout({"tests/test_m.py": source}, ids, mutant_seed=b"s", mutants_only=2)
    assert len(full.mutant) == 6 and len(full.real) == 6
    assert some.real == {} and sorted(some.mutant.values()) == sorted(ids[:2])
    assert len(some.files) == len(some.run) == 2
    assert mutants(some) == {t: m for t, m in mutants(full).items() if t in ids[:2]}


def test_a_file_listed_again_is_listed_by_its_content():
    """Listings are kept by path and content: the same file lists the same, a changed one anew
    (an agent's edit of a test file between two gradings), and a caller's list is its own."""
    from proofgym.verify.sandboxed.mutants import list_tests

    first = list_tests("tests/test_c.py", b"def test_a():\n    assert 1\n")
    first.clear()
    assert [i.name for i in list_tests("tests/test_c.py", b"def test_a():\n    assert 1\n")] == ["test_a"]
    assert [i.name for i in list_tests("tests/test_c.py", "def test_b():\n    assert 1\n")] == ["test_b"]


def test_ast_work_pauses_the_collector_and_gives_it_back_as_it_was():
    """Building a layout runs with the cyclic collector off (its passes over the process were
    most of a grading's host CPU) and turns it back on after, nested or not; a caller that had
    it off keeps it off."""
    import gc

    from proofgym.verify.sandboxed.mutants import build_layout
    from proofgym.verify.sandboxed.mutants.listing import ast_work

    seen = []
    source = b"def test_a():\n    assert 1 + 1 == 2\n"
    assert gc.isenabled()
    with ast_work():
        seen.append(gc.isenabled())
        build_layout({"tests/test_g.py": source}, ["tests/test_g.py::test_a"], mutant_seed=b"g")
        seen.append(gc.isenabled())
    assert seen == [False, False] and gc.isenabled()
    gc.disable()
    try:
        build_layout({"tests/test_g.py": source}, ["tests/test_g.py::test_a"], mutant_seed=b"g")
        assert not gc.isenabled()
    finally:
        gc.enable()
