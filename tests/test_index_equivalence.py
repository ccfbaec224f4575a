"""The index path prints exactly what `bash -c` prints, alone and combined with shards.

Corpora hold case-folding traps (K / k / U+212A KELVIN SIGN, s / U+017F LONG S, U+0130 / U+0131),
raw UTF-8, JSON escapes, duplicate lines, regex metacharacters, and blocks of a few lines (the
index is built with tiny blocks, so matches sit on the first and last line of blocks).
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_shell_helpers import bash, write_corpus

from grepseek_lib.shell import indexed, prefilter
from grepseek_lib.shell.engine import Engine
from grepseek_lib.shell.index_build import build_index
from grepseek_lib.shell.policy import parse_command
from grepseek_lib.shell.runner import run_pipeline
from grepseek_lib.shell.shards import build_shards

TRAPS = [
    "Kelvin scale 300 \u212a hot", "kelvin lower", "KELVIN upper", "\u017fong s and long s", "LONG S",
    "\u0130stanbul capital I dot", "\u0131rmak dotless", "istanbul plain", "Henry Feilden (soldier)",
    "feilden lowercase", "a.b*c [x] (y) {z} $HOME ^caret a|b back\\slash", "stra\u00dfe STRASSE stra\u1e9ee",
    "caf\u00e9 CAF\u00c9", "dup line", "dup line", "12:34 numbers 5678", "", "x",
    # non-ASCII words that fold to an ASCII word the corpus also holds (their postings must be one)
    "\u212aelvin sign", "\u017ftar long", "star plain", "\u0131stanbul dotless", "\u212a\u212a double",
    "kk lower",
    # pairs ripgrep 15 joins under -i that this Python's lower/upper do not (newer Unicode, or folding only)
    "\u019bambda small", "\u0390 iota", "\u03b0 upsilon", "\ufb05 ligature", "\u0264 gamma", "\u1c89 tje",
]
# their twins sit mid-list, so that each pair lies in different blocks of the test index
TRAPS[18:18] = ["\ua7dcambda capital", "\u1fd3 iota", "\u1fe3 upsilon", "\ufb06 ligature", "\ua7cb gamma",
                "\u1c8a tje"]


def _trap_corpus(path: Path) -> Path:
    lines = [f'{{"id": "{i}", "contents": "{text}"}}' for i, text in enumerate(TRAPS * 3)]
    path.write_bytes(("\n".join(lines)).encode("utf-8"))  # no final newline
    return path


def _world(kind: str, tmp_path_factory) -> tuple[Path, Path, dict[str, Engine]]:
    folder = tmp_path_factory.mktemp(kind)
    corpus = folder / "corpus.jsonl"
    if kind == "traps":
        _trap_corpus(corpus)
    else:
        write_corpus(corpus, n=200)
    side = tmp_path_factory.mktemp(kind + "-side")  # not in the folder bash runs in
    index = build_index(corpus, side / "index", block_bytes=300).directory
    shards = build_shards(corpus, 3, side / "shards").directory
    engines = {
        "index": Engine(corpus, index=index, index_fraction=1.0),
        "index+shards": Engine(corpus, shards, index=index, index_fraction=1.0),
    }
    return corpus, folder, engines


@pytest.fixture(scope="module", params=["traps", "wiki"])
def world(request, tmp_path_factory):
    return _world(request.param, tmp_path_factory)


def assert_exact(command: str, corpus: Path, folder: Path, engine: Engine, cap: int | None = None) -> str:
    pipeline = parse_command(command)
    ours = engine.run(pipeline, timeout=30, max_output_bytes=cap)
    one = run_pipeline(pipeline, corpus, timeout=30, max_output_bytes=cap)
    strategy = engine.strategy(pipeline)
    assert (ours.stdout, ours.stderr, ours.exit_code, ours.truncated) == \
        (one.stdout, one.stderr, one.exit_code, one.truncated), (command, strategy)
    if cap is None:
        ref = bash(command, folder)
        assert (ours.stdout, ours.stderr, ours.exit_code) == (ref.stdout, ref.stderr, ref.returncode), \
            (command, strategy)
    return strategy


_LITERALS = st.sampled_from([
    "kelvin", "K", "k", "\u212a", "KELVIN scale", "long s", "\u017fong", "S", "s and", "\u0130stanbul", "istanbul",
    "\u0131rmak", "I", "i", "Henry Feilden", "enry Feil", "Feilden (", "a.b*c", "[x]", "(y)", "{z}", "$HOME",
    "^caret", "a|b", "back\\slash", "stra\u00dfe", "STRASSE", "stra\u1e9ee", "caf\u00e9", "CAF\u00c9", "dup line",
    "12:34", "5678", "nomatch", "", "x", "e", "the", "Paris", "\\u00e9", "quoted", "tab", "id", "1",
])
_REGEXES = st.sampled_from([
    "Feil+den", "K.lvin", "\\bkelvin\\b", "kelvin|Henry", "[0-9]+ numbers", "(?i)LONG", "^\\{", "x$", "a\\.b",
    "\\(y\\)", "str(a|o)", "caf.", "dup ?line", "Henry \\w+", "[A-Z]+ upper", "\\x4belvin", "stra\u00dfe|Paris",
])
_FLAGS = st.lists(st.sampled_from(["-i", "-w", "-x", "-o", "-n", "-b", "-H", "-c", "-m 1", "-m 3", "--column",
                                   "-N", "--count-matches", "-I", "-l", "-q", "-s", "-v", "-A 1"]),
                  max_size=3, unique=True)
_TAILS = st.sampled_from(["", " | head -n 2", " | head -c 50", " | wc -l", " | sort | head -n 3", " | tail -n 1",
                          " | sort -r | uniq -c", " | cut -c1-20", " | rg -c e", " | wc -c corpus.jsonl"])


def _command(program: str, flags: list[str], fixed: bool, patterns: list[str], tail: str) -> str:
    if program.startswith("grep"):
        flags = [f for f in flags if f not in ("--column", "-N", "--count-matches", "-I")]
    if fixed:
        flags = [*flags, "-F"]
    if len(patterns) == 1:
        words = [program, *flags, shlex.quote(patterns[0])]
    else:
        words = [program, *flags, *(f"-e {shlex.quote(p)}" for p in patterns)]
    return " ".join([*words, "corpus.jsonl"]) + tail


_COMMANDS = st.one_of(
    st.builds(_command, st.sampled_from(["rg", "grep"]), _FLAGS, st.just(True),
              st.lists(_LITERALS, min_size=1, max_size=3), _TAILS),
    st.builds(_command, st.sampled_from(["rg", "grep -E"]), _FLAGS, st.just(False),
              st.lists(_REGEXES, min_size=1, max_size=2), _TAILS),
)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=_COMMANDS, mode=st.sampled_from(["index", "index+shards"]))
def test_random_searches_are_exact(world, command, mode):
    corpus, folder, engines = world
    assert_exact(command, corpus, folder, engines[mode])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=_COMMANDS, cap=st.integers(0, 400))
def test_output_cap_is_exact(world, command, cap):
    corpus, folder, engines = world
    assert_exact(command, corpus, folder, engines["index"], cap=cap)


@pytest.mark.parametrize("command", [
    "rg -F -i kelvin corpus.jsonl", "rg -i k corpus.jsonl", "grep -i k corpus.jsonl", "rg -F -i S corpus.jsonl",
    "rg -i 'long s' corpus.jsonl", "grep -F -i 'long s' corpus.jsonl", "rg -i -n '\u0130' corpus.jsonl",
    "rg -i 'i' corpus.jsonl | wc -l", "rg -n -b 'dup line' corpus.jsonl", "grep -n -b -H 'dup line' corpus.jsonl",
    "rg -c nomatch corpus.jsonl", "grep -c nomatch corpus.jsonl", "rg -c -F 'a|b' corpus.jsonl",
    "grep -F 'a.b*c' corpus.jsonl", "rg -F '$HOME' corpus.jsonl", "rg -F -e '' -e kelvin corpus.jsonl",
    "rg -n x corpus.jsonl | head -n 2", "rg -o -b 'Feil+den' corpus.jsonl", "grep -E -o -n 'str(a|o)' corpus.jsonl",
    "rg -i 'stra\u1e9ee' corpus.jsonl", "rg -i 'STRASSE' corpus.jsonl", "grep 'x$' corpus.jsonl",
    "rg -n --column -H kelvin corpus.jsonl | sort -r", "rg -m 1 -n dup corpus.jsonl",
    "rg -c kelvin corpus.jsonl", "rg -c KELVIN corpus.jsonl", "grep -c -i kelvin corpus.jsonl",
    "rg -n -i star corpus.jsonl", "rg -c -i istanbul corpus.jsonl", "grep -c -i KK corpus.jsonl",
    "rg -c -w -i 'star plain' corpus.jsonl",
    "rg -c -i '\u019bambda' corpus.jsonl", "rg -c -i '\ua7dcambda' corpus.jsonl", "rg -c -i '\u0390' corpus.jsonl",
    "rg -o -i '\u1fe3 upsilon' corpus.jsonl", "rg -c -i '\u1fd3' corpus.jsonl", "rg -c -i '\ufb05' corpus.jsonl", "rg -i -n '\u0264' corpus.jsonl",
    "rg -S -c '\u1c8a tje' corpus.jsonl", "rg -c -i '\ua7cb gamma' corpus.jsonl", "rg -c '(?i)\u019bAMBDA' corpus.jsonl",
    "rg -c lambda corpus.jsonl | rg -i '\ua7dc'", "rg -F -c '\u019bambda' corpus.jsonl",
])
def test_case_folding_and_numbering(world, command):
    corpus, folder, engines = world
    for engine in engines.values():
        assert_exact(command, corpus, folder, engine)


def test_selective_commands_really_use_the_index(world):
    """Guard against a prefilter that declines everything (which would pass the tests above)."""
    corpus, folder, engines = world
    for command in ["rg -F -i kelvin corpus.jsonl", "rg -n 'Feil+den' corpus.jsonl | head -n 1",
                    "grep -c -F nomatch corpus.jsonl", "rg -F quoted corpus.jsonl | wc -l",
                    "rg -e Henry -e '\\bcaf' corpus.jsonl"]:
        assert engines["index"].strategy(parse_command(command)) == "index", command
        assert_exact(command, corpus, folder, engines["index"])


@pytest.mark.parametrize("command", [
    "rg -v kelvin corpus.jsonl", "rg -A 1 kelvin corpus.jsonl", "rg -U kelvin corpus.jsonl", "rg '.*' corpus.jsonl",
    "grep -P kelvin corpus.jsonl", "rg -F '' corpus.jsonl", "rg -f corpus.jsonl corpus.jsonl", "awk '/kelvin/' corpus.jsonl",
    "rg kelvin corpus.jsonl corpus.jsonl", "rg -c -n kelvin corpus.jsonl", "rg '(?x) kelvin' corpus.jsonl",
    "rg kelvin corpus.jsonl | wc -c corpus.jsonl", "grep -E -F kelvin corpus.jsonl", "rg -F '.:' corpus.jsonl",
])
def test_fallback_shapes_do_not_use_the_index(world, command):
    corpus, folder, engines = world
    assert engines["index"].strategy(parse_command(command)) != "index", command
    assert_exact(command, corpus, folder, engines["index"])


_FILTERS = st.lists(st.builds(
    lambda program, flags, pattern: " ".join([program, *flags, shlex.quote(pattern)]),
    # fixed strings: two stages that each print a regex error would interleave on stderr, in bash too
    st.sampled_from(["rg -F", "grep -F"]),
    st.lists(st.sampled_from(["-i", "-w", "-v", "-o", "-n", "-c", "-m 1", "-H", "-A 1", "-x"]), max_size=2, unique=True),
    _LITERALS), min_size=1, max_size=2)
_FIRST_FLAGS = st.lists(st.sampled_from(["-i", "-w", "-o", "-n", "-m 2", "-H", "-c", "-r X", "--trim"]),
                        max_size=2, unique=True)
_CHAIN_TAILS = st.sampled_from(["", " | head -n 2", " | wc -l", " | sort | head -n 3", " | head -n 1 | rg e"])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(program=st.sampled_from(["rg -F", "grep -F", "rg"]), flags=_FIRST_FLAGS, pattern=_LITERALS,
       filters=_FILTERS, tail=_CHAIN_TAILS, mode=st.sampled_from(["index", "index+shards"]))
def test_later_filters_narrow_exactly(world, program, flags, pattern, filters, tail, mode):
    """A first search piped into further rg/grep filters: the later filters' literals narrow the blocks
    only while every line they see is a whole corpus line (no -o/-r/-n/-H/-c/-m/--trim before them)."""
    if program.startswith("grep"):
        flags = [f for f in flags if f not in ("-r X", "--trim")]
    first = " ".join([program, *flags, shlex.quote(pattern), "corpus.jsonl"])
    corpus, folder, engines = world
    assert_exact(" | ".join([first, *filters]) + tail, corpus, folder, engines[mode])


@pytest.mark.parametrize("command, narrowed", [
    ("rg -F kelvin corpus.jsonl | rg -F -i scale", True),
    ("rg -F -i -w kelvin corpus.jsonl | grep -v lower | rg hot | head -n 1", True),
    ("rg -o -F kelvin corpus.jsonl | rg scale", False),
    ("rg -n -F kelvin corpus.jsonl | rg scale", False),
    ("rg -m 1 -F kelvin corpus.jsonl | rg scale", False),
    ("rg -F kelvin corpus.jsonl | head -n 5 | rg scale", False),
    ("rg -F kelvin corpus.jsonl | rg -n scale", False),
    ("rg -F kelvin corpus.jsonl | rg -A 1 scale", False),
    ("rg -F kelvin corpus.jsonl | rg -v scale", False),
    ("rg -F kelvin corpus.jsonl | cut -c1-30 | rg scale", False),
])
def test_which_later_filters_narrow(world, command, narrowed):
    corpus, folder, engines = world
    found = prefilter.analyze(parse_command(command))
    assert not isinstance(found, str), command
    assert (len(found.alternatives[0]) > 1) is narrowed, (command, found.alternatives)
    for engine in engines.values():
        assert_exact(command, corpus, folder, engine)


_HEAD_TAILS = st.sampled_from([" | head -n 1", " | head -n 2", " | head -n 7", " | head -c 50", " | head -c 1",
                               " | cut -c1-20 | head -n 3", " | rg -i e | head -n 2", " | head -n 0",
                               " | tr a-z A-Z | head -c 200", " | head -n 40"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=st.builds(_command, st.sampled_from(["rg", "grep"]), _FLAGS, st.just(True),
                         st.lists(_LITERALS, min_size=1, max_size=2), _HEAD_TAILS),
       first=st.integers(1, 3), growth=st.integers(2, 4), mode=st.sampled_from(["index", "index+shards"]))
def test_heads_on_growing_prefixes_are_exact(world, command, first, growth, mode):
    """With prefixes of one to three blocks, most heads fill early, some after a second prefix, some never."""
    corpus, folder, engines = world
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(indexed, "HEAD_PREFIX_BLOCKS", first)
        patch.setattr(indexed, "HEAD_GROWTH", growth)
        assert_exact(command, corpus, folder, engines[mode])


def test_a_head_that_fills_from_a_prefix_reads_no_more_blocks(world):
    corpus, folder, engines = world
    engine = engines["index"]
    seen: list[int] = []
    original = indexed.IndexPath._run_blocks

    def spy(self, pipeline, chosen, run_folder, blocks, *rest):
        seen.append(len(blocks))
        written = (run_folder.work / "corpus.jsonl").stat().st_size
        assert written == int(self.index.lengths[blocks].sum())  # the prefix, appended to, no more
        return original(self, pipeline, chosen, run_folder, blocks, *rest)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(indexed, "HEAD_PREFIX_BLOCKS", 2)
        patch.setattr(indexed.IndexPath, "_run_blocks", spy)
        for command, fills in [("rg -F id corpus.jsonl | head -n 1", True), ("rg -n -F id corpus.jsonl | head -n 2", True),
                               ("rg -F nomatch corpus.jsonl | head -n 1", False),
                               ("rg -F id corpus.jsonl | head -n 999", False)]:
            seen.clear()
            assert assert_exact(command, corpus, folder, engine) == "index", command
            total = len(engine.index_path.choose(parse_command(command)).blocks)
            prefixes = [k for k in (2, 2 * indexed.HEAD_GROWTH, 2 * indexed.HEAD_GROWTH ** 2) if k < total]
            expected = [2] if fills and prefixes else [*prefixes, total]
            assert seen == expected, (command, seen, total)
