"""Synthesis' suite runner: a project's pytest suite, run inside a sandbox, with per-test outcomes.

This file is a program, not a module of proofgym: :mod:`proofgym.tasks.synth.testrun` runs its
source with the sandbox's interpreter (``python3 -I -B -c SOURCE FD``); it uses the standard
library and pytest only. ``argv[1]`` is the result descriptor, the job (JSON) is on stdin: per
variant, files to write and pytest arguments; each variant runs in a forked process, its files
restored after (a file it adds: removed). One JSON line per variant goes to the descriptor.
With ``trace`` or a variant's ``watch``, a profile hook records the project functions each test
calls and the call path from a test down to a watched (buggy) function, for the bug reports.
"""

import contextlib
import json
import os
import re
import reprlib
import select
import signal
import sys
import threading
import time

fd = int(sys.argv[1])
shorten = reprlib.Repr()
shorten.maxstring = shorten.maxother = 40
ADDRESS = re.compile(r"\s?(object )?at 0x[0-9a-f]+")
job = json.loads(sys.stdin.read())
for extra in job["path"]:
    sys.path.insert(0, os.path.join("/workspace", extra))
sys.path.append("/workspace")
import pytest  # noqa: E402 (imported once the project's paths are set)

ROOT = "/workspace/"
TESTS = tuple(ROOT + t for t in job["test_roots"])

def emit(obj):
    view = memoryview((json.dumps(obj) + "\n").encode())
    while view:
        view = view[os.write(fd, view):]

def run_variant(variant, out_fd):
    for path, text in variant["write"].items():
        os.makedirs(os.path.dirname(os.path.join(ROOT, path)), exist_ok=True)
        with open(os.path.join(ROOT, path), "w", encoding="utf-8") as f:
            f.write(text)
    results, calls, collect, paths = {}, {}, set(), {}
    state = {"current": None}
    watch = [(ROOT + w[0], w[1], w[2]) for w in variant.get("watch", ())]

    def profile(frame, event, arg):
        if event == "call":
            code = frame.f_code
            name = code.co_filename
            if name.startswith(ROOT) and not name.startswith(TESTS):
                if job["trace"]:
                    key = f"{name[len(ROOT):]}:{code.co_firstlineno}:{code.co_name}"
                    current = state["current"]
                    (calls.setdefault(current, set()) if current else collect).add(key)
                if watch and state["current"] and state["current"] not in paths:
                    for file, func, line in watch:
                        if name == file and code.co_name == func and code.co_firstlineno <= \
                                line <= max(n or 0 for _, _, n in code.co_lines()):
                            found = call_path(frame)
                            if found is not None:
                                paths[state["current"]] = found
                            break

    def call_path(frame):
        # the project frames from the one a test (or its fixture) called down to the bug's
        chain = []
        while frame is not None and frame.f_code.co_filename.startswith(ROOT) and \
                not frame.f_code.co_filename.startswith(TESTS):
            chain.append(frame)
            frame = frame.f_back
        if frame is None or not frame.f_code.co_filename.startswith(TESTS):
            return None
        entry = chain[-1]
        code = entry.f_code
        names = list(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
        qual = getattr(code, "co_qualname", code.co_name)
        skip = 1 if names and names[0] in ("self", "cls") and "." in qual else 0
        # the function object, to leave out the arguments that are its defaults
        func = entry.f_globals.get(code.co_name)
        if skip and names and names[0] in entry.f_locals:
            owner = entry.f_locals[names[0]]
            func = getattr(owner if names[0] == "cls" else type(owner), code.co_name, None)
        func = getattr(func, "__func__", func)
        if getattr(func, "__code__", None) is not code:
            func = None
        defaults = dict(zip(code.co_varnames[code.co_argcount - len(func.__defaults__ or ()):],
                            func.__defaults__ or (), strict=False)) if func is not None else {}
        defaults.update(getattr(func, "__kwdefaults__", None) or {})
        args, omitted = [], False
        for i, arg in enumerate(names[skip:], skip):
            value = entry.f_locals.get(arg, None)
            if arg in defaults and defaults[arg] is value:
                omitted = True
                continue
            try:
                text = ADDRESS.sub("", shorten.repr(value))
            except Exception:
                text = "..."
            args.append(text if i < code.co_argcount and not omitted else f"{arg}={text}")
        return {"path": [getattr(f.f_code, "co_qualname", f.f_code.co_name) for f in reversed(chain)][:12],
                "modules": [f.f_code.co_filename[len(ROOT):] for f in reversed(chain)][:12],
                "args": args}

    class Recorder:
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_protocol(self, item, nextitem):
            state["current"] = item.nodeid
            yield
            state["current"] = None

        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_makereport(self, item, call):
            outcome = yield
            report = outcome.get_result()
            entry = results.setdefault(item.nodeid, {"outcome": "passed"})
            if report.failed:
                entry["outcome"] = "failed" if report.when == "call" else "error"
                if call.excinfo is not None and "exception" not in entry:
                    entry["exception"] = call.excinfo.typename
                    entry["message"] = str(call.excinfo.value)[:1000]
            elif report.skipped and entry["outcome"] == "passed":
                entry["outcome"] = "skipped"

    if job["trace"] or watch:
        sys.setprofile(profile)
        threading.setprofile(profile)
    code = pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir=/workspace", "-c",
                        job["config"], "--import-mode=append", "-o", "addopts=", "--tb=no",
                        "--continue-on-collection-errors",
                        "-W", "ignore", *variant["args"]], plugins=[Recorder()])
    sys.setprofile(None)
    data = json.dumps({"exit": int(code), "results": results,
                       "calls": {k: sorted(v) for k, v in calls.items()},
                       "collect": sorted(collect), "paths": paths}).encode()
    view = memoryview(data)
    while view:
        view = view[os.write(out_fd, view):]

for index, variant in enumerate(job["variants"]):
    originals = {}
    for path in variant["write"]:
        if not os.path.exists(os.path.join(ROOT, path)):
            originals[path] = None  # a file the variant adds: removed after it
            continue
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            originals[path] = f.read()
    r, w = os.pipe()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.setpgid(0, 0)
        sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (open until os._exit)
        try:
            run_variant(variant, w)
        finally:
            os._exit(0)
    os.close(w)
    chunks, status = [], "ok"
    deadline = t0 + job["timeout_s"]
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            status = "timeout"
            break
        ready, _, _ = select.select([r], [], [], left)
        if ready:
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    for target in (-pid, pid):
        with contextlib.suppress(OSError):
            os.kill(target, signal.SIGKILL)
    os.waitpid(pid, 0)
    os.close(r)
    for path, text in originals.items():
        if text is None:
            with contextlib.suppress(OSError):
                os.remove(os.path.join(ROOT, path))
            continue
        with open(os.path.join(ROOT, path), "w", encoding="utf-8") as f:
            f.write(text)
    try:
        data = json.loads(b"".join(chunks)) if status == "ok" else None
    except ValueError:
        data, status = None, "crashed"
    emit({"index": index, "status": status, "seconds": time.monotonic() - t0, "data": data})
os.close(fd)
