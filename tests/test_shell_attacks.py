"""Hostile commands are refused or harmless: nothing written, nothing outside the corpus printed, all bounded."""

from __future__ import annotations

import hashlib
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from test_shell_helpers import write_corpus

from grepseek_lib.shell.policy import parse_command
from grepseek_lib.shell.runner import Limits, run_pipeline
from grepseek_lib.shell.tool import ShellTool

SECRET = "CANARY-SECRET-42"

ATTACKS = [
    # read outside the corpus
    "cat /etc/passwd", "cat ../canary.txt", "cat canary.txt", "cat corpus.jsonl/../canary.txt",
    "cat corpus.jsonl/../../canary.txt", "rg -r x CANARY ..", "rg CANARY /", "grep -r CANARY ..",
    "rg --files ..", "find .. -name canary.txt", "find / -name canary.txt", "ls ..", "ls -la /",
    "rg -f ../canary.txt corpus.jsonl", "grep -f /etc/passwd corpus.jsonl", "rg -L CANARY .",
    "find -L . -name '*'", "awk '{print}' ../canary.txt", "awk 'BEGIN{while((getline l<\"../canary.txt\")>0) print l}'",
    "awk 'BEGIN{ARGV[1]=\"../canary.txt\";ARGC=2}{print}'", "sed -n p ../canary.txt", "sed '1r ../canary.txt' corpus.jsonl",
    "head /proc/self/environ", "cat /dev/stdin", "tail ~/.bashrc", "sort --files0-from=corpus.jsonl",
    "rg --pre cat CANARY corpus.jsonl", "rg --ignore-file ../canary.txt x", "cat $PWD/../canary.txt",
    'cat "$(echo ../canary.txt)"', "cat `echo ../canary.txt`", "cat ./../canary.txt", "cat .//..//canary.txt",
    # write anything anywhere
    "rg x corpus.jsonl > pwned", "sort -o pwned corpus.jsonl", "uniq corpus.jsonl pwned", "sed -i s/a/b/ corpus.jsonl",
    "sed 'w pwned' corpus.jsonl", "sed 's/a/b/w pwned' corpus.jsonl", "awk '{print > \"pwned\"}' corpus.jsonl",
    "find . -fprint pwned", "find . -delete", "tee pwned", "sort -T . corpus.jsonl", "cp corpus.jsonl pwned",
    "uniq +1 corpus.jsonl", "uniq -c corpus.jsonl corpus.jsonl", "truncate -s0 corpus.jsonl", "rm corpus.jsonl",
    # run programs
    "sh -c id", "awk 'BEGIN{system(\"touch pwned\")}'", "awk 'BEGIN{print | \"sh\"}'", "sed 'e touch pwned' corpus.jsonl",
    "sed 's/.*/touch pwned/e' corpus.jsonl", "find . -exec touch pwned \\;", "find . -execdir touch pwned ';'",
    "rg -z x corpus.jsonl", "rg --hostname-bin id --hyperlink-format '{host}' x", "sort --compress-program=sh corpus.jsonl",
    "rg x corpus.jsonl; touch pwned", "rg x corpus.jsonl && touch pwned", "rg x | xargs touch", "env",
]


@pytest.fixture()
def sandbox(tmp_path, monkeypatch):
    """A corpus next to a canary; private run folders under a temp dir we can inspect afterwards."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "canary.txt").write_text(SECRET + "\n")
    corpus = write_corpus(home / "wiki.jsonl", n=60)
    runs = tmp_path / "runs"
    runs.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(runs))
    monkeypatch.chdir(home)
    return home, corpus, runs


def _snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_attacks_are_refused_or_harmless(sandbox):
    home, corpus, runs = sandbox
    before = _snapshot(home)
    tool = ShellTool(corpus, timeout=10)
    for command in ATTACKS:
        payload = tool(command)
        if payload["exit_code"] == 126:
            assert payload["stderr"].startswith("refused: ") and payload["stdout"] == "", command
            continue
        shown = payload["stdout"] + payload["stderr"]
        assert SECRET not in shown and "root:x:0" not in shown, command
    assert _snapshot(home) == before  # corpus unchanged, canary unchanged, nothing new
    assert not list(runs.iterdir())  # private folders removed
    assert not any(Path(p).exists() for p in ("pwned", "/pwned", str(Path.cwd() / "pwned")))


#: Accepted because they cannot leave the private folder (it holds only corpus.jsonl): they find nothing.
HARMLESS = {"cat canary.txt", "cat corpus.jsonl/../canary.txt", "rg -L CANARY .", "find -L . -name '*'"}


def test_every_other_attack_is_refused(sandbox):
    _, corpus, _ = sandbox
    tool = ShellTool(corpus, timeout=10)
    accepted = {c for c in ATTACKS if tool(c)["exit_code"] != 126}
    assert accepted == HARMLESS


def test_output_flood_is_capped_while_running(sandbox):
    _, corpus, _ = sandbox
    command = "cat " + " ".join(["corpus.jsonl"] * 200)
    start = time.monotonic()
    result = run_pipeline(parse_command(command), corpus, timeout=20, max_output_bytes=10_000)
    assert result.truncated and len(result.stdout) == 10_000 and result.exit_code == 141
    assert time.monotonic() - start < 5


def test_regex_time_bomb_times_out_and_kills_the_chain(tmp_path):
    corpus = tmp_path / "bomb.jsonl"
    corpus.write_text("ab" * 200 + "\n")
    start = time.monotonic()
    result = run_pipeline(parse_command(r"grep -E '(a|b)*(.*)\2\2\2\1' corpus.jsonl | wc -l"), corpus,
                          timeout=1.5, max_output_bytes=None)
    elapsed = time.monotonic() - start
    assert result.timed_out and result.exit_code == 124 and elapsed < 5
    leftover = subprocess.run(["pgrep", "-f", r"\(a\|b\)\*\(\.\*\)"], capture_output=True, text=True).stdout
    assert not leftover.strip()


def test_cpu_loop_times_out(sandbox):
    _, corpus, _ = sandbox
    result = run_pipeline(parse_command("awk 'BEGIN{while(1){}}'"), corpus, timeout=1, max_output_bytes=None)
    assert result.timed_out and result.exit_code == 124


def test_memory_bomb_hits_the_address_space_limit(sandbox):
    _, corpus, _ = sandbox
    start = time.monotonic()
    result = run_pipeline(parse_command("awk 'BEGIN{s=\"x\"; while(1) s = s s}'"), corpus, timeout=20,
                          max_output_bytes=None, limits=Limits(chain_memory_bytes=256 << 20))
    assert not result.timed_out and result.exit_code != 0 and time.monotonic() - start < 15


def test_fork_routes_are_all_refused():
    from grepseek_lib.shell.types import Refused
    for command in ["awk 'BEGIN{while(1) system(\"\")}'", "awk 'BEGIN{while(1) print | \"cat\"}'",
                    "find . -exec find . -exec find \\; \\;", "sed 'e sh' corpus.jsonl", "rg --pre sh x",
                    "sort --compress-program=sh", "rg --search-zip x"]:
        with pytest.raises(Refused):
            parse_command(command)


def test_symlinked_corpus_appears_as_a_regular_file(tmp_path):
    real = write_corpus(tmp_path / "real.jsonl", n=10)
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    result = run_pipeline(parse_command("find . -type f"), link, timeout=10, max_output_bytes=None)
    assert result.stdout == b"./corpus.jsonl\n"


@pytest.mark.slow
def test_cli_streams_a_large_corpus_with_flat_memory(tmp_path):
    big = tmp_path / "big.jsonl"
    line = b'{"id": "1", "contents": "\\"T\\"\\n' + b"x" * 1000 + b'"}\n'
    with big.open("wb") as handle:
        for _ in range(300):
            handle.write(line * 1000)  # ~300 MB
    code = ("import resource, subprocess, sys; p = subprocess.run([sys.executable, '-m', 'grepseek_lib.cli', 'run', "
            f"'--corpus', {str(big)!r}, 'cat corpus.jsonl'], stdout=subprocess.DEVNULL); "
            "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    status, max_rss_kb = map(int, out.stdout.split())
    assert status == 0 and max_rss_kb < 150_000, out
    assert resource.RLIM_INFINITY  # the module is used above
