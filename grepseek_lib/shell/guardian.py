"""Stages die with their parent: a guardian process that kills our process groups when we die.

The guardian is a small Python process started once per process, reading `+PGID` / `-PGID` lines
from a pipe only this process writes. When this process dies, even by SIGKILL, the kernel closes the
pipe; the guardian reads end-of-file and kills every group still registered. It replaces
`setpriv --pdeathsig KILL` before every stage (an extra exec per stage, most of a millisecond; see
docs/INDEX.md) and is used only where it starts; otherwise the runner falls back to setpriv.

A group is registered right after its leader starts and unregistered before the last of its
processes is reaped (a group id cannot be reused while a process of the group, even a zombie,
exists), so the guardian never kills a group that is no longer ours.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import select
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

_CODE = """
import os, signal, sys
for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
    signal.signal(number, signal.SIG_IGN)
groups = set()
for line in sys.stdin.buffer:
    try:
        pgid = int(line[1:])
    except ValueError:
        continue
    (groups.add if line[:1] == b"+" else groups.discard)(pgid)
for pgid in groups:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
"""

_LOCK = threading.Lock()


@dataclass
class _Guardian:
    """The guardian of process `owner` and the write end of its pipe."""

    owner: int
    fd: int
    proc: subprocess.Popen


_current: _Guardian | None = None


def _start() -> int | None:
    """The write end of a running guardian's pipe (started on first use), None if none can run."""
    global _current
    if _current is not None and _current.owner == os.getpid():
        return _current.fd
    read_end, write_end = os.pipe()
    try:
        proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", _CODE], stdin=read_end,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True,
                                start_new_session=True)
    except OSError:
        os.close(write_end)
        return None
    finally:
        os.close(read_end)
    _current = _Guardian(os.getpid(), write_end, proc)
    return write_end


def _close() -> subprocess.Popen | None:
    """Close our end of the pipe and forget the guardian; its process, for the caller to reap."""
    global _current
    guardian, _current = _current, None
    if guardian is None:
        return None
    with contextlib.suppress(OSError):
        os.close(guardian.fd)
    return guardian.proc


def _send(line: bytes) -> bool:
    with _LOCK:
        fd = _start()
        if fd is None:
            return False
        try:
            os.write(fd, line)  # a short line into a pipe is written whole, never interleaved
        except OSError:  # the guardian died: the next call starts another
            proc = _close()
            if proc is not None:
                proc.poll()
            return False
    return True


def available() -> bool:
    """True when a guardian runs for this process (it starts one on the first call)."""
    with _LOCK:
        return _start() is not None


def guard(pgid: int) -> bool:
    """Register a group the guardian kills if this process dies; False if none runs."""
    return _send(b"+%d\n" % pgid)


def release(pgid: int) -> None:
    """Unregister a group (before the last of its processes is reaped)."""
    _send(b"-%d\n" % pgid)


def exited_by(proc: subprocess.Popen, deadline: float, reap: bool = True) -> bool:
    """True once `proc` has exited (reaped unless `reap` is False) before `deadline`; else False.

    A pidfd wakes the wait the moment the process exits (Popen.wait(timeout=) polls with sleeps
    that grow from 0.5 ms); without one (Linux < 5.3) it is polled.
    """
    if proc.returncode is not None or (reap and proc.poll() is not None):
        return True
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        return _exited_without_pidfd(proc, deadline, reap)
    try:
        while not select.select([pidfd], [], [], 0)[0]:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([pidfd], [], [], remaining)[0]:
                return False
    finally:
        os.close(pidfd)
    if reap:
        proc.wait()
    return True


def _exited_without_pidfd(proc: subprocess.Popen, deadline: float, reap: bool) -> bool:
    """exited_by where no pidfd can be opened: Popen.wait reaps, waitid(WNOWAIT) polled does not."""
    if reap:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return False
        return True
    while not os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.001)
    return True


def _forget_in_child() -> None:
    """A forked child (multiprocessing) must not hold our pipe open: the guardian would outlive us."""
    _close()


@atexit.register
def _stop() -> None:
    """At exit the guardian is told we are done (its groups are already dead) and reaped."""
    if _current is None or _current.owner != os.getpid():
        return
    proc = _close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=2)  # type: ignore[union-attr]


os.register_at_fork(after_in_child=_forget_in_child)
