"""Run an accepted pipeline without a shell: a bounded process chain in a private corpus folder.

The stages are started as one process group joined by pipes, exactly as bash would wire them, in a
fresh folder that holds only the corpus under its logical name (a hard link, so `ls`, `find`, `rg`
see a regular file, as in a folder holding a real copy; see folder.py). Limits: a wall timeout that
kills the whole group, a cap on the bytes read from the last stdout (read while the chain runs, so
memory stays flat), rlimits (limits.py). Stdout can be streamed to a sink (the CLI).

A stage killed by a signal other than SIGPIPE leaves the status bash would give (128+N if it is the
last stage, else the last stage's) and adds one `note:` line to stderr: without it, a `sort` killed
in the middle of a chain reads as "no results". Stages die with their parent even when it is killed
outright (a guardian process, see guardian.py; where none can start, PR_SET_PDEATHSIG through
_pdeathsig_prefix), and with it on exit or SIGTERM/SIGHUP (the CLI turns those into SystemExit, so
every `finally` below runs).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import BinaryIO

from grepseek_lib.shell import guardian, policy
from grepseek_lib.shell import limits as lim
from grepseek_lib.shell.folder import RunFolder, run_folder
from grepseek_lib.shell.limits import DEFAULT_LIMITS, Limits
from grepseek_lib.shell.signals import signals_after_start
from grepseek_lib.shell.types import EXIT_TIMEOUT, Pipeline, RunResult

__all__ = ["DEFAULT_LIMITS", "EXIT_TRUNCATED", "Limits", "child_env", "resolve_program", "run_pipeline",
           "search_path", "timeout_line"]

#: Exit status reported when the output cap (or a closed reader) cut the chain: a writer killed by SIGPIPE.
EXIT_TRUNCATED = 128 + signal.SIGPIPE
_CHUNK = 1 << 16
_CANCEL_POLL_S = 0.02


def timeout_line(timeout: float | None = None) -> str:
    """The one line that reports a timeout (CLI stderr and tool payload alike)."""
    limit = f"{timeout:g} s" if timeout is not None else "its time limit"
    return (f"timeout: the pipeline ran longer than {limit} and was stopped; "
            "narrow the search (fixed strings with -F, a more specific pattern, head -n)")


# --------------------------------------------------------------------------------------------------
# Programs and environment: the same binaries `bash -c` finds with the same PATH.
# --------------------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def search_path() -> str:
    """PATH for every stage: the folder of this environment's `rg` first, then /usr/bin:/bin."""
    folders: list[str] = []
    venv_rg = Path(sys.executable).parent / "rg"
    found = str(venv_rg) if venv_rg.exists() else shutil.which("rg")
    if found:
        folders.append(str(Path(found).parent))
    for folder in ("/usr/bin", "/bin"):
        if folder not in folders:
            folders.append(folder)
    return ":".join(folders)


def child_env() -> dict[str, str]:
    """The minimal environment of every stage (and of the reference `bash -c` in the tests)."""
    return {"LC_ALL": "C", "PATH": search_path()}


@lru_cache(maxsize=64)
def resolve_program(name: str) -> str | None:
    """Absolute path of an allowed program, looked up through search_path() like bash would."""
    return shutil.which(name, path=search_path())


@lru_cache(maxsize=1)
def _pdeathsig_prefix() -> tuple[str, ...]:
    """`setpriv --pdeathsig KILL --`, put before every stage, when this system's setpriv supports it.

    PR_SET_PDEATHSIG makes the kernel kill a stage when the thread that started it dies, even by
    SIGKILL. setpriv (util-linux) sets it in the child and then execs the stage by its bare name
    through PATH, so argv[0] and the binary are exactly those `bash -c` uses. A preexec_fn could call
    prctl too, but running Python between fork and exec is unsafe in a process with threads (the
    engine runs shards from a thread pool). The signal follows the creating thread, which is fine
    here: a chain is always reaped by the thread that started it before that thread moves on.
    Without setpriv, RLIMIT_CPU still ends an orphaned stage.
    """
    setpriv = shutil.which("setpriv", path="/usr/bin:/bin")
    if setpriv is None:
        return ()
    prefix = (setpriv, "--pdeathsig", "KILL", "--")
    try:
        probe = subprocess.run([*prefix, "true"], env=child_env(), capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ()
    return prefix if probe.returncode == 0 else ()


# --------------------------------------------------------------------------------------------------
# The chain.
# --------------------------------------------------------------------------------------------------

_LIVE_GROUPS: set[int] = set()
_LIVE_LOCK = threading.Lock()


@atexit.register
def _kill_live_groups() -> None:
    """At interpreter exit, no chain started here keeps running (registered after folder.py's sweep)."""
    with _LIVE_LOCK:
        groups = list(_LIVE_GROUPS)
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


def _exit_status(returncode: int) -> int:
    """bash's view of a status: a death by signal N reads as 128+N."""
    return 128 - returncode if returncode < 0 else returncode


class _Chain:
    """The started processes of one pipeline, sharing one process group."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []
        self.pgid: int | None = None
        self.guarded = False
        self.prefix: tuple[str, ...] = ()

    def start(self, pipeline: Pipeline, folder: RunFolder, stderr_fd: int, timeout: float, limits: Limits,
              corpus_bytes: int) -> None:
        env = child_env()
        sort_env = {**env, "TMPDIR": str(folder.scratch)}  # sort spills there; the pipeline cannot see it
        self.prefix = prefix = () if guardian.available() else _pdeathsig_prefix()
        stdin: int | BinaryIO = subprocess.DEVNULL
        n = len(pipeline.stages)
        for stage in pipeline.stages:
            program = resolve_program(stage.program)
            if program is None:
                raise FileNotFoundError(stage.program)
            argv = policy.hardened_argv(stage)
            group = {"process_group": 0 if self.pgid is None else self.pgid}
            with signals_after_start():
                proc = subprocess.Popen(
                    [*prefix, *argv], executable=prefix[0] if prefix else program, stdin=stdin,
                    stdout=subprocess.PIPE, stderr=stderr_fd, cwd=folder.work,
                    env=sort_env if stage.program == "sort" else env, close_fds=True, restore_signals=True,
                    **group)
                self.procs.append(proc)
                if self.pgid is None:
                    self.pgid = proc.pid
                    self.guarded = not prefix and guardian.guard(proc.pid)
                    with _LIVE_LOCK:
                        _LIVE_GROUPS.add(proc.pid)
            lim.apply(proc.pid, lim.stage_settings(stage.program, n, timeout, limits, corpus_bytes))
            if stdin is not subprocess.DEVNULL:
                stdin.close()  # only the next stage holds the read end: SIGPIPE works as in bash
            stdin = proc.stdout

    def kill(self) -> None:
        if self.pgid is not None and any(p.returncode is None for p in self.procs):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pgid, signal.SIGKILL)

    def wait(self, deadline: float) -> bool:
        """Reap every stage, the group leader last; False if some stage outlived the deadline.

        The leader's pid is the group id: while it is unreaped no new group can take that id, so
        the guardian is told to forget the group before the leader is reaped.
        """
        for proc in self.procs[1:]:
            if not guardian.exited_by(proc, deadline):
                return False
        if not self.procs:
            return True
        if not guardian.exited_by(self.procs[0], deadline, reap=False):
            return False
        if self.pgid is not None:
            if self.guarded:
                guardian.release(self.pgid)
                self.guarded = False
            with _LIVE_LOCK:
                _LIVE_GROUPS.discard(self.pgid)
        self.procs[0].wait()
        return True

    def killed(self) -> list[tuple[int, str, int]]:
        """(index, program, signal) of every stage a signal other than SIGPIPE ended."""
        return [(i, str(proc.args[len(self.prefix)]), -proc.returncode)
                for i, proc in enumerate(self.procs)
                if proc.returncode is not None and proc.returncode < 0 and lim.reportable(-proc.returncode)]


@dataclass
class _Run:
    """The options of one run and what it has collected so far."""

    deadline: float
    max_output_bytes: int | None
    stdout_sink: BinaryIO | None
    stderr_sink: BinaryIO | None
    limits: Limits
    cancel: threading.Event | None
    on_slow: tuple[float, Callable[[], None]] | None
    out: bytearray = field(default_factory=bytearray)
    err: bytearray = field(default_factory=bytearray)
    sent: int = 0
    timed_out: bool = False
    truncated: bool = False
    sink_closed: bool = False

    @property
    def cut(self) -> bool:
        """We stopped the chain (timeout, output cap, closed reader, cancel): its deaths are ours."""
        return self.timed_out or self.truncated or self.sink_closed

    def stderr(self, chunk: bytes, capped: bool = True) -> None:
        if self.stderr_sink is not None:
            with contextlib.suppress(BrokenPipeError, ValueError):
                self.stderr_sink.write(chunk)
        elif not capped:
            self.err += chunk
        elif len(self.err) < self.limits.max_stderr_bytes:
            self.err += chunk[: self.limits.max_stderr_bytes - len(self.err)]

    def stdout(self, chunk: bytes) -> bool:
        """Take a chunk of the last stage's stdout; True once the run must stop reading."""
        if self.max_output_bytes is not None and self.sent + len(chunk) > self.max_output_bytes:
            chunk = chunk[: self.max_output_bytes - self.sent]
            self.truncated = True
        try:
            if self.stdout_sink is not None:
                self.stdout_sink.write(chunk)
            else:
                self.out += chunk
        except BrokenPipeError:
            self.sink_closed = True
        self.sent += len(chunk)
        return self.truncated or self.sink_closed

    def wait_budget(self, now: float) -> float | None:
        """Seconds select() may block; None when the run must stop (timeout or cancel)."""
        remaining = self.deadline - now
        if remaining <= 0:
            self.timed_out = True
            return None
        if self.cancel is not None:
            if self.cancel.is_set():
                self.sink_closed = True
                return None
            remaining = min(remaining, _CANCEL_POLL_S)
        if self.on_slow is not None:
            slow_at, callback = self.on_slow
            if now >= slow_at:
                self.on_slow = None
                callback()
            else:
                remaining = min(remaining, slow_at - now)
        return remaining


def _pump(run: _Run, stdout_fd: int, err_r: int) -> None:
    """Read the last stdout and the shared stderr until both close, the deadline passes or a cap is hit."""
    with selectors.DefaultSelector() as selector:
        selector.register(stdout_fd, selectors.EVENT_READ, "out")
        selector.register(err_r, selectors.EVENT_READ, "err")
        open_streams = 2
        while open_streams:
            remaining = run.wait_budget(time.monotonic())
            if remaining is None:
                return
            for key, _ in selector.select(timeout=remaining):
                chunk = os.read(key.fd, _CHUNK)
                if not chunk:
                    selector.unregister(key.fd)
                    open_streams -= 1
                elif key.data == "err":
                    run.stderr(chunk)
                elif run.stdout(chunk):
                    return


def _drain_stderr(run: _Run, err_r: int) -> None:
    """After the output cap cut a chain and it is gone: what it had written to stderr (a warning printed
    before its output, as `grep -E '(?i)x'` does) is still in the pipe, and a run without the cap shows it."""
    os.set_blocking(err_r, False)
    try:
        while chunk := os.read(err_r, _CHUNK):
            run.stderr(chunk)
    except BlockingIOError:
        pass


def run_pipeline(pipeline: Pipeline, corpus: Path, *, timeout: float, max_output_bytes: int | None,
                 stdout_sink: BinaryIO | None = None, stderr_sink: BinaryIO | None = None,
                 limits: Limits = DEFAULT_LIMITS, cancel: threading.Event | None = None,
                 on_slow: tuple[float, Callable[[], None]] | None = None, first_stage: int = 1,
                 corpus_bytes: int | None = None, folder: RunFolder | None = None) -> RunResult:
    """Run `pipeline` over `corpus` (seen as corpus.jsonl). Exit status is the last stage's, as bash.

    Without sinks, stdout and stderr are returned in the RunResult; with sinks they are written there
    as they arrive (the RunResult then carries empty bytes). Stdout beyond `max_output_bytes` is not
    read: the chain is killed, `truncated` is set and the status is 141 (a writer cut off by SIGPIPE).
    On timeout the chain is killed and the status is 124 with `timed_out` set. Setting `cancel` (used
    by the sharded engine once a later shard's output is not needed) kills the chain within ~20 ms; the
    result is then marked `truncated` with status 141 and must be discarded by the caller.
    `on_slow=(seconds, callback)` calls `callback` from this thread once the chain has run that long
    (the engine starts the other shards of a head plan only then, without a helper thread).
    `first_stage` is the number stage notes give the first stage (the engine's post part runs the
    tail of a longer pipeline). `corpus_bytes` sizes the limits (sort's scratch) when `corpus` stands
    for a larger file (the index's candidate blocks): the stages get the limits of a run on that file.
    `folder` is a run folder the caller made and wrote work/corpus.jsonl into (`corpus` is then that
    file); it is used as is and left to the caller to remove.
    """
    for stage in pipeline.stages:  # defence in depth: a Pipeline built by hand is checked too
        policy.check_stage(list(stage.argv))
    timeout = lim.check_timeout(timeout, "timeout")
    start = time.monotonic()
    slow = (start + on_slow[0], on_slow[1]) if on_slow is not None else None
    run = _Run(start + timeout, max_output_bytes, stdout_sink, stderr_sink, limits, cancel, slow)
    corpus = Path(corpus)
    size = corpus.stat().st_size if corpus_bytes is None else corpus_bytes
    if folder is not None:
        return _run_in(pipeline, folder, size, timeout, run, first_stage)
    with run_folder(corpus) as made:
        return _run_in(pipeline, made, size, timeout, run, first_stage)


def _run_in(pipeline: Pipeline, folder: RunFolder, corpus_bytes: int, timeout: float, run: _Run,
            first_stage: int) -> RunResult:
    chain = _Chain()
    err_r, err_w = os.pipe()
    try:
        try:
            chain.start(pipeline, folder, err_w, timeout, run.limits, corpus_bytes)
        except FileNotFoundError as exc:
            chain.kill()
            chain.wait(time.monotonic() + 5)
            return RunResult(b"", f"bash: line 1: {exc.args[0]}: command not found\n".encode(), 127)
        finally:
            os.close(err_w)
        stdout = chain.procs[-1].stdout
        assert stdout is not None
        _pump(run, stdout.fileno(), err_r)
        if run.cut:
            chain.kill()
        if not chain.wait(time.monotonic() + 5 if run.cut else run.deadline):
            run.timed_out = True
            chain.kill()
            chain.wait(time.monotonic() + 5)
        elif run.cut:
            _drain_stderr(run, err_r)
    finally:
        chain.kill()
        for proc in chain.procs:
            if proc.stdout is not None:
                proc.stdout.close()
        os.close(err_r)
        chain.wait(time.monotonic() + 5)
    if run.timed_out:
        code = EXIT_TIMEOUT
    elif run.cut:
        code = EXIT_TRUNCATED
    else:
        code = _exit_status(chain.procs[-1].returncode)
        n = len(chain.procs)
        for index, program, signum in chain.killed():
            note = lim.death_note(first_stage + index, program, signum, index == n - 1, n, run.limits, corpus_bytes)
            run.stderr((note + "\n").encode(), capped=False)
    return RunResult(bytes(run.out), bytes(run.err), code, timed_out=run.timed_out,
                     truncated=run.truncated or run.sink_closed)
