"""The sandbox spawner: a small long-lived process that starts every sandbox's ``bwrap``.

This file is a program, not a module of proofgym: :mod:`proofgym.runtimes.sandbox.namespaces`
runs it once per host process (``python -I -S spawner.py FD``) and sends it one request per
sandbox. It uses the standard library only and imports nothing of proofgym.

Why a separate process: what a sandbox's first process does between ``fork`` and ``exec`` of
``bwrap`` (a private mount namespace, the idmapped snapshot and the overlay, the cgroup, the
rlimits, the privilege drop, a fresh session keyring) is Python code. Run as a ``preexec_fn`` of
the eval process it is unsafe (the process has threads: a lock held by another thread at the
``fork`` stays held in the child forever) and slow (the child of a large interpreter spends
milliseconds in copy-on-write faults). Here it runs in the child of a process that has one
thread and little memory.

The child does, in order:

* **as root** it joins the cgroup, mounts as root in a mount namespace of its own (so no mount
  of a sandbox is ever in the host's mount table, and all of them go away with the sandbox's
  last process), makes the sandbox's own device nodes, checks that the uid leased for this
  sandbox (``ids.py``) has no live process and holds no keys, then drops to it (an
  unprivileged uid/gid of this sandbox alone, no supplementary groups, no capabilities)
  before ``exec``. The task snapshot is attached
  through an *idmapped* mount whose files, as owned by the snapshot's owner, appear owned by
  the sandbox user, so the agent can edit them (copy-up keeps that owner) while the snapshot
  itself is never written and needs no ``chown``.
* **as an ordinary user** it enters a new user namespace (mapped to that user), caps the
  namespace's inotify/fanotify use at its slot's share, mounts the overlay there with
  ``userxattr``, then joins the cgroup.

The overlay's options name its layers relative to the episode directory (``lowerdir=lower``),
so ``/proc/self/mountinfo`` inside the sandbox shows no host path.

It is one file because it runs as one program (``-I`` puts no directory of proofgym on its path).

Protocol. The host holds the other end of the ``SOCK_SEQPACKET`` socket given as ``FD``; each
message is a ``marshal``-ed request dict with descriptors attached: the per-request reply
socket, the child's stdin/stdout/stderr, the setup-error pipe, then the descriptors to keep at
the numbers the host gave them. On the reply socket the spawner sends ``P`` + pid with a pidfd
of the child attached, then ``S`` + the wait status once it has reaped it (``E`` + why, when it
could not fork). End of file on the control socket (the host process is gone) ends the spawner;
every ``bwrap`` it started has ``--die-with-parent`` and goes with it.

The keeper. The host names its scratch directories and cgroups here as it makes them
(``op: own``, and ``op: disown`` once it has removed them itself). When the host is gone (end of
file: it exited without closing, called ``os._exit``, or was killed with ``SIGKILL``), the
spawner kills every sandbox it started, waits for them, then unmounts and deletes those
directories and removes those cgroups before it exits: nothing of the host's sandboxes outlives
it by more than that. The spawner runs in a session of its own, so a signal to the host's
process group does not stop it from tidying up.
"""

import _signal
import contextlib
import ctypes
import fcntl
import marshal
import os
import resource
import select
import socket
import stat
import sys
import time

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_MS_RDONLY, _MS_NOSUID, _MS_NOEXEC, _MS_REMOUNT, _MS_BIND = 1, 2, 8, 32, 4096
_MS_REC, _MS_PRIVATE = 0x4000, 1 << 18
#: The links of bwrap's ``--dev`` (the sandbox's own /dev is made here as root).
_DEV_LINKS = ((b"stdin", b"/proc/self/fd/0"), (b"stdout", b"/proc/self/fd/1"),
              (b"stderr", b"/proc/self/fd/2"), (b"fd", b"/proc/self/fd"), (b"core", b"/proc/kcore"),
              (b"ptmx", b"pts/ptmx"))
_SYS_OPEN_TREE, _SYS_MOVE_MOUNT, _SYS_MOUNT_SETATTR, _SYS_KEYCTL = 428, 429, 442, 250
_OPEN_TREE_CLONE, _OPEN_TREE_CLOEXEC, _AT_EMPTY_PATH, _AT_FDCWD = 1, 0o2000000, 0x1000, -100
_MOVE_MOUNT_F_EMPTY_PATH = 4
_MOUNT_ATTR_RDONLY, _MOUNT_ATTR_NOSUID, _MOUNT_ATTR_NODEV, _MOUNT_ATTR_IDMAP = 1, 2, 4, 0x100000
_MNT_DETACH = 2
_KEYCTL_JOIN_SESSION_KEYRING = 1
#: What the child reports when its leased uid still has a live process (the host retries).
ID_BUSY = "sandbox id in use by a live process:"
_MAX_FDS = 64
_MAX_IDMAPS = 256
_libc = ctypes.CDLL("libc.so.6", use_errno=True)
_libc.syscall.restype = ctypes.c_long


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def _check(ret, what):
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return ret


def _write(path, data):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


# ------------------------------------------------------------------ idmaps
_idmaps = {}


def idmap_userns(owner, to):
    """An fd of a user namespace mapping the host ``owner`` uid/gid to ``to`` (the sandbox
    user): what an idmapped mount of a snapshot owned by ``owner`` needs. Made once per
    mapping (a short-lived child holds the namespace while we write its map)."""
    key = (*owner, *to)
    if key in _idmaps:
        return _idmaps[key]
    if len(_idmaps) >= _MAX_IDMAPS:  # one per leased uid in use: few, but never unbounded
        os.close(_idmaps.pop(next(iter(_idmaps))))
    r, w = os.pipe()
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: hold a new user namespace until the parent has its fd
        code = 1
        try:
            os.close(w)
            os.close(ready_r)
            if _libc.unshare(_CLONE_NEWUSER) == 0:
                code = 0
                os.write(ready_w, b"U")  # in the new namespace: the parent writes its maps
                os.read(r, 1)
        finally:
            os._exit(code)
    os.close(r)
    os.close(ready_w)
    try:
        # a byte once the child is in its namespace, end of file if it could not get there
        # (no polling: this is on the path of every sandbox whose uid has no map yet)
        if os.read(ready_r, 1) != b"U":
            raise OSError("cannot create a user namespace for the idmapped snapshot mount "
                          "(is user.max_user_namespaces 0?)")
        for name, text in (("uid_map", f"{owner[0]} {to[0]} 1"), ("gid_map", f"{owner[1]} {to[1]} 1")):
            with open(f"/proc/{pid}/{name}", "w") as f:
                f.write(text)
        fd = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(ready_r)
        os.close(w)  # the child's read returns and it exits
        os.waitpid(pid, 0)
    _idmaps[key] = fd
    return fd


# ------------------------------------------------------------- the child
def _attach_lower(lower, idmap_fd):
    """The snapshot at ``./lower``: read-only, and idmapped when ``idmap_fd`` is given."""
    if idmap_fd < 0:
        _check(_libc.mount(lower, b"lower", None, _MS_BIND | _MS_REC, None), "binding the snapshot")
        return
    tree = _check(_libc.syscall(_SYS_OPEN_TREE, _AT_FDCWD, lower, _OPEN_TREE_CLONE | _OPEN_TREE_CLOEXEC),
                  "open_tree(snapshot)")
    try:
        attr = _MountAttr(_MOUNT_ATTR_IDMAP | _MOUNT_ATTR_RDONLY | _MOUNT_ATTR_NOSUID | _MOUNT_ATTR_NODEV,
                          0, 0, idmap_fd)
        try:
            _check(_libc.syscall(_SYS_MOUNT_SETATTR, tree, b"", _AT_EMPTY_PATH, ctypes.byref(attr),
                                 ctypes.sizeof(attr)), "idmapping the snapshot")
        except OSError as exc:
            raise OSError(exc.errno, f"{exc.strerror}. As root the snapshot is shown to the "
                          "unprivileged sandbox user through an idmapped mount (Linux >= 5.12; "
                          "ext4, xfs, btrfs or tmpfs >= 6.3): move the snapshot to such a file "
                          "system, or run proofgym as an ordinary user") from exc
        _check(_libc.syscall(_SYS_MOVE_MOUNT, tree, b"", _AT_FDCWD, b"lower", _MOVE_MOUNT_F_EMPTY_PATH),
               "attaching the snapshot")
    finally:
        os.close(tree)


def _has_keys(uid):
    try:
        with open("/proc/key-users", "rb") as f:
            text = f.read()
    except OSError:  # no keys support here: nothing to share through either
        return False
    prefix = str(uid).encode() + b":"
    return any(line.strip().startswith(prefix) for line in text.splitlines())


def setup(plan, idmap_fd):
    """Everything between ``fork`` and ``exec``, as described in the module's docstring."""
    privileged = plan["privileged"]
    # born in the cgroup when a helper forked us; otherwise join it before anything else
    cgroup_procs = () if tuple(plan["cgroup_procs"]) == _joined else plan["cgroup_procs"]
    if _joined:
        with contextlib.suppress(OSError):  # the helper's -1000 is not the sandbox's
            _write("/proc/self/oom_score_adj", b"0")
    if privileged:
        for path in cgroup_procs:  # before anything else: nothing runs unaccounted
            _write(path, b"0")
        _check(_libc.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    else:
        uid, gid = plan["map_ids"]
        _check(_libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS), "unshare(CLONE_NEWUSER|CLONE_NEWNS)")
        _write("/proc/self/setgroups", b"deny")
        _write("/proc/self/uid_map", f"0 {uid} 1".encode())
        _write("/proc/self/gid_map", f"0 {gid} 1".encode())
        # this namespace's share of the user's inotify/fanotify pools (see ids.py): every
        # use inside is charged here too, and the shares together never fill the user's pool
        for name, value in plan["ns_caps"]:
            _write(b"/proc/sys/user/" + name, str(value).encode())
    _check(_libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "making / private")
    publish = plan["publish"]
    if plan["system_root"] is not None:
        # a file system of its own, so mountinfo names /usr by its path in it, not on the host
        os.chdir(plan["system_root"])
        target = publish + b"/system" if publish else b"sys"
        _check(_libc.mount(b"overlay", target, b"overlay", _MS_RDONLY,
                           b"lowerdir=" + plan["system_lowers"]
                           + (b"" if privileged else b",userxattr")),
               "mounting the sandbox's system")
    if plan["episode_dir"] is not None and plan["lower"] is not None:
        os.chdir(plan["episode_dir"])
        _attach_lower(plan["lower"], idmap_fd)
        _check(_libc.mount(b"overlay", b"merged", b"overlay", 0, plan["options"]),
               "mounting the workspace overlay")
        if publish is not None:
            _check(_libc.mount(b"merged", publish + b"/workspace", None, _MS_BIND, None),
                   "showing the workspace to the sandbox user")
    if publish is not None and plan["devices"]:
        # the sandbox's /dev (what bwrap's --dev makes) on a small tmpfs of its mount namespace,
        # with device nodes of its own (new inodes of the same devices): locks and watches on
        # them are this sandbox's alone
        target = publish + b"/dev"
        _check(_libc.mount(b"tmpfs", target, b"tmpfs", _MS_NOSUID, b"size=16k,mode=0755"),
               "mounting the sandbox's device nodes")
        for name, major, minor in plan["devices"]:
            os.mknod(target + b"/" + name, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
            os.chmod(target + b"/" + name, 0o666)
        for name, link in _DEV_LINKS:
            os.symlink(link, target + b"/" + name)
        os.mkdir(target + b"/shm", 0o755)
        os.mkdir(target + b"/pts", 0o755)
        # a devpts instance of this sandbox alone, as bwrap mounts it
        _check(_libc.mount(b"devpts", target + b"/pts", b"devpts", _MS_NOSUID | _MS_NOEXEC,
                           b"newinstance,ptmxmode=0666,mode=620"), "mounting /dev/pts")
        # read-only from here (bwrap's --remount-ro would also make it nodev); the kernel locks
        # the flag of a mount copied into a less privileged user namespace (bwrap's)
        _check(_libc.mount(None, target, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID,
                           None), "making /dev read-only")
    if not privileged:
        for path in cgroup_procs:
            _write(path, b"0")
    for res, value in plan["rlimits"]:
        resource.setrlimit(res, (value, value))
    if plan["drop_to"] is not None:
        uid, gid = plan["drop_to"]
        # the leased id must be ours alone: getpriority(PRIO_USER) finds any live process whose
        # real uid it is in this pid namespace (a killed run's sandbox still dying, or a
        # stranger), ESRCH if none; /proc/key-users, which the kernel keeps per user namespace,
        # not per pid namespace, also shows the session keyring every sandbox holds, so a
        # sandbox of another proofgym in a container on this kernel counts too
        try:
            os.getpriority(os.PRIO_USER, uid)
        except ProcessLookupError:
            pass
        else:
            raise OSError(f"{ID_BUSY} {uid}")
        if _has_keys(uid):
            raise OSError(f"{ID_BUSY} {uid} (it holds kernel keys)")
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)  # from root to a non-zero uid: every capability is dropped
        if os.geteuid() != uid or os.getegid() != gid:
            raise OSError("the privilege drop did not take")
    # a new, empty session keyring: the host's session keys are not reachable from here
    _check(_libc.syscall(_SYS_KEYCTL, _KEYCTL_JOIN_SESSION_KEYRING, None), "joining a new keyring")
    os.chdir("/")


def _place(fds, targets, extra):
    """Put the received descriptors ``fds`` at the numbers ``targets`` (the numbers the command
    line names) and ``extra`` at free numbers, close-on-exec; close everything else. Returns
    the new numbers of ``extra``."""
    top = max([*fds, *extra, *targets, 2]) + 1
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, top) for fd in (*fds, *extra)]
    for fd, target in zip(moved, targets, strict=False):
        os.dup2(fd, target, inheritable=True)
    kept = moved[len(fds):]
    low = 0
    for fd in sorted({*targets, *kept}):
        if fd > low:
            os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    return kept


def child(plan, fds, idmap_fd):
    """The forked child: never returns (``exec`` of bwrap, or ``_exit`` after saying why).
    ``fds`` as received: reply socket, stdin, stdout, stderr, error pipe, then ``plan["keep"]``."""
    err = -1
    try:
        os.setsid()
        # dispositions Python set (an ignored signal stays ignored across exec): the defaults
        for sig in (_signal.SIGPIPE, _signal.SIGXFSZ, _signal.SIGINT):
            _signal.signal(sig, _signal.SIG_DFL)
        keep = plan["keep"]
        extra = [fds[4]] + ([idmap_fd] if idmap_fd >= 0 else [])
        kept = _place([fds[1], fds[2], fds[3], *fds[5:5 + len(keep)]], [0, 1, 2, *keep], extra)
        err = kept[0]
        setup(plan, kept[1] if idmap_fd >= 0 else -1)
        os.execve(plan["argv"][0], plan["argv"], {})
    except BaseException as exc:  # the child reports every failure, then exits
        if err >= 0:
            with contextlib.suppress(OSError):
                os.write(err, str(exc).encode(errors="replace")[:2000] or b"setup failed")
    os._exit(127)


# ------------------------------------------------------------- the loop
def _reply(sock, data, fds=()):
    """Send on a request's reply socket; the host may have gone (a reply nobody reads)."""
    with contextlib.suppress(OSError):
        socket.send_fds(sock, [data], list(fds))


#: The cgroup this process has joined: set in a per-cgroup helper (see :class:`Loop`).
_joined = ()


class Loop:
    """The request loop, of the spawner and of its per-cgroup helpers.

    Moving a process into a cgroup waits for an RCU grace period (milliseconds) when no other
    move happened just before, which is the case for a sandbox started every few hundred
    milliseconds. So from the second sandbox of a cgroup on, the spawner forwards the requests
    for it to a helper (its fork) that joined that cgroup once; the helper's children are born
    in it. The host releases the helper before it removes the cgroup (``op: release``); the
    cgroup's process cap counts it (see ``cgroups.create``).
    """

    def __init__(self, control):
        self.control = control
        self.children = {}  # pidfd -> (pid, reply socket)
        self.helpers = {}  # cgroup key -> (socket, pid)
        self.seen = set()  # cgroup keys asked for once
        self.direct = set()  # cgroup keys a helper could not join
        self.owned = {}  # path -> "scratch" | "cgroup": removed when the host is gone
        self.poller = select.poll()
        self.poller.register(control.fileno(), select.POLLIN)
        self.stale = set()  # descriptors unregistered while the current batch of events is handled

    def run(self):
        while True:
            events = self.poller.poll()
            self.stale = set()
            for fd, _ in events:
                if fd in self.stale:
                    # unregistered (and closed) while this batch was handled: the event is the
                    # old descriptor's, whatever now has its number
                    continue
                if fd == self.control.fileno():
                    self._request()
                elif fd in self.children:
                    self._reap(fd)
                else:
                    self._helper_gone(fd)

    def _request(self):
        try:
            msg, fds, _flags, _addr = socket.recv_fds(self.control, 1 << 20, _MAX_FDS)
        except InterruptedError:
            return
        if not msg:  # the host process (or the spawner) is gone: so are we, and every bwrap
            self._shutdown()
            os._exit(0)
        plan = marshal.loads(msg)
        if plan.get("op") in ("own", "disown"):
            for fd in fds:
                os.close(fd)
            if plan["op"] == "own":
                self.owned[plan["path"]] = plan["kind"]
            else:
                self.owned.pop(plan["path"], None)
            return
        key = tuple(plan["cgroup_procs"])
        if plan.get("op") == "release":
            self.seen.discard(key)
            self.direct.discard(key)
            self._drop(key)
            reply = socket.socket(fileno=fds[0])
            _reply(reply, b"D")
            reply.close()
            return
        if key and not _joined and key not in self.direct:
            if key in self.seen:
                helper = self.helpers.get(key) or self._new_helper(key)
                if helper is not None and self._forward(key, helper, msg, fds):
                    return
            self.seen.add(key)
        self._start(plan, fds)

    def _start(self, plan, fds):
        reply = socket.socket(fileno=fds[0])
        try:
            idmap_fd = idmap_userns(*plan["idmap"]) if plan["idmap"] else -1
            pid = os.fork()
        except OSError as exc:
            _reply(reply, b"E" + str(exc).encode(errors="replace")[:2000])
            reply.close()
            for fd in fds[1:]:
                os.close(fd)
            return
        if pid == 0:
            child(plan, fds, idmap_fd)
        for fd in fds[1:]:
            os.close(fd)
        try:
            pidfd = os.pidfd_open(pid)
        except OSError as exc:  # no memory or descriptors left (a helper in a full cgroup): the
            # child cannot be watched, so it does not run; the loop (and every sandbox) goes on
            os.kill(pid, _signal.SIGKILL)  # our unreaped child: its pid cannot have been reused
            os.waitpid(pid, 0)
            _reply(reply, b"E" + str(exc).encode(errors="replace")[:2000])
            reply.close()
            return
        _reply(reply, b"P" + pid.to_bytes(8, "big"), [pidfd])
        self.children[pidfd] = (pid, reply)
        self.poller.register(pidfd, select.POLLIN)

    def _reap(self, pidfd):
        pid, reply = self.children.pop(pidfd)
        self._unregister(pidfd)
        _, status = os.waitpid(pid, 0)
        os.close(pidfd)
        _reply(reply, b"S" + status.to_bytes(4, "big", signed=True))
        reply.close()

    # ------------------------------------------------------------ the keeper
    def _shutdown(self, settle_s=30.0):
        """The host is gone: end every sandbox started here (and, through their helpers, in a
        cgroup), wait for them, then remove what the host left (see the module's docstring)."""
        for pidfd in self.children:
            with contextlib.suppress(OSError):
                _signal.pidfd_send_signal(pidfd, _signal.SIGKILL)
        helpers = list(self.helpers.values())
        self.helpers.clear()
        for sock, _pid in helpers:
            sock.close()  # end of file: each helper does this same shutdown (at once), then exits
        for _sock, pid in helpers:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        for pidfd in list(self.children):
            pid, _reply_sock = self.children.pop(pidfd)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        deadline = time.monotonic() + settle_s
        for path, kind in self.owned.items():
            with contextlib.suppress(OSError):
                if kind == "cgroup":
                    _remove_cgroup(path, deadline)
                else:
                    _remove_scratch(path)

    # ------------------------------------------------------------ helpers
    def _new_helper(self, key):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            pid = os.fork()
        except OSError:
            ours.close()
            theirs.close()
            return None
        if pid == 0:
            _helper_main(theirs, key)
        theirs.close()
        if ours.recv(1) != b"J":  # it could not join the cgroup: start that cgroup's sandboxes here
            ours.close()
            os.waitpid(pid, 0)
            self.direct.add(key)
            return None
        self.helpers[key] = (ours, pid)
        self.poller.register(ours.fileno(), select.POLLIN)
        return ours, pid

    def _forward(self, key, helper, msg, fds):
        try:
            socket.send_fds(helper[0], [msg], fds)
        except OSError:  # the helper died: start this sandbox here, and a new helper next time
            self._drop(key)
            return False
        for fd in fds:
            os.close(fd)
        return True

    def _drop(self, key):
        helper = self.helpers.pop(key, None)
        if helper is not None:
            self._unregister(helper[0].fileno())
            helper[0].close()  # end of file: the helper exits
            os.waitpid(helper[1], 0)

    def _helper_gone(self, fd):
        for key, (sock, _pid) in list(self.helpers.items()):
            if sock.fileno() == fd:
                self._drop(key)
                return
        with contextlib.suppress(KeyError):
            self._unregister(fd)

    def _unregister(self, fd):
        self.poller.unregister(fd)
        self.stale.add(fd)


def _remove_cgroup(path, deadline):
    """Kill what is left in a sandbox cgroup, then remove it. Every process in it is a sandbox's:
    the bwraps this spawner started are dead by now, but a sandbox's own pid 1 (bwrap's child)
    can outlive its parent (``--die-with-parent`` arms itself only once that child runs), and a
    pid namespace's processes take a moment to exit on a loaded machine. So each pass kills
    what ``cgroup.procs`` lists and ``rmdir`` is retried (``EBUSY`` while a task is still
    leaving) until ``deadline``."""
    procs = os.path.join(path, b"cgroup.procs")
    member = os.path.basename(path)
    while True:
        try:
            with open(procs, "rb") as f:
                pids = [int(x) for x in f.read().split()]
        except OSError:
            return  # already removed
        for pid in pids:
            _kill_member(pid, member)
        if not pids:
            try:
                os.rmdir(path)
                return
            except FileNotFoundError:
                return
            except OSError:  # EBUSY: a task is still leaving
                if time.monotonic() >= deadline:
                    raise
        elif time.monotonic() >= deadline:
            os.rmdir(path)  # raises: the caller moves on to the next path
        time.sleep(0.005)


def _kill_member(pid, member):
    """SIGKILL ``pid`` if it is (still) in the cgroup named ``member``, through a pidfd opened
    before the check: a pid reused after the listing is in another cgroup and is passed over."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return  # gone
    try:
        with open(b"/proc/%d/cgroup" % pid, "rb") as f:
            if b"/" + member + b"\n" not in f.read() + b"\n":
                return
        _signal.pidfd_send_signal(pidfd, _signal.SIGKILL)
    except OSError:
        return
    finally:
        os.close(pidfd)


def _remove_scratch(path):
    """Unmount (as root it is a tmpfs) and delete a scratch directory, whatever the sandbox left
    in it (directories without permissions, as overlayfs leaves ``work/work``; trees deeper than
    the recursion limit); never follows a symbolic link. (The same steps as
    ``scratch.remove_tree``: this script runs on the standard library alone, ``-I -S``, and
    cannot import it.)"""
    import shutil  # here, not at the top: only a host that died needs them, and the spawner
    import subprocess  # starts on the way to the first sandbox

    if os.path.ismount(path):
        _libc.umount2(path, _MNT_DETACH)
    if not os.path.lexists(path):
        return
    try:
        shutil.rmtree(path)
        return
    except (OSError, RecursionError):
        pass  # finished below by tools that walk iteratively
    if os.geteuid() != 0:
        subprocess.run(["chmod", "-R", "u+rwX", "--", path], capture_output=True, check=False)
    subprocess.run(["rm", "-rf", "--one-file-system", "--", path], capture_output=True, check=False)


def _helper_main(control, key):
    """A per-cgroup helper: joins the cgroup, then serves the requests forwarded to it."""
    global _joined
    try:
        keep = control.fileno()
        os.closerange(3, keep)  # none of the spawner's sockets, pidfds or namespaces
        os.closerange(keep + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        _idmaps.clear()
        with contextlib.suppress(OSError):  # as root: the sandbox's OOM kills never pick us
            _write("/proc/self/oom_score_adj", b"-1000")
        for path in key:
            _write(path, b"0")
        _joined = key
        control.send(b"J")
        Loop(control).run()
    finally:
        os._exit(1)


def main():
    Loop(socket.socket(fileno=int(sys.argv[1]))).run()


if __name__ == "__main__":
    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)  # a terminal's ^C is for the host to handle
    main()
