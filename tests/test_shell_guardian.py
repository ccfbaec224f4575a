"""The guardian kills our registered process groups when we die, even by SIGKILL, and never a group we released.

Each test runs a small Python owner as a subprocess: it starts `sleep` in a new process group, tells
the guardian about it (or registers and releases it), prints the pid and waits to be killed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grepseek_lib.shell import guardian, runner
from grepseek_lib.shell.policy import parse_command

REPO = Path(__file__).resolve().parents[1]
OWNER = """
import subprocess, sys, time
from grepseek_lib.shell import guardian
child = subprocess.Popen(["sleep", "300"], process_group=0)
assert guardian.guard(child.pid)
if sys.argv[1] == "release":
    guardian.release(child.pid)
print(child.pid, flush=True)
time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _owner_then_kill(mode: str) -> int:
    owner = subprocess.Popen([sys.executable, "-c", OWNER, mode], stdout=subprocess.PIPE,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
    assert owner.stdout is not None
    pid = int(owner.stdout.readline())
    assert _alive(pid)
    owner.send_signal(signal.SIGKILL)
    owner.wait(timeout=30)
    return pid


def _dies_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.02)
    return False


def test_a_registered_group_dies_with_its_owner_killed_outright():
    assert _dies_within(_owner_then_kill("guard"), 10), "the guardian left a registered group running"


def test_a_released_group_is_left_alone():
    pid = _owner_then_kill("release")
    try:
        assert not _dies_within(pid, 1.0), "the guardian killed a group it had been told to forget"
    finally:
        os.kill(pid, signal.SIGKILL)


@pytest.fixture
def started(monkeypatch) -> list[list[str]]:
    """The argv of every process the runner starts (this process's guardian already runs)."""
    guardian.available()
    seen: list[list[str]] = []
    real_popen = subprocess.Popen

    def recording_popen(args, *rest, **kwargs):
        seen.append(list(args))
        return real_popen(args, *rest, **kwargs)

    monkeypatch.setattr(runner.subprocess, "Popen", recording_popen)
    return seen


def _corpus(tmp_path: Path) -> Path:
    corpus = tmp_path / "c.jsonl"
    corpus.write_bytes(b'{"id": "1", "contents": "alpha"}\n')
    return corpus


def test_stages_run_without_setpriv_while_a_guardian_runs(tmp_path, started):
    corpus = _corpus(tmp_path)
    assert guardian.available()
    result = runner.run_pipeline(parse_command("rg -c alpha corpus.jsonl"), corpus, timeout=10, max_output_bytes=None)
    assert (result.stdout, result.exit_code) == (b"1\n", 0)
    assert [Path(args[0]).name for args in started] == ["rg"]


@pytest.mark.skipif(not runner._pdeathsig_prefix(), reason="this system's setpriv lacks --pdeathsig")
def test_without_a_guardian_stages_fall_back_to_setpriv(tmp_path, monkeypatch, started):
    corpus = _corpus(tmp_path)
    monkeypatch.setattr(guardian, "available", lambda: False)
    result = runner.run_pipeline(parse_command("rg alpha corpus.jsonl | awk '{exit 3}'"), corpus, timeout=10,
                                 max_output_bytes=None)
    assert result.exit_code == 3
    assert [Path(args[0]).name for args in started] == ["setpriv", "setpriv"]


def test_a_group_leader_is_waited_for_without_being_reaped_when_no_pidfd_opens(monkeypatch):
    monkeypatch.delattr(guardian.os, "pidfd_open")
    proc = subprocess.Popen(["sleep", "0.2"])
    assert not guardian.exited_by(proc, time.monotonic() + 0.01, reap=False)
    assert guardian.exited_by(proc, time.monotonic() + 10, reap=False)
    assert proc.returncode is None and Path(f"/proc/{proc.pid}").exists()  # a zombie: the pid is still ours
    assert guardian.exited_by(proc, time.monotonic() + 10) and proc.returncode == 0
