"""The trusted supervisor: pid 1 of a sandbox, the only end of the control channel inside it.

This file is a program, not a module of proofgym: the host passes its source to the sandbox's
interpreter (``python3 -I -S -c SOURCE``), so it uses the standard library only and imports
nothing of proofgym. See :mod:`proofgym.runtimes.sandbox.shell` for the host side.

Why it cannot be impersonated: the control channel is the supervisor's stdin and stdout, moved
to close-on-exec descriptors before anything else runs, so no agent process ever holds them;
``PR_SET_DUMPABLE=0`` keeps the agent (same uid, no capabilities) out of ``/proc/1/fd`` and
``ptrace``; the kernel does not deliver SIGKILL/SIGSTOP, or any signal without a handler, from
inside a pid namespace to its init. Each ``bash`` call is a fresh ``bash -c`` whose exit status
comes from ``waitpid``; when it returns, every other process of the namespace is killed
(``kill(-1, SIGKILL)`` from init) and reaped, so nothing of the agent outlives a call.
The file tools are done here, never through the agent's shell, resolving each path component
relative to a directory descriptor with ``O_NOFOLLOW``.

It is one file because it is sent to the sandbox as one source (its parts: running commands,
parsing the state they leave, the file tools, the request loop).

Frames, both ways: 4-byte big-endian length, then a ``marshal``-ed dict of str/bytes/int/float/
bool/None/list/tuple (the host runs the same interpreter, so the format matches).
"""

import _signal as signal
import marshal
import os
import select
import stat
import time

MAGIC = b"PGSV1\n"
WORKSPACE = "/workspace"
BASH = "/usr/bin/bash"
MAX_STATE = 256 * 1024
#: Environment names a saved state may not set: they would run code in the next call's shell
#: before its command (BASH_ENV, exported functions), change how bash parses it, or make a
#: program the next command starts run code it was not asked to (a C library, interpreter or git
#: start-up hook). Plain data (``PATH`` included: it runs nothing by itself) carries over.
_UNSAFE_ENV = ("BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "LD_PRELOAD", "LD_AUDIT",
               "PROMPT_COMMAND", "BASH_XTRACEFD", "GLOBIGNORE", "CDPATH", "SHLVL", "_",
               "TMOUT", "BASH_COMPAT", "BASH_LOADABLES_PATH", "EXECIGNORE", "POSIXLY_CORRECT",
               # the C library's hooks (code or parsers loaded by every program)
               "GCONV_PATH", "GLIBC_TUNABLES", "LOCPATH", "NLSPATH", "HOSTALIASES",
               "RES_OPTIONS", "LOCALDOMAIN", "TERMINFO", "TERMINFO_DIRS", "TERMCAP",
               # other interpreters' start-up hooks
               "PERL5OPT", "PERL5LIB", "PERLLIB", "PERL5DB", "RUBYOPT", "RUBYLIB",
               "NODE_OPTIONS", "NODE_PATH", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS",
               "JDK_JAVA_OPTIONS", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_COUNT",
               "GIT_CONFIG_PARAMETERS", "GIT_EXEC_PATH", "GIT_EXTERNAL_DIFF")
#: Whole families a saved state may not set: the dynamic loader's (``LD_LIBRARY_PATH`` loads the
#: agent's libraries into the next shell as it starts, before it has its command), glibc's
#: allocator hooks, and the variables Python and pytest honour at start-up (``PYTHONPATH``'s
#: ``sitecustomize``, ``PYTHONSTARTUP``, ``PYTEST_PLUGINS``). Such a name keeps the sandbox's own
#: value from call to call (``LD_LIBRARY_PATH``, ``PYTHONDONTWRITEBYTECODE``) or stays unset.
_UNSAFE_PREFIXES = ("LD_", "MALLOC_", "PYTHON", "PYTEST_", "GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_")

# The next call's shell is started (in the working directory $1) as soon as the previous call
# ends, and waits for its command on fd 4, so a call does not wait for bash to start. On exit
# (also `exit N` inside the command) the working directory and exported variables are written
# to fd 3; the supervisor parses them as data, never as code. What the saving prints is dropped:
# it is not the command's output. (`export -p` and `printf` are builtins: saving forks nothing.)
# The shell first makes itself (and so every process of the agent) the OOM killer's first
# choice, before the supervisor: files on a tmpfs are charged to the sandbox but held by no
# process. It does so itself because only it is dumpable (the supervisor's /proc view of a child
# it just spawned could still be root-owned), and nothing of the agent runs before it.
WRAPPER = r"""builtin echo 1000 2>/dev/null >/proc/self/oom_score_adj
builtin cd -- "$1" 2>/dev/null || builtin cd /workspace
builtin trap '{ builtin printf "%s\0" "$PWD"; builtin export -p; } >&3 2>/dev/null' EXIT
IFS= builtin read -r -d '' -u 4 __pg_cmd
builtin exec 4<&-
builtin set --
builtin eval "$__pg_cmd"
"""


def _prctl_not_dumpable():
    # _ctypes, not ctypes (nor signal, below, but _signal): the packages import enum and
    # collections, a third of the interpreter's start-up, which every sandbox boot pays
    import _ctypes

    class Int(_ctypes._SimpleCData):
        _type_ = "i"

    class Function(_ctypes.CFuncPtr):
        _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
        _restype_ = Int

    class Libc:
        _handle = _ctypes.dlopen(None)

    prctl = Function(("prctl", Libc()))
    if prctl(4, 0, 0, 0, 0) != 0 or prctl(3, 0, 0, 0, 0) != 0:  # PR_SET/GET_DUMPABLE
        raise OSError(_ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


class Channel:
    def __init__(self, rfd, wfd):
        self.rfd, self.wfd = rfd, wfd

    def _exact(self, n):
        parts, got = [], 0
        while got < n:
            chunk = os.read(self.rfd, min(n - got, 1 << 20))
            if not chunk:
                raise EOFError
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)

    def recv(self):
        return marshal.loads(self._exact(int.from_bytes(self._exact(4), "big")))

    def send(self, obj):
        data = marshal.dumps(obj)
        view = memoryview(len(data).to_bytes(4, "big") + data)
        while view:
            view = view[os.write(self.wfd, view):]


# ----------------------------------------------------------------------- processes
def reap_all(kill):
    """Reap every child; with ``kill`` first SIGKILL every other process of the namespace and
    wait until none is left (orphans are re-parented to us, so ECHILD means none)."""
    while True:
        if kill:
            _kill_all()
        try:
            pid, _ = os.waitpid(-1, 0 if kill else os.WNOHANG)
        except ChildProcessError:
            return
        if not kill and pid == 0:
            return


def _kill_all():
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:  # nothing left to kill
        return False
    return True


def _write_all(fd, data):
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view):]
    except OSError:
        return False
    return True


def _any_other():
    """Whether any process of the namespace but us exists (signal 0 probes without killing)."""
    try:
        os.kill(-1, 0)
    except ProcessLookupError:
        return False
    return True


def live_others():
    """Processes of the namespace other than us that are not zombies."""
    n = 0
    for name in os.listdir("/proc"):
        if not name.isdigit() or name == "1":
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"Z", b"X"):
            n += 1
    return n


class Job:
    """A started shell waiting for its command."""

    def __init__(self, pid, out_r, st_r, cmd_w, note):
        self.pid, self.out_r, self.st_r, self.cmd_w, self.note = pid, out_r, st_r, cmd_w, note
        self.pidfd = os.pidfd_open(pid)

    def close(self):
        for fd in (self.out_r, self.st_r, self.cmd_w, self.pidfd):
            if fd >= 0:
                os.close(fd)


class Runner:
    def __init__(self):
        self.base_env = {k: v for k, v in os.environb.items()}
        self.cwd = WORKSPACE.encode()
        self.env = dict(self.base_env)
        self.job = None
        self._parsed = (None, None)  # the last exports text and the environment it gave

    def _spawn(self, out_w, st_w, cmd_r):
        return os.posix_spawn(
            BASH, [b"bash", b"--noprofile", b"--norc", b"-c", WRAPPER.encode(), b"bash", self.cwd],
            self.env,
            file_actions=[(os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
                          (os.POSIX_SPAWN_DUP2, out_w, 1), (os.POSIX_SPAWN_DUP2, out_w, 2),
                          (os.POSIX_SPAWN_DUP2, st_w, 3), (os.POSIX_SPAWN_DUP2, cmd_r, 4)],
            setpgroup=0,  # its own group (not a session: see seccomp.filter_program)
            setsigdef=(signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGTERM, signal.SIGHUP,
                       signal.SIGQUIT, signal.SIGCHLD, signal.SIGUSR1, signal.SIGUSR2),
            setsigmask=())

    def prepare(self):
        """Start the next call's shell (with the saved working directory and variables)."""
        if self.job is not None:
            return
        out_r, out_w = os.pipe()
        st_r, st_w = os.pipe()
        cmd_r, cmd_w = os.pipe()
        note = None
        try:
            try:
                pid = self._spawn(out_w, st_w, cmd_r)
            except OSError as exc:  # e.g. a saved environment too large to exec: start clean
                note = (f"the saved working directory and variables could not be restored ({exc}); "
                        "they were reset")
                self.cwd, self.env = WORKSPACE.encode(), dict(self.base_env)
                pid = self._spawn(out_w, st_w, cmd_r)
        except OSError:
            for fd in (out_r, st_r, cmd_w):
                os.close(fd)
            raise
        finally:
            for fd in (out_w, st_w, cmd_r):
                os.close(fd)
        self.job = Job(pid, out_r, st_r, cmd_w, note)

    def discard(self):
        """Forget the waiting shell (it was killed with every other process)."""
        if self.job is not None:
            self.job.close()
            self.job = None

    def run(self, req):
        timeout, max_out = req["timeout"], req["max_out"]
        deadline = _now() + timeout
        self.prepare()
        if select.select([self.job.pidfd], [], [], 0)[0]:  # the waiting shell died: start anew
            os.waitpid(self.job.pid, 0)
            self.discard()
            self.prepare()
        job, self.job = self.job, None
        try:
            return self._run(job, req["cmd"], deadline, max_out)
        finally:
            job.close()

    def _run(self, job, command, deadline, max_out):
        _write_all(job.cmd_w, command + b"\0")  # if the shell is gone, its status says so
        os.close(job.cmd_w)
        job.cmd_w = -1
        out_r, st_r, pid, pidfd = job.out_r, job.st_r, job.pid, job.pidfd
        out, state = bytearray(), bytearray()
        total = 0
        timed_out = exceeded = False
        status = None
        poll = select.poll()
        for fd in (out_r, st_r, pidfd):
            poll.register(fd, select.POLLIN)
        open_fds = {out_r, st_r}
        while status is None:
            remaining = deadline - _now()
            if remaining <= 0:
                timed_out = True
                break
            for fd, _ev in poll.poll(remaining * 1000):
                if fd == pidfd:
                    status = os.waitpid(pid, 0)[1]
                    continue
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    poll.unregister(fd)
                    open_fds.discard(fd)
                    continue
                if fd == out_r:
                    total += len(chunk)
                    room = max_out - len(out)
                    out += chunk[:room]
                    if total > max_out:
                        exceeded = True
                elif len(state) < MAX_STATE:
                    state += chunk
            if exceeded:
                break
        stragglers = 0
        if status is None:  # timeout or too much output: the command itself is killed too
            reap_all(kill=True)
        else:
            reap_all(kill=False)
            if _any_other():
                stragglers = live_others()
                reap_all(kill=True)
        # every writer is gone: what is left in the pipes is bounded by their buffers
        for fd in list(open_fds):
            while True:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                if fd == out_r:
                    total += len(chunk)
                    out += chunk[: max(0, max_out - len(out))]
                    exceeded = exceeded or total > max_out
                elif len(state) < MAX_STATE:
                    state += chunk
        if not timed_out and not exceeded:
            self._save_state(bytes(state))
        return {"out": bytes(out), "status": status, "timed_out": timed_out, "exceeded": exceeded,
                "stragglers": stragglers, "note": job.note}

    def _save_state(self, data):
        cwd, sep, exports = data.partition(b"\0")
        if not sep or not cwd.startswith(b"/"):
            return  # the command did not leave a state (killed, or fd 3 closed): keep the last
        if exports != self._parsed[0]:  # parsed once per distinct text (most calls change none)
            env = dict(self.base_env)
            for name, value in parse_exports(exports):
                if _valid_name(name) and _carried(name.decode()):
                    env[name] = value
            self._parsed = (exports, env)
        self.cwd, self.env = cwd, dict(self._parsed[1])


def _carried(name):
    """Whether an exported variable may carry over to the next call (it is plain data)."""
    return name not in _UNSAFE_ENV and not name.startswith(_UNSAFE_PREFIXES)


_C_ESCAPES = {ord("a"): 7, ord("b"): 8, ord("e"): 27, ord("E"): 27, ord("f"): 12, ord("n"): 10,
              ord("r"): 13, ord("t"): 9, ord("v"): 11, ord("\\"): 92, ord("'"): 39, ord('"'): 34,
              ord("?"): 63}


def _double_quoted(data, i):
    """Value of a ``"..."`` word starting after its quote: ``(bytes, index after the quote)``."""
    value, n = bytearray(), len(data)
    while i < n:
        c = data[i]
        if c == 0x5C and i + 1 < n:
            nxt = data[i + 1]
            if nxt in b'$`"\\':
                value.append(nxt)
                i += 2
                continue
            if nxt == 0x0A:
                i += 2
                continue
        elif c == 0x22:
            return bytes(value), i + 1
        value.append(c)
        i += 1
    return None, n


def _ansi_c(data, i):
    """Value of a ``$'...'`` word starting after its quote: ``(bytes, index after the quote)``."""
    value, n = bytearray(), len(data)
    while i < n:
        c = data[i]
        if c == 0x27:
            return bytes(value), i + 1
        if c != 0x5C or i + 1 >= n:
            value.append(c)
            i += 1
            continue
        nxt = data[i + 1]
        i += 2
        if nxt in _C_ESCAPES:
            value.append(_C_ESCAPES[nxt])
        elif 0x30 <= nxt <= 0x37:  # \NNN, up to three octal digits
            digits = bytes([nxt])
            while len(digits) < 3 and i < n and 0x30 <= data[i] <= 0x37:
                digits += data[i:i + 1]
                i += 1
            value.append(int(digits, 8) & 0xFF)
        elif nxt == ord("x"):
            digits = b""
            while len(digits) < 2 and i < n and data[i:i + 1] in b"0123456789abcdefABCDEF":
                digits += data[i:i + 1]
                i += 1
            value.append(int(digits or b"0", 16))
        elif nxt == ord("c") and i < n:
            value.append(data[i] & 0x1F)
            i += 1
        else:
            value += bytes([0x5C, nxt])
    return None, n


def parse_exports(data):
    """``(name, value)`` pairs from the output of bash's ``export -p``: lines
    ``declare -FLAGS NAME="VALUE"``, ``declare -FLAGS NAME=$'VALUE'`` (bash's two quotings) or
    ``declare -FLAGS NAME`` (no value: skipped). Anything else ends the parse: the text came from
    the agent's shell, so it is read as data and never trusted to be well formed."""
    pos, n = 0, len(data)
    while pos < n:
        if not data.startswith(b"declare -", pos):
            return
        space = data.find(b" ", pos + 9)
        if space < 0:
            return
        eq = data.find(b"=", space + 1)
        nl = data.find(b"\n", space + 1)
        if nl < 0:
            nl = n
        if eq < 0 or nl < eq:  # no value
            pos = nl + 1
            continue
        name = data[space + 1:eq]
        if data[eq + 1:eq + 2] == b'"':
            value, end = _double_quoted(data, eq + 2)
        elif data[eq + 1:eq + 3] == b"$'":
            value, end = _ansi_c(data, eq + 3)
        else:
            return
        if value is None or data[end:end + 1] not in (b"\n", b""):
            return
        yield name, value
        pos = end + 1


def _valid_name(name):
    return bool(name) and not name[:1].isdigit() and all(c == 95 or 48 <= c <= 57 or 65 <= c <= 90
                                                          or 97 <= c <= 122 for c in name)


def _now():
    return time.monotonic()


# ------------------------------------------------------------------------ file tools
class FileError(Exception):
    def __init__(self, kind, **extra):
        super().__init__(kind)
        self.kind, self.extra = kind, extra


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_dir(root, parts, create):
    """A descriptor of ``root/parts...``, every component opened with O_NOFOLLOW relative to
    its parent; ``create`` makes missing directories (``mkdir -p``)."""
    fd = os.dup(root)
    for part in parts:
        try:
            nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            if not create:
                os.close(fd)
                raise FileError("missing") from None
            try:
                os.mkdir(part, 0o755, dir_fd=fd)
                nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                os.close(fd)
                raise FileError("os", msg=f"{part.decode(errors='replace')}: {exc.strerror}") from None
        except OSError as exc:
            kind = "symlink" if _is_link(fd, part) else ("notdir" if exc.errno == 20 else "os")
            os.close(fd)
            raise FileError(kind, msg=exc.strerror) from None
        os.close(fd)
        fd = nfd
    return fd


def _is_link(dfd, name):
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _split(path):
    parts = [p for p in path.split(b"/") if p and p != b"."]
    if any(p == b".." for p in parts):
        raise FileError("outside")
    return parts


class Files:
    def __init__(self):
        self.root = os.open(WORKSPACE, _DIR_FLAGS & ~os.O_NOFOLLOW)

    def read(self, req):
        parts = _split(req["path"])
        if not parts:
            raise FileError("isdir")
        dfd = _open_dir(self.root, parts[:-1], create=False)
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         dir_fd=dfd)
        except FileNotFoundError:
            raise FileError("missing") from None
        except OSError as exc:
            raise FileError("symlink" if _is_link(dfd, parts[-1]) else "os", msg=exc.strerror) from None
        finally:
            os.close(dfd)
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise FileError("isdir")
            if not stat.S_ISREG(st.st_mode):
                raise FileError("notreg")
            limit = req["max"]
            if st.st_size > limit:
                raise FileError("big", size=st.st_size)
            data = bytearray()
            while len(data) <= limit:
                chunk = os.read(fd, min(1 << 20, limit + 1 - len(data)))
                if not chunk:
                    break
                data += chunk
            if len(data) > limit:
                raise FileError("big", size=len(data))
            return {"data": bytes(data)}
        finally:
            os.close(fd)

    def write(self, req):
        parts = _split(req["path"])
        if not parts:
            raise FileError("isdir")
        dfd = _open_dir(self.root, parts[:-1], create=True)
        try:
            fd = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
                         | os.O_CLOEXEC, 0o644, dir_fd=dfd)
        except OSError as exc:
            kind = "symlink" if _is_link(dfd, parts[-1]) else ("isdir" if exc.errno == 21 else "os")
            raise FileError(kind, msg=exc.strerror) from None
        finally:
            os.close(dfd)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise FileError("notreg")
            os.ftruncate(fd, 0)
            view = memoryview(req["data"])
            while view:
                view = view[os.write(fd, view):]
        except OSError as exc:
            raise FileError("os", msg=exc.strerror) from None
        finally:
            os.close(fd)
        return {}

    def list(self, req):
        fd = _open_dir(self.root, _split(req["path"]), create=False)
        try:
            entries = []
            with os.scandir(fd) as it:
                for e in it:
                    entries.append((os.fsencode(e.name), e.is_dir(follow_symlinks=False)))
            return {"entries": sorted(entries)}
        finally:
            os.close(fd)


# ----------------------------------------------------------------------------- main
def main():
    if os.getpid() != 1:  # kill(-1) outside a pid namespace of its own would hit the host
        os.write(2, b"the proofgym supervisor only runs as pid 1 of a sandbox\n")
        os._exit(2)
    # The control channel: fds 0 and 1 from the host. Move them to close-on-exec descriptors
    # and put /dev/null on 0-4, so no child ever holds them and new pipes land above 4.
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (3, 4):
        if fd != null:
            os.dup2(null, fd, inheritable=False)
    ch = Channel(os.dup(0), os.dup(1))
    for fd in (0, 1, 2):
        os.dup2(null, fd, inheritable=False)
    if null > 4:
        os.close(null)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    _prctl_not_dumpable()
    runner, files = Runner(), Files()
    os.write(ch.wfd, MAGIC)  # raw, so the host tells us from an error message of bwrap
    ch.send({"ready": True})
    runner.prepare()
    while True:
        try:
            req = ch.recv()
        except EOFError:
            return
        op = req.get("op")
        try:
            if op == "run":
                resp = runner.run(req)
            elif op == "quiesce":
                reap_all(kill=True)
                runner.discard()
                resp = {"others": live_others()}
            elif op == "tmp_usage":  # bytes held by files in /tmp (charged to the sandbox)
                st = os.statvfs("/tmp")
                resp = {"used": (st.f_blocks - st.f_bfree) * st.f_frsize}
            elif op in ("read", "write", "list"):
                resp = getattr(files, op)(req)
            else:
                resp = {"error": "badop"}
        except FileError as exc:
            resp = {"error": exc.kind, **exc.extra}
        except OSError as exc:
            resp = {"error": "os", "msg": f"{exc.strerror or exc}"}
        ch.send(resp)
        if op == "run":
            try:
                runner.prepare()  # while the agent thinks
            except OSError:
                runner.job = None  # started again (and the failure reported) on the next call


if __name__ == "__main__":
    main()
