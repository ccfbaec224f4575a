"""Run an accepted pipeline without a shell: a bounded process chain in a private corpus folder.

The stages are started as one process group joined by pipes, exactly as bash would wire them, in a
fresh folder that holds only the corpus under its logical name (a hard link, so `ls`, `find`, `rg`
see a regular file, as in a folder holding a real copy). Limits: a wall timeout that kills the whole
group, a cap on the bytes read from the last stdout (read while the chain runs, so memory stays flat),
rlimits (CPU seconds, address space, file size 0). Stdout can be streamed to a sink (the CLI).
"""

from __future__ import annotations

import contextlib
import math
import os
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import BinaryIO

from grepseek_lib.config import LOGICAL_CORPUS_NAME
from grepseek_lib.shell import policy
from grepseek_lib.shell.types import EXIT_TIMEOUT, Pipeline, RunResult

#: Exit status reported when the output cap (or a closed reader) cut the chain: a writer killed by SIGPIPE.
EXIT_TRUNCATED = 128 + signal.SIGPIPE
_CHUNK = 1 << 16
_CANCEL_POLL_S = 0.02


@dataclass(frozen=True)
class Limits:
    """Per-process resource limits; none of them changes what an accepted command prints."""

    #: Virtual memory per process (rg and sort need room; bombs stop here instead of eating the host).
    address_space_bytes: int = 4 << 30
    #: Nothing may be written: no allowed command writes files, so this only catches mistakes.
    file_size_bytes: int = 0
    #: stderr kept in a buffered RunResult (streamed stderr is not capped).
    max_stderr_bytes: int = 64 << 10


DEFAULT_LIMITS = Limits()


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


# --------------------------------------------------------------------------------------------------
# The private folder.
# --------------------------------------------------------------------------------------------------


def _make_folder(corpus: Path) -> Path:
    """A fresh 0700 folder holding only `corpus.jsonl`: a hard link when possible, else a symlink."""
    for base, prefix in ((None, "grepseek-run-"), (corpus.parent, ".grepseek-run-")):
        try:
            root = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
        except OSError:
            continue
        try:
            os.link(corpus, root / LOGICAL_CORPUS_NAME)
            root.chmod(0o755)  # as a folder made by mkdir: `ls -la` shows the same mode
            return root
        except OSError:
            shutil.rmtree(root, ignore_errors=True)
    # Different file system and a read-only corpus folder: a symlink (ls -l / find -type differ).
    root = Path(tempfile.mkdtemp(prefix="grepseek-run-"))
    os.symlink(corpus, root / LOGICAL_CORPUS_NAME)
    root.chmod(0o755)
    return root


@contextlib.contextmanager
def corpus_folder(corpus: Path) -> Iterator[Path]:
    """Yield a private folder where `corpus` appears as corpus.jsonl; removed afterwards."""
    real = Path(corpus).resolve(strict=True)
    root = _make_folder(real)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


# --------------------------------------------------------------------------------------------------
# The chain.
# --------------------------------------------------------------------------------------------------


def _apply_limits(pid: int, timeout: float, limits: Limits) -> None:
    """Set rlimits on a started stage (prlimit from the parent: no Python between fork and exec)."""
    cpu = int(min(math.ceil(timeout * max(1, os.cpu_count() or 1)), 10**7)) + 2
    settings = (
        (resource.RLIMIT_CPU, (cpu, cpu + 1)),
        (resource.RLIMIT_AS, (limits.address_space_bytes, limits.address_space_bytes)),
        (resource.RLIMIT_FSIZE, (limits.file_size_bytes, limits.file_size_bytes)),
        (resource.RLIMIT_CORE, (0, 0)),
    )
    for which, value in settings:
        with contextlib.suppress(ProcessLookupError, ValueError, PermissionError):
            resource.prlimit(pid, which, value)


def _exit_status(returncode: int) -> int:
    """bash's view of a status: a death by signal N reads as 128+N."""
    return 128 - returncode if returncode < 0 else returncode


class _Chain:
    """The started processes of one pipeline, sharing one process group."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []
        self.pgid: int | None = None

    def start(self, pipeline: Pipeline, folder: Path, stderr_fd: int, timeout: float, limits: Limits) -> None:
        env = child_env()
        stdin: int | BinaryIO = subprocess.DEVNULL
        for stage in pipeline.stages:
            program = resolve_program(stage.program)
            if program is None:
                raise FileNotFoundError(stage.program)
            group = {"process_group": 0 if self.pgid is None else self.pgid}
            proc = subprocess.Popen(
                policy.hardened_argv(stage), executable=program, stdin=stdin, stdout=subprocess.PIPE,
                stderr=stderr_fd, cwd=folder, env=env, close_fds=True, restore_signals=True, **group)
            if self.pgid is None:
                self.pgid = proc.pid
            self.procs.append(proc)
            _apply_limits(proc.pid, timeout, limits)
            if stdin is not subprocess.DEVNULL:
                stdin.close()  # only the next stage holds the read end: SIGPIPE works as in bash
            stdin = proc.stdout

    def kill(self) -> None:
        if self.pgid is not None and any(p.returncode is None for p in self.procs):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pgid, signal.SIGKILL)

    def wait(self, deadline: float) -> bool:
        """Reap every stage; False if some stage outlived the deadline."""
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                return False
        return True


def run_pipeline(pipeline: Pipeline, corpus: Path, *, timeout: float, max_output_bytes: int | None,
                 stdout_sink: BinaryIO | None = None, stderr_sink: BinaryIO | None = None,
                 limits: Limits = DEFAULT_LIMITS, cancel: threading.Event | None = None,
                 on_slow: tuple[float, Callable[[], None]] | None = None) -> RunResult:
    """Run `pipeline` over `corpus` (seen as corpus.jsonl). Exit status is the last stage's, as bash.

    Without sinks, stdout and stderr are returned in the RunResult; with sinks they are written there
    as they arrive (the RunResult then carries empty bytes). Stdout beyond `max_output_bytes` is not
    read: the chain is killed, `truncated` is set and the status is 141 (a writer cut off by SIGPIPE).
    On timeout the chain is killed and the status is 124 with `timed_out` set. Setting `cancel` (used
    by the sharded engine once a later shard's output is not needed) kills the chain within ~20 ms; the
    result is then marked `truncated` with status 141 and must be discarded by the caller.
    `on_slow=(seconds, callback)` calls `callback` from this thread once the chain has run that long
    (the engine starts the other shards of a head plan only then, without a helper thread).
    """
    for stage in pipeline.stages:  # defence in depth: a Pipeline built by hand is checked too
        policy.check_stage(list(stage.argv))
    with corpus_folder(corpus) as folder:
        return _run_in(pipeline, folder, timeout, max_output_bytes, stdout_sink, stderr_sink, limits, cancel,
                       on_slow)


def _run_in(pipeline: Pipeline, folder: Path, timeout: float, max_output_bytes: int | None,
            stdout_sink: BinaryIO | None, stderr_sink: BinaryIO | None, limits: Limits,
            cancel: threading.Event | None = None,
            on_slow: tuple[float, Callable[[], None]] | None = None) -> RunResult:
    start = time.monotonic()
    deadline = start + timeout
    slow_at = start + on_slow[0] if on_slow is not None else math.inf
    out = bytearray()
    err = bytearray()
    sent = 0
    truncated = timed_out = sink_closed = False
    chain = _Chain()
    err_r, err_w = os.pipe()
    try:
        try:
            chain.start(pipeline, folder, err_w, timeout, limits)
        except FileNotFoundError as exc:
            chain.kill()
            chain.wait(time.monotonic() + 5)
            message = f"bash: line 1: {exc.args[0]}: command not found\n".encode()
            return RunResult(b"", message, 127)
        finally:
            os.close(err_w)
        stdout = chain.procs[-1].stdout
        assert stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(stdout.fileno(), selectors.EVENT_READ, "out")
            selector.register(err_r, selectors.EVENT_READ, "err")
            open_streams = 2
            while open_streams:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    timed_out = True
                    break
                if cancel is not None:
                    if cancel.is_set():
                        sink_closed = True
                        break
                    remaining = min(remaining, _CANCEL_POLL_S)
                if on_slow is not None:
                    now = time.monotonic()
                    if now >= slow_at:
                        on_slow[1]()
                        on_slow, slow_at = None, math.inf
                    else:
                        remaining = min(remaining, slow_at - now)
                for key, _ in selector.select(timeout=remaining):
                    chunk = os.read(key.fd, _CHUNK)
                    if not chunk:
                        selector.unregister(key.fd)
                        open_streams -= 1
                        continue
                    if key.data == "err":
                        if stderr_sink is not None:
                            with contextlib.suppress(BrokenPipeError, ValueError):
                                stderr_sink.write(chunk)
                        elif len(err) < limits.max_stderr_bytes:
                            err += chunk[: limits.max_stderr_bytes - len(err)]
                        continue
                    if max_output_bytes is not None and sent + len(chunk) > max_output_bytes:
                        chunk = chunk[: max_output_bytes - sent]
                        truncated = True
                    try:
                        if stdout_sink is not None:
                            stdout_sink.write(chunk)
                        else:
                            out += chunk
                    except BrokenPipeError:
                        sink_closed = True
                    sent += len(chunk)
                    if truncated or sink_closed:
                        open_streams = 0
                        break
        if timed_out or truncated or sink_closed:
            chain.kill()
        if not chain.wait(deadline if not (timed_out or truncated or sink_closed) else time.monotonic() + 5):
            timed_out = True
            chain.kill()
            chain.wait(time.monotonic() + 5)
    finally:
        chain.kill()
        for proc in chain.procs:
            if proc.stdout is not None:
                proc.stdout.close()
        os.close(err_r)
        chain.wait(time.monotonic() + 5)
    if timed_out:
        code = EXIT_TIMEOUT
    elif truncated or sink_closed:
        code = EXIT_TRUNCATED
    else:
        code = _exit_status(chain.procs[-1].returncode)
    return RunResult(bytes(out), bytes(err), code, timed_out=timed_out, truncated=truncated or sink_closed)
