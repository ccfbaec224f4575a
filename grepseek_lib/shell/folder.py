"""Private folders of a run: where the chain works, where `sort` spills, and how orphans are swept.

A run folder `grepseek-run-<pid>-XXXX/` holds two folders: `work/` (the pipeline's working folder,
holding only the corpus as corpus.jsonl, so `ls` and `find .` print what bash prints in a folder
holding a copy) and `scratch/` (sort's TMPDIR, outside anything the pipeline can name: policy refuses
`..` and absolute paths). The owner pid in the name lets the next start remove the folder of a run
that was killed outright (SIGKILL leaves no chance to clean up), and only then: a live owner's folder
is never touched. The owner also holds an flock on `<root>/.owner` for the folder's lifetime, which
the kernel drops when the owner dies: a pid that merely looks dead (another pid namespace sharing the
temp folder) never costs a live run its folder.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import re
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from grepseek_lib.config import LOGICAL_CORPUS_NAME

#: Every private folder this package makes starts with one of these kinds: `grepseek-<kind>-<pid>-`.
KINDS = ("run", "merge", "sortm", "cand")
_ORPHAN = re.compile(r"^\.?grepseek-(?:" + "|".join(KINDS) + r")-(\d+)-")

_OWNER = ".owner"
#: Folders this process made and not yet removed, with the fd that holds their owner lock.
_LIVE: dict[Path, int] = {}
_LIVE_LOCK = threading.Lock()
_SWEPT: set[str] = set()
#: Empty run folders ready for reuse (empty_run_folder), at most _POOL_MAX, guarded by _LIVE_LOCK.
_POOL: list[RunFolder] = []
_POOL_MAX = 8


@dataclass(frozen=True)
class RunFolder:
    """A run's private root, the working folder the pipeline sees, and sort's scratch folder."""

    root: Path
    work: Path
    scratch: Path


def _track(root: Path) -> None:
    """Hold the owner lock of a fresh folder (stages never inherit it: they start with close_fds)."""
    fd = os.open(root / _OWNER, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    with _LIVE_LOCK:
        _LIVE[root] = fd


def _release(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
    with _LIVE_LOCK:
        fd = _LIVE.pop(root, None)
    if fd is not None:
        os.close(fd)


def _unowned(root: str) -> bool:
    """True when no live process holds the folder's owner lock (or it has none)."""
    try:
        fd = os.open(os.path.join(root, _OWNER), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


@atexit.register
def _remove_live() -> None:
    """At interpreter exit (also after SIGTERM turned into SystemExit), no private folder is left."""
    with _LIVE_LOCK:
        roots = list(_LIVE)
    for root in roots:
        _release(root)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_orphans(base: Path | str | None = None) -> list[Path]:
    """Remove our private folders in `base` (default: the temp folder) whose owner process is dead.

    Only directories (not symlinks) owned by this user and named `grepseek-<kind>-<pid>-...` are
    considered; a pid that is alive (even if reused by another program) keeps its folder.
    """
    base = Path(base if base is not None else tempfile.gettempdir())
    removed: list[Path] = []
    try:
        entries = list(os.scandir(base))
    except OSError:
        return removed
    for entry in entries:
        match = _ORPHAN.match(entry.name)
        if match is None or int(match.group(1)) == os.getpid():
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if (not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or _pid_alive(int(match.group(1)))
                or not _unowned(entry.path)):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(Path(entry.path))
    return removed


def sweep_once(base: Path | None = None) -> None:
    """sweep_orphans(base) the first time this process uses `base` (one directory listing per start)."""
    key = str(base if base is not None else tempfile.gettempdir())
    if key in _SWEPT:
        return
    _SWEPT.add(key)
    sweep_orphans(key)


@contextlib.contextmanager
def private_dir(kind: str, base: Path | None = None) -> Iterator[Path]:
    """A fresh 0700 folder `grepseek-<kind>-<pid>-XXXX` (engine merges); removed afterwards."""
    assert kind in KINDS
    sweep_once(base)
    root = Path(tempfile.mkdtemp(prefix=f"grepseek-{kind}-{os.getpid()}-", dir=base))
    try:
        _track(root)
        yield root
    finally:
        _release(root)


def _make(corpus: Path | None) -> RunFolder:
    """Root with work/corpus.jsonl (a hard link when possible, else a symlink; none without a corpus)
    and scratch/."""
    prefix = f"grepseek-run-{os.getpid()}-"
    attempts = ((None, prefix, True),) if corpus is None else (
        (None, prefix, True), (corpus.parent, "." + prefix, True), (None, prefix, False))
    for base, name, hard in attempts:
        try:
            sweep_once(base)
            root = Path(tempfile.mkdtemp(prefix=name, dir=base))
        except OSError:
            continue
        try:
            _track(root)
            work, scratch = root / "work", root / "scratch"
            work.mkdir(mode=0o755)
            work.chmod(0o755)  # as a folder made by mkdir under umask 022: `ls -la` shows the same mode
            scratch.mkdir(mode=0o700)
            if corpus is None:
                pass
            elif hard:
                os.link(corpus, work / LOGICAL_CORPUS_NAME)
            else:  # another file system and a read-only corpus folder: ls -l / find -type differ
                os.symlink(corpus, work / LOGICAL_CORPUS_NAME)
            return RunFolder(root, work, scratch)
        except OSError:
            _release(root)
    raise OSError(f"no room for a private run folder for {corpus or 'candidate blocks'}")


@contextlib.contextmanager
def run_folder(corpus: Path) -> Iterator[RunFolder]:
    """Yield a private RunFolder where `corpus` appears as work/corpus.jsonl; removed afterwards."""
    folder = _make(Path(corpus).resolve(strict=True))
    try:
        yield folder
    finally:
        _release(folder.root)


@contextlib.contextmanager
def empty_run_folder() -> Iterator[RunFolder]:
    """A private RunFolder without work/corpus.jsonl: the caller writes it (the index's candidate
    blocks). Folders are reused: once the caller's file is gone and nothing else was left, the next
    call takes the same folder (making and removing one costs ~0.6 ms, a fifth of an indexed command)."""
    with _LIVE_LOCK:
        folder = _POOL.pop() if _POOL else None
    if folder is None or not folder.work.is_dir():
        folder = _make(None)
    reusable = False
    try:
        yield folder
        reusable = _emptied(folder)
    finally:
        with _LIVE_LOCK:
            if reusable and len(_POOL) < _POOL_MAX:
                _POOL.append(folder)
                folder = None
        if folder is not None:
            _release(folder.root)


def _emptied(folder: RunFolder) -> bool:
    """Remove work/corpus.jsonl; True when the folder then holds what a fresh one holds (sort's spill
    files are left only by a sort that was killed)."""
    try:
        os.unlink(folder.work / LOGICAL_CORPUS_NAME)
    except FileNotFoundError:
        pass
    except OSError:
        return False
    try:
        return not any(True for _ in os.scandir(folder.work)) and not any(True for _ in os.scandir(folder.scratch))
    except OSError:
        return False


def _forget_pool_in_child() -> None:
    """A forked child must not share the parent's pooled folders, nor remove them when it exits (it
    runs one thread then: the lock, which another thread may have held at the fork, is not taken)."""
    for pooled in _POOL:
        _LIVE.pop(pooled.root, None)
    _POOL.clear()


os.register_at_fork(after_in_child=_forget_pool_in_child)
