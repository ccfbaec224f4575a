"""Per-program option tables: how each allowed program parses its argv, and which options it refuses.

The tables follow the versions installed in the image (ripgrep 15, GNU grep 3, GNU sed 4, mawk, GNU
coreutils); docs/REFUSALS.md says why each refused option is refused.
"""

from __future__ import annotations

from grepseek_lib.shell.options import RUNS_PROGRAM, WRITES, Spec, names, parse_args
from grepseek_lib.shell.types import ParsedArgs, Stage

# ---- ripgrep 15 ----------------------------------------------------------------------------------

RG = Spec(
    flags="szFivxUPSawL.uHIbnNc0lopqhV",
    valued="efEmjgdtTABCMr",
    long_flags=names(
        "--search-zip --case-sensitive --crlf --fixed-strings --ignore-case --invert-match --line-regexp "
        "--mmap --multiline --multiline-dotall --null-data --pcre2 --smart-case --stop-on-nonmatch --text "
        "--word-regexp --auto-hybrid-regex --binary --follow --glob-case-insensitive --hidden "
        "--ignore-file-case-insensitive --one-file-system --unrestricted --block-buffered --byte-offset "
        "--column --heading --help --include-zero --line-buffered --line-number --max-columns-preview "
        "--null --only-matching --passthru --passthrough --pretty --quiet --trim --vimgrep --with-filename "
        "--sort-files --count --count-matches --files-with-matches --files-without-match --json --debug "
        "--stats --trace --files --pcre2-version --type-list --version --ignore --ignore-dot "
        "--ignore-exclude --ignore-files --ignore-global --ignore-messages --ignore-parent --ignore-vcs "
        "--messages --require-git --unicode --pcre2-unicode --print0 --no-config"),
    long_valued=names(
        "--regexp --file --pre --pre-glob --dfa-size-limit --encoding --engine --max-count --regex-size-limit "
        "--threads --glob --iglob --ignore-file --max-depth --maxdepth --max-filesize --type --type-not "
        "--type-add --type-clear --after-context --before-context --color --colors --context "
        "--context-separator --field-context-separator --field-match-separator --hostname-bin "
        "--hyperlink-format --max-columns --path-separator --replace --sort --sortr --generate"),
    short_to_long={"e": "--regexp", "f": "--file", "z": "--search-zip"},
    negations=True,
)
RG_REFUSED = {
    "--pre": RUNS_PROGRAM,
    "--pre-glob": "only applies to --pre, which runs another program",
    "--search-zip": "runs decompression programs, which is not allowed; the corpus is plain text",
    "--hostname-bin": RUNS_PROGRAM,
    "--hyperlink-format": "hyperlinks print the private folder's absolute path; use plain output",
}

# ---- GNU grep 3 ----------------------------------------------------------------------------------

GREP = Spec(
    flags="EFGPiyvwxcLloqsbHhnTZzUarRIV",
    valued="efmABCdD",
    long_flags=names(
        "--extended-regexp --fixed-strings --basic-regexp --perl-regexp --ignore-case --no-ignore-case "
        "--invert-match --word-regexp --line-regexp --count --files-without-match --files-with-matches "
        "--only-matching --quiet --silent --no-messages --byte-offset --with-filename --no-filename "
        "--line-number --initial-tab --null --null-data --line-buffered --binary --text --recursive "
        "--dereference-recursive --no-group-separator --help --version"),
    long_valued=names(
        "--regexp --file --max-count --label --binary-files --directories --devices --include --exclude "
        "--exclude-from --exclude-dir --after-context --before-context --context --group-separator"),
    long_optional=names("--color --colour"),
    short_to_long={"e": "--regexp", "f": "--file"},
    digits=True,
)

# ---- GNU sed 4 -----------------------------------------------------------------------------------

SED = Spec(
    flags="nErsuz",
    valued="efl",
    optional="i",
    long_flags=names(
        "--quiet --silent --debug --follow-symlinks --posix --regexp-extended --separate --sandbox "
        "--unbuffered --null-data --help --version"),
    long_valued=names("--expression --file --line-length"),
    long_optional=names("--in-place"),
    short_to_long={"e": "--expression", "f": "--file", "i": "--in-place"},
)
SED_REFUSED = {
    "--in-place": WRITES,
    "--file": "reads a sed script from a file, which is not allowed; pass the script with -e",
}

# ---- awk (mawk; gawk-only options are refused) ---------------------------------------------------

AWK = Spec(valued="Fvf", long_flags=frozenset(), permute=False, short_to_long={"f": "-f"})
AWK_REFUSED = {"-f": "reads an awk program from a file, which is not allowed; pass the program inline"}

# ---- GNU coreutils ---------------------------------------------------------------------------------

SORT = Spec(
    flags="bcCdfghiMmnRrsuVz",
    valued="koStT",
    long_flags=names(
        "--ignore-leading-blanks --dictionary-order --ignore-case --general-numeric-sort --ignore-nonprinting "
        "--month-sort --human-numeric-sort --numeric-sort --random-sort --reverse --version-sort --debug "
        "--merge --stable --unique --zero-terminated --help --version"),
    long_valued=names(
        "--sort --random-source --batch-size --compress-program --files0-from --key --output --buffer-size "
        "--field-separator --temporary-directory --parallel"),
    long_optional=names("--check"),
    short_to_long={"o": "--output", "T": "--temporary-directory"},
)
SORT_REFUSED = {
    "--output": WRITES + "; the sorted lines are printed to stdout anyway",
    "--temporary-directory": "chooses where sort writes temporary files, which is not allowed",
    "--compress-program": RUNS_PROGRAM,
    "--files0-from": "reads file names from a file, which is not allowed; name corpus.jsonl directly",
}

UNIQ = Spec(
    flags="cdDiuz",
    valued="fsw",
    long_flags=names("--count --repeated --ignore-case --unique --zero-terminated --help --version"),
    long_valued=names("--skip-fields --skip-chars --check-chars"),
    long_optional=names("--all-repeated --group"),
    digits=True,
)

HEAD = Spec(
    flags="qvz",
    valued="cn",
    long_flags=names("--quiet --silent --verbose --zero-terminated --help --version"),
    long_valued=names("--bytes --lines"),
    digits=True,
)

TAIL = Spec(
    flags="fFqvz",
    valued="cns",
    long_flags=names("--quiet --silent --verbose --zero-terminated --retry --help --version"),
    long_valued=names("--bytes --lines --max-unchanged-stats --pid --sleep-interval"),
    long_optional=names("--follow"),
    short_to_long={"f": "--follow", "F": "--follow"},
    digits=True,
)
TAIL_REFUSED = {"--follow": "follows the file forever; use tail -n N", "--retry": "only useful with --follow",
                "--pid": "only useful with --follow"}

CAT = Spec(
    flags="AbeEnstTuv",
    long_flags=names(
        "--show-all --number-nonblank --show-ends --number --squeeze-blank --show-tabs --show-nonprinting "
        "--help --version"),
)

LS = Spec(
    flags="aAbBcCdDfFgGhHiklLmnNopqQrRsStuUvxXZ1",
    valued="ITw",
    long_flags=names(
        "--all --almost-all --author --escape --ignore-backups --directory --dired --classify --file-type "
        "--no-group --human-readable --si --dereference-command-line "
        "--dereference-command-line-symlink-to-dir --inode --kibibytes --dereference --numeric-uid-gid "
        "--literal --hide-control-chars --show-control-chars --quote-name --reverse --recursive --size "
        "--context --zero --help --version --full-time --group-directories-first"),
    long_valued=names(
        "--block-size --format --hide --ignore --quoting-style --sort --tabsize --time --time-style --width"),
    long_optional=names("--color --colour --hyperlink --indicator-style --classify"),
)

WC = Spec(
    flags="cmlLw",
    long_flags=names("--bytes --chars --lines --max-line-length --words --help --version"),
    long_valued=names("--files0-from --total"),
)
WC_REFUSED = {"--files0-from": SORT_REFUSED["--files0-from"]}

CUT = Spec(
    flags="nsz",
    valued="bcdf",
    long_flags=names("--complement --only-delimited --zero-terminated --help --version"),
    long_valued=names("--bytes --characters --delimiter --fields --output-delimiter"),
)

TR = Spec(
    flags="cCdst",
    long_flags=names("--complement --delete --squeeze-repeats --truncate-set1 --help --version"),
)


#: The table each program's argv is parsed with (find has its own expression grammar, program_checks.py).
SPECS = {"rg": RG, "grep": GREP, "sed": SED, "awk": AWK, "sort": SORT, "uniq": UNIQ, "head": HEAD, "tail": TAIL,
         "cat": CAT, "ls": LS, "wc": WC, "cut": CUT, "tr": TR}


def stage_args(stage: Stage) -> ParsedArgs:
    """The stage's options and operands: the policy's own parse when it checked the stage, so readers
    after it (planner, index) see exactly what the check saw; parsed here only for a Stage built by hand.
    Raises Refused (a hand-built stage the policy would refuse) or KeyError (find)."""
    if stage.args is not None:
        return stage.args
    return parse_args(stage.program, list(stage.argv[1:]), SPECS[stage.program])
