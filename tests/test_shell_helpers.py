"""Shared fixtures for the shell tests: a small wiki-18-like corpus and the `bash -c` reference."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from grepseek_lib.shell.runner import child_env

_WORDS = ("Paris France capital city river Seine Nobel prize physics Einstein Marie Curie London Thames "
          "the of and in was born 1867 1903 Warsaw install tee rm bash sudo").split()
_ACCENTED = ("caf\u00e9", "r\u00e9sum\u00e9", "Skl\u0142odowska", "M\u00fcnchen", "\u6771\u4eac")


def write_corpus(path: Path, n: int = 300, seed: int = 7) -> Path:
    """n wiki-18 lines (json.dumps, so `\\u00e9` escapes), a few duplicates and one raw UTF-8 line."""
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        title = " ".join(rng.choice(_WORDS + list(_ACCENTED)) for _ in range(2)).title()
        body = " ".join(rng.choice(_WORDS + list(_ACCENTED)) for _ in range(rng.randint(5, 40)))
        if i % 17 == 0:
            body += ' "quoted" a|b (paren) $HOME `tick` [bracket] tab\there'
        lines.append(json.dumps({"id": str(i + 1), "contents": f'"{title}"\n{body}'}))
    lines += lines[:7]  # duplicates for sort -u / uniq -c
    text = "\n".join(lines) + "\n" + '{"id": "raw", "contents": "\\"Raw\\"\\nraw utf-8 caf\u00e9 line"}\n'
    path.write_bytes(text.encode("utf-8"))
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """The corpus file handed to the tool (in its own folder, next to a canary it must never print)."""
    folder = tmp_path_factory.mktemp("corpus")
    (folder / "canary.txt").write_text("CANARY-SECRET-42\n")
    return write_corpus(folder / "wiki.jsonl")


@pytest.fixture(scope="module")
def reference_folder(tmp_path_factory, corpus: Path) -> Path:
    """A folder holding a real copy of the corpus as corpus.jsonl: where `bash -c` runs."""
    folder = tmp_path_factory.mktemp("ref")
    shutil.copyfile(corpus, folder / "corpus.jsonl")
    return folder


def bash(command: str, folder: Path, timeout: float = 30) -> subprocess.CompletedProcess:
    """The reference: `bash -c COMMAND` with LC_ALL=C, the tool's PATH, stdin /dev/null."""
    return subprocess.run(["bash", "-c", command], cwd=folder, env=child_env(), stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=timeout)
