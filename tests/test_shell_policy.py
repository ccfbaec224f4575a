"""The policy: bash-exact word splitting, and a refusal (one actionable line) for every risky construct."""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grepseek_lib.shell.policy import check_awk_program, check_sed_script, parse_command, split_stages
from grepseek_lib.shell.types import Refused


def bash_words(text: str) -> list[str]:
    """How bash splits `text` into words (printf is a builtin: nothing else can run)."""
    out = subprocess.run(["bash", "-c", "printf '%s\\0' START " + text], capture_output=True, env={"LC_ALL": "C"},
                         stdin=subprocess.DEVNULL, timeout=10)
    assert out.returncode == 0, (text, out.stderr)
    return out.stdout.decode("utf-8", "surrogateescape").split("\0")[1:-1]


@pytest.mark.parametrize("text", [
    "a b", "'a b'", '"a b"', 'a\\ b', '"a\\"b"', "'a\\b'", '"a\\b"', '"\\\\"', 'x"y"z', "''", '""', "a''b",
    '"a|b"', "'a|b'", "a\\|b", '"$"', 'a$', '"a$"', "'$(id)'", "'`id`'", '"\\$x"', '"\\`x\\`"', "a\\", '"\'"',
    "'\"'", 'a\\\nb', '"a\\\nb"', "'a\nb'", "-- -x", "\\*", "'*'", '"?"', "a=b", "\\~", "'~'", "x#y", "'#'",
    "é", '"\\n"', "'\\t'", "\t a \t", "!", "a!b", '"!x"', "'{print $1}'", "\\{", "%s", "^a", "a,b", "@x",
])
def test_words_match_bash(text):
    stages = split_stages("printf " + text)
    assert len(stages) == 1
    assert stages[0][1:] == bash_words(text)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab \t'\"\\$|;&<>()`*?[]{}~#!=-\n.é")), min_size=1, max_size=12))
def test_whatever_is_accepted_splits_like_bash(text):
    try:
        stages = split_stages("printf " + text)
    except Refused:
        return
    if len(stages) == 1:
        assert stages[0][1:] == bash_words(text)


REFUSED = {
    # control operators, redirection, substitution, expansion, globbing, other programs
    "rg x corpus.jsonl; cat /etc/passwd": "command lists",
    "rg x corpus.jsonl && ls": "`&&`",
    "rg x corpus.jsonl || ls": "`||`",
    "rg x corpus.jsonl &": "background",
    "rg x corpus.jsonl > out.txt": "output redirection",
    "rg x corpus.jsonl 2>/dev/null": "output redirection",
    "rg x < corpus.jsonl": "input redirection",
    "rg x <(cat corpus.jsonl)": "input redirection",
    "(rg x corpus.jsonl)": "subshells",
    "rg $(id) corpus.jsonl": "`$` expansion",
    'rg "$(id)" corpus.jsonl': "inside double quotes",
    'rg "`id`" corpus.jsonl': "backticks",
    "rg `id` corpus.jsonl": "command substitution",
    "rg $HOME corpus.jsonl": "`$` expansion",
    'rg "${HOME}" corpus.jsonl': "inside double quotes",
    "rg $'\\x41' corpus.jsonl": "`$` expansion",
    "rg x ~/.bashrc": "`~`",
    "rg x corpus.*": "glob",
    "rg Pa?is corpus.jsonl": "glob",
    "rg [P]aris corpus.jsonl": "glob",
    "rg {a,b} corpus.jsonl": "braces",
    "rg x corpus.jsonl # comment": "comments",
    "rg x corpus.jsonl\nls": "newlines",
    "rg x corpus.jsonl |": "ends with",
    "| rg x": "empty pipeline stage",
    "rg x | | head": "empty pipeline stage",
    "": "empty command",
    "rg x |& head": "`|&`",
    "python -c 'print(1)'": "not an allowed program",
    "bash -c 'ls'": "not an allowed program",
    "/usr/bin/rg x corpus.jsonl": "not an allowed program",
    "X=1 rg x corpus.jsonl": "not an allowed program",
    "rg x corpus.jsonl | tee out": "not an allowed program",
    "rg x corpus.jsonl | xargs rm": "not an allowed program",
    "'rg x'": "not an allowed program",
    # options that run programs, write or read other files
    "rg --pre cat x corpus.jsonl": "--pre",
    "rg --pre=cat x corpus.jsonl": "--pre",
    "rg --pre-glob '*.jsonl' x": "--pre-glob",
    "rg -z x corpus.jsonl": "--search-zip",
    "rg -iz x corpus.jsonl": "--search-zip",
    "rg --search-zip x": "--search-zip",
    "rg --hostname-bin id x": "--hostname-bin",
    "rg -f /etc/passwd corpus.jsonl": "absolute",
    "rg --file=../x corpus.jsonl": "leaves the corpus folder",
    "rg --ignore-file /etc/passwd x": "absolute",
    "grep -f /etc/shadow corpus.jsonl": "absolute",
    "grep --exclude-from=/etc/passwd -r x": "absolute",
    "sort -o out corpus.jsonl": "--output",
    "sort -uo out corpus.jsonl": "--output",
    "sort --output=out corpus.jsonl": "--output",
    "sort --compress-program=sh corpus.jsonl": "--compress-program",
    "sort -T /tmp corpus.jsonl": "--temporary-directory",
    "sort --files0-from=corpus.jsonl": "--files0-from",
    "sort --random-source=/dev/urandom -R corpus.jsonl": "absolute",
    "wc --files0-from=corpus.jsonl": "--files0-from",
    "uniq corpus.jsonl out.txt": "OUTPUT file",
    "uniq - corpus.jsonl": "OUTPUT file",
    "sed -i s/a/b/ corpus.jsonl": "--in-place",
    "sed -ni s/a/b/ corpus.jsonl": "--in-place",
    "sed --in-place=.bak s/a/b/ corpus.jsonl": "--in-place",
    "sed -f script.sed corpus.jsonl": "--file",
    "sed 'w out' corpus.jsonl": "`w` command",
    "sed -n '1w out' corpus.jsonl": "`w` command",
    "sed '/x/W out' corpus.jsonl": "`W` command",
    "sed 'r /etc/passwd' corpus.jsonl": "`r` command",
    "sed '1R /etc/passwd' corpus.jsonl": "`R` command",
    "sed 'e id' corpus.jsonl": "`e` command",
    "sed 's/a/b/w out' corpus.jsonl": "s///w",
    "sed 's/a/id/e' corpus.jsonl": "s///e",
    "sed 's/a/b/gw out' corpus.jsonl": "s///w",
    "sed -e p -e 'w x' corpus.jsonl": "`w` command",
    "sed '1{w x\n}' corpus.jsonl": "`w` command",
    "sed '1{w x' corpus.jsonl": "`w` command",
    "sed 's|a|b|w x' corpus.jsonl": "s///w",
    "sed '\\,x,w out' corpus.jsonl": "`w` command",
    "awk 'BEGIN{system(\"id\")}'": "system()",
    "awk '{print > \"out\"}' corpus.jsonl": "redirection",
    "awk '{print $0 >> \"out\"}' corpus.jsonl": "redirection",
    "awk '{printf(\"%s\", $0) > \"out\"}' corpus.jsonl": "redirection",
    "awk '{print | \"sh\"}' corpus.jsonl": "pipes",
    "awk 'BEGIN{\"id\" | getline x; print x}'": "pipes",
    "awk 'BEGIN{while ((getline l < \"/etc/passwd\") > 0) print l}'": "getline < file",
    "awk 'BEGIN{ARGV[1]=\"/etc/passwd\"; ARGC=2} {print}'": "ARGV",
    "awk 'BEGIN{print ENVIRON[\"HOME\"]}'": "ENVIRON",
    "awk -f prog.awk corpus.jsonl": "-f",
    "awk -W exec prog.awk": "unknown option",
    "awk '@include \"x\"'": "@-directives",
    "awk '{print}' /etc/passwd": "absolute",
    "awk -v ARGC=3 '{print}' corpus.jsonl": "ARGC",
    "awk '{print}' ARGV=x corpus.jsonl": "ARGV",
    "awk 'BEGIN { x = getline / 2 }'": "ambiguous",
    "find . -exec cat {} ;": "braces",
    "find . -exec cat '{}' ';'": "-exec",
    "find . -execdir id \\;": "-execdir",
    "find . -ok id \\;": "-ok",
    "find . -delete": "-delete",
    "find . -fprint out": "-fprint",
    "find . -fprintf out %p": "-fprintf",
    "find . -fls out": "-fls",
    "find / -name passwd": "absolute",
    "find .. -name x": "leaves the corpus folder",
    "find . -newer /etc/passwd": "absolute",
    "find -D tree .": "debug",
    "tail -f corpus.jsonl": "--follow",
    "tail -5f corpus.jsonl": "follows",
    "tail --follow=name corpus.jsonl": "--follow",
    # paths that leave the corpus folder
    "cat /etc/passwd": "absolute",
    "cat ../canary.txt": "leaves the corpus folder",
    "cat corpus.jsonl/../../canary.txt": "leaves the corpus folder",
    "head -n 1 ./../x": "leaves the corpus folder",
    "rg x /proc/self/environ": "absolute",
    "rg x ..": "leaves the corpus folder",
    "ls /": "absolute",
    "ls -la ..": "leaves the corpus folder",
    "grep -r x /": "absolute",
    "wc -l /dev/zero": "absolute",
    "rg --files /etc": "absolute",
    "rg -e x /etc/passwd": "absolute",
    "cut -c1 /etc/passwd": "absolute",
    "sort ../x": "leaves",
    # unknown or abbreviated options (their meaning is unknown, so they are refused)
    "grep --fil=x corpus.jsonl": "unknown option",
    "sort --out=x corpus.jsonl": "unknown option",
    "rg --ignore-fil=x y": "unknown option",
    # bounds
    " | ".join(["cat corpus.jsonl"] + ["cat"] * 20): "at most 16 pipeline stages",
    "rg " + "x" * 40_000: "longer than",
    "sed --in=.b s/a/b/ corpus.jsonl": "unknown option",
}


@pytest.mark.parametrize("command", list(REFUSED))
def test_refused_with_an_actionable_reason(command):
    with pytest.raises(Refused) as info:
        parse_command(command)
    reason = str(info.value)
    assert REFUSED[command] in reason
    assert "\n" not in reason and len(reason) < 300


ACCEPTED = [
    "rg install corpus.jsonl", "rg 'tee' corpus.jsonl", "rg rm corpus.jsonl", "grep -c bash corpus.jsonl",
    "rg 'a|b' corpus.jsonl", 'rg "x|y" corpus.jsonl | head -5', "rg -e '$(id)' corpus.jsonl", "rg '`id`' corpus.jsonl",
    "rg 'system(' corpus.jsonl", "rg -- --pre corpus.jsonl", "rg -e --pre corpus.jsonl", "grep -e -f corpus.jsonl",
    "rg 'sudo rm -rf /' corpus.jsonl", "rg '> out' corpus.jsonl", "rg ';' corpus.jsonl", "rg -o '/etc/passwd' corpus.jsonl",
    "rg -f corpus.jsonl corpus.jsonl", "grep -F -f ./corpus.jsonl corpus.jsonl", "cat ./corpus.jsonl", "cat -",
    "sed 's/w/W/g' corpus.jsonl", "sed -n '/write/p' corpus.jsonl", "sed 's/e/r/' corpus.jsonl", "sed '1!G;h;$!d'",
    "sed ':a;N;$!ba;s/\\n/ /g'", "sed -n '2,5{p}' corpus.jsonl", "sed '$a foo; w x'", "sed 'y/rw/wr/'",
    "awk '$1 > $2 {print}' corpus.jsonl",
    "awk '{print ($1 > $2)}' corpus.jsonl", "awk '/a|b/ {print}' corpus.jsonl", "awk '{ n = $2 / 2; print n }'",
    "awk 'BEGIN{print \"a|b > c\"}'", "awk '{if ($1 < 5) print}'", "awk -F'|' '{print $2}'", "awk '{print}' x=1 corpus.jsonl",
    "find . -name '*.jsonl' -print", "find . \\( -name a -o -name b \\) -print", "find . ! -name x",
    "find -newermt '2020-01-01'", "ls -la", "ls -R .", "head -5 corpus.jsonl", "tail +5 corpus.jsonl", "tail -n +2 -",
    "sort -k2,2 -t, -n corpus.jsonl", "uniq -c", "uniq -c corpus.jsonl", "cut -d: -f1", "tr -d '\\n'", "tr a-z A-Z",
    "wc -l corpus.jsonl", "rg --files", "rg --no-heading -N x", "grep --color=never x corpus.jsonl",
]


@pytest.mark.parametrize("command", ACCEPTED)
def test_accepted(command):
    pipeline = parse_command(command)
    assert pipeline.text == command and pipeline.stages


def test_patterns_are_never_rewritten():
    pipeline = parse_command("rg -c 'corpus.jsonl' corpus.jsonl | grep -v 'x|y'")
    assert [s.argv for s in pipeline.stages] == [("rg", "-c", "corpus.jsonl", "corpus.jsonl"), ("grep", "-v", "x|y")]


def test_sed_and_awk_walkers_directly():
    check_sed_script("s/a/b/g;s/c/d/2p;/x/!d;$q 3;l 20;=")
    check_awk_program('BEGIN{FS=","} {a[$1]++} END{for (k in a) printf "%s %d\\n", k, a[k]}')
    with pytest.raises(Refused):
        check_sed_script("1,/x/ { s/a/b/w f }")
    with pytest.raises(Refused):
        check_awk_program('{print $1, $2 > "/dev/stderr"}')


@pytest.mark.parametrize("command", ["rg -j 100000 x", "rg --threads=9999 x", "rg -j x y", "sort --parallel=1000",
                                     "ls --hyperlink=always", "rg --hyperlink-format=default x"])
def test_thread_bombs_and_absolute_path_leaks_are_refused(command):
    with pytest.raises(Refused):
        parse_command(command)
    parse_command("rg -j 2 x corpus.jsonl")
    parse_command("sort --parallel=4 corpus.jsonl")
