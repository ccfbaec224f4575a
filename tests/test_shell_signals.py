"""`grepseek run` killed by SIGTERM, SIGHUP or SIGKILL leaves no stage running and no private folder;
its running stages share one memory budget.

Each test runs the real CLI as a subprocess with its own TMPDIR, waits until its stage (an endless
awk loop) runs, signals the CLI, and then looks for survivors: any process whose parent was the CLI,
and any `grepseek-*` folder in that TMPDIR (for SIGKILL, after the next start has swept it).
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_shell_helpers import write_corpus

from grepseek_lib import config
from grepseek_lib.shell import runner
from grepseek_lib.shell.folder import sweep_orphans
from grepseek_lib.shell.policy import parse_command
from grepseek_lib.shell.runner import run_pipeline
from grepseek_lib.shell.signals import terminate_on_signals

REPO = Path(__file__).resolve().parents[1]
LOOP = "awk 'BEGIN{while(1);}'"


def _children(pid: int) -> list[int]:
    """Live (non-zombie) processes whose parent is `pid`, less session leaders (the CLI's guardian)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z" and int(fields[3]) != int(entry.name):
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _start(tmp_path: Path, command: str = LOOP, stages: int = 1) -> tuple[subprocess.Popen, list[int], Path]:
    """The CLI running `command`, its stage pids once all `stages` run, and its TMPDIR."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir(exist_ok=True)
    corpus = write_corpus(tmp_path / "c.jsonl", n=20)
    env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmpdir)}
    proc = subprocess.Popen([sys.executable, "-m", "grepseek_lib.cli", "run", "--corpus", str(corpus),
                             "--timeout", "120", command], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pids = _children(proc.pid)
        if len(pids) == stages and all(Path(f"/proc/{pid}/exe").resolve().name != "setpriv" for pid in pids):
            return proc, pids, tmpdir
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("the stage never started")


def _folders(tmpdir: Path) -> list[str]:
    return sorted(p.name for p in tmpdir.iterdir() if p.name.startswith("grepseek-"))


def _gone(pids: list[int], timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(_alive(pid) for pid in pids):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_end_the_chain_and_remove_the_folder(signum, tmp_path):
    proc, stages, tmpdir = _start(tmp_path)
    assert len(_folders(tmpdir)) == 1
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signum and b"Traceback" not in err
    assert _gone(stages), "a stage outlived grepseek run"
    assert _folders(tmpdir) == []


def test_sigkill_ends_the_chain_and_the_next_start_sweeps_the_folder(tmp_path):
    proc, stages, tmpdir = _start(tmp_path)
    proc.kill()
    proc.communicate(timeout=30)
    assert _gone(stages), "a stage outlived grepseek run (no parent-death signal)"
    orphans = _folders(tmpdir)
    assert len(orphans) == 1 and orphans[0].startswith(f"grepseek-run-{proc.pid}-")  # nothing could remove it
    env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmpdir)}
    again = subprocess.run([sys.executable, "-m", "grepseek_lib.cli", "run", "--corpus", str(tmp_path / "c.jsonl"),
                            "ls"], env=env, capture_output=True, timeout=60)
    assert again.returncode == 0 and again.stdout == b"corpus.jsonl\n"
    assert _folders(tmpdir) == []


def test_the_sweep_leaves_folders_of_live_owners_alone(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    mine = tmp_path / f"grepseek-run-{os.getpid()}-abc"
    live = tmp_path / f"grepseek-merge-{os.getppid()}-abc"
    orphan = tmp_path / f"grepseek-run-{dead.pid}-abc"
    hidden_orphan = tmp_path / f".grepseek-sortm-{dead.pid}-abc"
    other = tmp_path / f"other-{dead.pid}-abc"
    for folder in (mine, live, orphan, hidden_orphan, other):
        (folder / "work").mkdir(parents=True)
    link = tmp_path / f"grepseek-run-{dead.pid}-link"
    link.symlink_to(other)
    locked = tmp_path / f"grepseek-run-{dead.pid}-locked"  # its pid looks dead (another pid namespace)
    (locked / "work").mkdir(parents=True)
    holder = os.open(locked / ".owner", os.O_CREAT | os.O_WRONLY)
    fcntl.flock(holder, fcntl.LOCK_EX)
    removed = sweep_orphans(tmp_path)
    assert sorted(p.name for p in removed) == sorted([orphan.name, hidden_orphan.name])
    assert mine.is_dir() and live.is_dir() and other.is_dir() and link.is_symlink() and locked.is_dir()
    os.close(holder)  # its owner is gone now
    assert [p.name for p in sweep_orphans(tmp_path)] == [locked.name]


def _limit(pid: int, name: str) -> int:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith(name):
            return int(line[len(name):].split()[0])
    raise AssertionError(name)


def test_running_stages_share_one_memory_budget(tmp_path):
    proc, stages, _ = _start(tmp_path, LOOP + " | sort | cat | cat", stages=4)
    try:
        memory = [_limit(pid, "Max address space") for pid in stages]
        sizes = {Path(f"/proc/{pid}/exe").resolve().name: _limit(pid, "Max file size") for pid in stages}
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    assert memory == [config.CHAIN_MEMORY_BYTES // 4] * 4
    assert sizes.pop("sort") >= 1 << 30 and set(sizes.values()) == {0}  # only sort may write (its scratch)


def test_a_signal_while_popen_starts_a_stage_still_ends_that_stage(tmp_path, monkeypatch):
    """SIGTERM landing inside subprocess.Popen (it waits there for the child's exec) must not leave the
    child running unknown to its chain: the exit waits until the stage is recorded, then kills it."""
    corpus = write_corpus(tmp_path / "c.jsonl", n=5)
    started: list[subprocess.Popen] = []
    real_popen = subprocess.Popen

    def popen(argv, *args, **kwargs):
        proc = real_popen(argv, *args, **kwargs)
        if "awk" in argv:
            started.append(proc)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)  # the handler runs here, inside "Popen"
        return proc

    monkeypatch.setattr(runner.subprocess, "Popen", popen)
    with pytest.raises(SystemExit) as exited, terminate_on_signals():
        run_pipeline(parse_command(LOOP), corpus, timeout=60, max_output_bytes=None)
    assert exited.value.code == 128 + signal.SIGTERM and len(started) == 1
    assert _gone([started[0].pid]), "the stage being started when the signal came outlived the run"
