"""SIGTERM and SIGHUP end `grepseek run` / `shard` / `index` through their cleanup, never mid-start of a stage."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


class _Starting:
    """How deep the main thread is in starting a stage, and a signal that arrived meanwhile."""

    depth = 0
    pending: int | None = None


_STARTING = _Starting()


@contextlib.contextmanager
def signals_after_start() -> Iterator[None]:
    """Hold terminate_on_signals' exit until the stage being started is recorded in its chain.

    A SystemExit raised inside subprocess.Popen (while it waits for the child's exec) leaves a running
    child that no chain knows: nothing kills it, and it runs on in its own process group.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers run in the main thread only
        return
    _STARTING.depth += 1
    try:
        yield
    finally:
        _STARTING.depth -= 1
        signum, _STARTING.pending = _STARTING.pending, None
        if signum is not None and not _STARTING.depth:
            raise SystemExit(128 + signum)


@contextlib.contextmanager
def terminate_on_signals(signums: tuple[int, ...] = (signal.SIGTERM, signal.SIGHUP)) -> Iterator[None]:
    """In the main thread, turn SIGTERM/SIGHUP into SystemExit(128+N): every chain and folder is cleaned up.

    Python's default for these signals ends the process without running `finally` blocks or atexit
    handlers. A second signal during the cleanup is ignored (SIGKILL still works, and PDEATHSIG plus
    the orphan sweep of the next start cover it).
    """
    def handler(signum: int, frame: object) -> None:
        for number in signums:
            signal.signal(number, signal.SIG_IGN)
        if _STARTING.depth:  # inside Popen the exit would lose the stage it is starting
            _STARTING.pending = signum
            return
        raise SystemExit(128 + signum)

    previous = {number: signal.signal(number, handler) for number in signums}
    try:
        yield
    finally:
        for number, old in previous.items():
            signal.signal(number, old)
