"""Every accepted command prints the same stdout bytes and exits with the same status as `bash -c`."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_shell_helpers import bash, corpus, reference_folder  # noqa: F401  (fixtures)

from grepseek_lib.shell.policy import parse_command
from grepseek_lib.shell.runner import run_pipeline

COMMANDS = [
    # rg: counts, lists, matches, flags, no match (1), regex error (2), quoting
    "rg -c Paris corpus.jsonl",
    "rg Paris corpus.jsonl | head -3",
    "rg -n -m 3 Einstein corpus.jsonl",
    "rg -o -w 'Curie' corpus.jsonl | sort | uniq -c",
    "rg -i 'PARIS' corpus.jsonl | wc -l",
    "rg -F 'a|b' corpus.jsonl | wc -l",
    "rg \"Paris|London\" corpus.jsonl | wc -l",
    "rg 'caf\\\\u00e9' corpus.jsonl | head -2",
    "rg -v Paris corpus.jsonl | wc -c",
    "rg -l Paris",
    "rg -l Paris .",
    "rg -c Paris",
    "rg --files",
    "rg NoSuchWordAnywhere corpus.jsonl",
    "rg '(' corpus.jsonl",
    "rg -e Paris -e London -c corpus.jsonl",
    "rg -m1 --json Warsaw corpus.jsonl | head -c 300",
    "rg -o '\"id\": \"[0-9]+\"' corpus.jsonl | tail -n 4",
    "rg -P '(?<=Marie )Curie' -c corpus.jsonl",
    "rg -U 'Curie\\\\nfoo' corpus.jsonl",
    "rg -- -nope corpus.jsonl",
    "rg install corpus.jsonl | head -1",
    "rg 'rm' -c corpus.jsonl",
    "rg -x nothing corpus.jsonl missing.jsonl",
    "rg --count-matches '\\bthe\\b' corpus.jsonl",
    "rg -A1 -B1 -m2 Warsaw corpus.jsonl | head -20",
    "rg 'tab\there' corpus.jsonl | wc -l",
    "rg '\\$HOME' -c corpus.jsonl",
    "rg '`tick`' -c corpus.jsonl",
    # grep
    "grep -c Paris corpus.jsonl",
    "grep -n -m2 Einstein corpus.jsonl",
    "grep -E 'Marie (Curie|Sk)' corpus.jsonl | wc -l",
    "grep -ow 'Nobel prize' corpus.jsonl | uniq -c | head",
    "grep -v -c Paris corpus.jsonl",
    "grep -F -i 'CAF\\u00E9' corpus.jsonl | wc -l",
    "grep -r -l Paris .",
    "grep -rc Paris",
    "grep NoSuchWord corpus.jsonl",
    "grep -E '(' corpus.jsonl",
    "grep -c -5 Thames corpus.jsonl",
    "grep -E '(the|of) \\1' -c corpus.jsonl",
    "grep -h Paris corpus.jsonl corpus.jsonl | wc -l",
    "grep -q Paris corpus.jsonl",
    "grep Paris nope.jsonl",
    # find / ls
    "ls", "ls -a", "ls -1 .", "ls corpus.jsonl", "ls missing",
    "find .", "find . -type f", "find . -name '*.jsonl'", "find -maxdepth 1 -type f -printf '%f %s\\n'",
    "find . -name corpus.jsonl -print0",
    # sed / awk
    "sed -n '1,3p' corpus.jsonl | cut -c1-60",
    "sed 's/Paris/PARIS/g' corpus.jsonl | grep -c PARIS",
    "sed -n '/Warsaw/{p;q}' corpus.jsonl",
    "sed -E 's/\"id\": \"([0-9]+)\".*/\\1/' corpus.jsonl | tail -3",
    "sed -n '$=' corpus.jsonl",
    "sed 'y/abc/ABC/' corpus.jsonl | head -1",
    "sed -e 's/a/b/' -e '2q' corpus.jsonl",
    "awk '{print $1, $2}' corpus.jsonl | head -5",
    "awk -F'\"' '{print $4}' corpus.jsonl | sort | uniq -c | sort -rn | head",
    "awk 'NR % 50 == 0 {print NR\": \"length($0)}' corpus.jsonl",
    "awk '/Paris/ && /London/ {n++} END {print n}' corpus.jsonl",
    "awk 'length($0) > 300 {c++} END {print c+0}' corpus.jsonl",
    "awk '{ if ($3 > \"m\") print $3 }' corpus.jsonl | head -3",
    "awk -v w=Curie '$0 ~ w {n++} END {print n}' corpus.jsonl",
    "awk 'BEGIN {printf \"%5.2f\\n\", 10/3}'",
    "awk '{print $NF}' corpus.jsonl | sort -u | head",
    # head / tail / cat / wc / sort / cut / uniq / tr
    "head -n 2 corpus.jsonl", "head -2 corpus.jsonl", "head -c 100 corpus.jsonl", "tail -n 3 corpus.jsonl",
    "tail -n +305 corpus.jsonl", "tail -c 50 corpus.jsonl", "cat corpus.jsonl | wc -l", "cat -n corpus.jsonl | tail -1",
    "wc -l corpus.jsonl", "wc corpus.jsonl", "wc -c corpus.jsonl",
    "cat corpus.jsonl | wc -l", "sort corpus.jsonl | uniq -d | wc -l", "sort -u corpus.jsonl | wc -l",
    "sort -t'\"' -k4 corpus.jsonl | head -2", "sort -r corpus.jsonl | head -1",
    "cut -d'\"' -f4 corpus.jsonl | sort | uniq -c | sort -rn | head -5", "cut -c1-20 corpus.jsonl | tail -2",
    "cat corpus.jsonl | tr -d 'aeiou' | head -2",
    "head -3 corpus.jsonl | tr 'a-z' 'A-Z'", "head -5 corpus.jsonl | tr -s ' '",
    "cat corpus.jsonl | tr -cd '\\n' | wc -c",
    "uniq -c corpus.jsonl | sort -rn | head -2", "cat missing.jsonl", "cat corpus.jsonl missing | wc -l",
    # SIGPIPE and exit status of the last stage
    "cat corpus.jsonl | head -1", "rg -o '[a-z]+' corpus.jsonl | head -1", "sort corpus.jsonl | head -1",
    "rg NoSuchWord corpus.jsonl | wc -l", "grep -c Paris corpus.jsonl | grep -q 9999",
    # quoting
    "rg 'Marie Curie' corpus.jsonl | wc -l", "rg \"Marie\"' 'Curie corpus.jsonl | wc -l", "rg Marie\\ Curie -c corpus.jsonl",
    "rg \"\\\"quoted\\\"\" -c corpus.jsonl", "grep -c 'a|b' corpus.jsonl", "rg -c '\\(paren\\)' corpus.jsonl",
    "rg -c 'price$' corpus.jsonl", "rg -c price$ corpus.jsonl", "rg -c \"here\\\"}$\" corpus.jsonl",
    "rg -c '' corpus.jsonl", "rg -c \"\" corpus.jsonl",
    # help / version / usage errors
    "sort --version | head -1", "rg", "grep", "head -n", "cut corpus.jsonl", "uniq -f",
]
COMMANDS = list(dict.fromkeys(COMMANDS))


def assert_same(command: str, corpus_path, folder) -> None:
    ours = run_pipeline(parse_command(command), corpus_path, timeout=30, max_output_bytes=None)
    ref = bash(command, folder)
    assert (ours.stdout, ours.exit_code) == (ref.stdout, ref.returncode), command
    assert not ours.timed_out and not ours.truncated


@pytest.mark.parametrize("command", COMMANDS)
def test_same_stdout_and_status_as_bash(command, corpus, reference_folder):  # noqa: F811
    assert_same(command, corpus, reference_folder)


def test_stderr_carries_the_tools_own_messages(corpus):  # noqa: F811
    result = run_pipeline(parse_command("grep -E '(' corpus.jsonl"), corpus, timeout=10, max_output_bytes=None)
    assert result.exit_code == 2 and result.stderr.startswith(b"grep: ")
    result = run_pipeline(parse_command("cat nope | rg x"), corpus, timeout=10, max_output_bytes=None)
    assert result.stderr == b"cat: nope: No such file or directory\n" and result.exit_code == 1


# ---- property: generated pipelines -----------------------------------------------------------------

_WORD = st.sampled_from(["Paris", "Curie", "the", "caf", "1903", "London", "zzz", "a|b", "M\\u00fc", "\"id\"", "Nobel prize"])
_FIRST = st.one_of(
    st.builds(lambda prog, flags, w: f"{prog} {flags} {shlex.quote(w)} corpus.jsonl",
              st.sampled_from(["rg", "grep"]), st.sampled_from(["", "-i", "-w", "-F", "-c", "-o", "-n", "-v", "-io", "-wc"]),
              _WORD),
    st.just("cat corpus.jsonl"),
    st.builds(lambda k: f"head -n {k} corpus.jsonl", st.integers(0, 400)),
    st.builds(lambda k: f"tail -n {k} corpus.jsonl", st.integers(0, 400)),
    st.just("sort corpus.jsonl"),
)
_NEXT = st.one_of(
    st.builds(lambda k: f"head -n {k}", st.integers(0, 50)),
    st.builds(lambda k: f"tail -n {k}", st.integers(0, 50)),
    st.sampled_from(["sort", "sort -r", "sort -u", "sort -n", "uniq", "uniq -c", "wc -l", "wc -w", "wc -c",
                     "tr -d 'aeiou'", "tr 'a-z' 'A-Z'", "awk '{print $2}'", "awk -F'\"' '{print $4}'",
                     "sed 's/a/X/g'", "cut -c1-30", "cut -d' ' -f2", "rg -o '[A-Z][a-z]+'", "grep -v the"]),
    st.builds(lambda flags, w: f"grep {flags} {shlex.quote(w)}", st.sampled_from(["", "-c", "-i", "-v"]), _WORD),
)
_PIPELINES = st.builds(lambda first, rest: " | ".join([first, *rest]), _FIRST, st.lists(_NEXT, max_size=3))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=_PIPELINES)
def test_generated_pipelines_match_bash(command, corpus, reference_folder):  # noqa: F811
    assert_same(command, corpus, reference_folder)
