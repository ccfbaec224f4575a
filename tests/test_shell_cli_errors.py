"""Bad input to `grepseek run` / `grepseek shard`: exit 2, exactly one `grepseek: error:` line, no traceback.

Table-driven over the real CLI in a subprocess. Also: `run --shards DIR` without --corpus runs over the
corpus named in the manifest, and help text stands on its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_shell_helpers import bash, write_corpus

from grepseek_lib.shell.shards import MANIFEST_NAME, build_shards

REPO = Path(__file__).resolve().parents[1]


def grepseek(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "grepseek_lib.cli", *args], capture_output=True, env=env,
                          stdin=subprocess.DEVNULL, timeout=60, cwd=cwd)


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> dict[str, Path]:
    """A corpus with good shards, shard folders with broken manifests, and a plain file."""
    root = tmp_path_factory.mktemp("cli")
    corpus = write_corpus(root / "other.jsonl", n=40)
    build_shards(corpus, 2, root / "good")
    paths = {"root": root, "corpus": corpus, "good": root / "good"}
    broken = {"list": "[]", "null": "null", "garbage": "{not json", "number": "7", "empty": "",
              "no_shards": json.dumps({"version": 1, "source": {}, "shards": []}),
              "escape": (root / "good" / MANIFEST_NAME).read_text().replace("shard-001.jsonl", "../../etc/passwd"),
              "strings": json.dumps({"version": 1, "source": "x", "shards": "y"})}
    for name, text in broken.items():
        folder = root / f"bad-{name}"
        folder.mkdir()
        (folder / MANIFEST_NAME).write_text(text)
        paths[f"bad-{name}"] = folder
    (root / "a-file").write_text("x\n")
    paths["file"] = root / "a-file"
    return paths


CASES = {
    "timeout 1e9": ("run", "--timeout", "1e9", "ls"),
    "timeout inf": ("run", "--timeout", "inf", "ls"),
    "timeout nan": ("run", "--timeout", "nan", "ls"),
    "timeout 0": ("run", "--timeout", "0", "ls"),
    "timeout negative": ("run", "--timeout=-3", "ls"),
    "max-output-bytes 0": ("run", "--max-output-bytes", "0", "ls"),
    "max-output-bytes negative": ("run", "--max-output-bytes=-1", "ls"),
    "manifest []": ("run", "--shards", "{bad-list}", "ls"),
    "manifest null": ("run", "--shards", "{bad-null}", "ls"),
    "manifest garbage": ("run", "--shards", "{bad-garbage}", "ls"),
    "manifest number": ("run", "--shards", "{bad-number}", "ls"),
    "manifest empty": ("run", "--shards", "{bad-empty}", "ls"),
    "manifest without shards": ("run", "--shards", "{bad-no_shards}", "ls"),
    "manifest escaping its folder": ("run", "--corpus", "{corpus}", "--shards", "{bad-escape}", "ls"),
    "manifest of strings": ("run", "--shards", "{bad-strings}", "ls"),
    "shards folder missing": ("run", "--shards", "{root}/nowhere", "ls"),
    "sequential with an index": ("run", "--sequential", "--index", "{root}/index", "ls"),
    "shard --out existing file": ("shard", "--corpus", "{corpus}", "--shards", "2", "--out", "{file}"),
    "shard --out under a file": ("shard", "--corpus", "{corpus}", "--shards", "2", "--out", "{file}/sub"),
    "shard --out /proc": ("shard", "--corpus", "{corpus}", "--shards", "2", "--out", "/proc"),
    "shard --out /proc/sub": ("shard", "--corpus", "{corpus}", "--shards", "2", "--out", "/proc/grepseek"),
    "shard --shards 0": ("shard", "--corpus", "{corpus}", "--shards", "0", "--out", "{root}/zero"),
    "shard missing corpus": ("shard", "--corpus", "{root}/missing.jsonl", "--shards", "2"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_line_and_exit_2(name, setup):
    args = [arg.format(**{k: str(v) for k, v in setup.items()}) for arg in CASES[name]]
    if args[0] == "run" and "--corpus" not in args and "--shards" not in args:
        args[1:1] = ["--corpus", str(setup["corpus"])]
    before = sorted(p.name for p in setup["root"].iterdir())
    result = grepseek(*args)
    err = result.stderr.decode()
    assert result.returncode == 2, (name, err)
    assert err.startswith("grepseek: error: ") and err.count("\n") == 1, (name, err)
    assert "Traceback" not in err and result.stdout == b""
    assert sorted(p.name for p in setup["root"].iterdir()) == before  # nothing half-written
    assert not list(Path("/proc").glob("shard-*"))


def test_run_shards_without_corpus_uses_the_manifests_corpus(setup, tmp_path):
    ref = tmp_path / "ref"
    ref.mkdir()
    (ref / "corpus.jsonl").write_bytes(setup["corpus"].read_bytes())
    command = "rg -n Curie corpus.jsonl | head -n 3"
    result = grepseek("run", "--shards", str(setup["good"]), command)
    expected = bash(command, ref)
    assert (result.stdout, result.returncode) == (expected.stdout, expected.returncode) and expected.stdout


def test_stale_advice_names_the_manifests_corpus(tmp_path):
    corpus = write_corpus(tmp_path / "mine.jsonl", n=30)
    build_shards(corpus, 2, tmp_path / "s")
    corpus.write_bytes(corpus.read_bytes() + b'{"id": "new", "contents": "x"}\n')
    result = grepseek("run", "--shards", str(tmp_path / "s"), "rg -c x corpus.jsonl")
    err = result.stderr.decode()
    assert result.returncode == 2 and err.count("\n") == 1 and "stale shards" in err
    assert f"--corpus {corpus}" in err and "miniwiki" not in err


def test_max_output_bytes_says_it_cut_the_output(setup):
    result = grepseek("run", "--corpus", str(setup["corpus"]), "--max-output-bytes", "10", "cat corpus.jsonl")
    assert result.returncode == 141 and len(result.stdout) == 10
    assert result.stderr.decode().startswith("note: output cut at --max-output-bytes 10")


@pytest.mark.parametrize("command", ["run", "shard"])
def test_help_stands_on_its_own(command):
    result = grepseek(command, "--help")
    text = result.stdout.decode()
    assert result.returncode == 0 and "usage:" in text
    assert "../" not in text and "shared/docs" not in text and "DESIGN.md" not in text
