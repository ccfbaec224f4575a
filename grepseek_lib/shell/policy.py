"""Decide what may run: a bash-exact word splitter plus per-program argv checks.

Model output is hostile input, so nothing here searches the raw text for bad words. The command is
split into words exactly as bash would split it (words.py), anything bash would *expand* or
*redirect* is refused, and each stage's argv is parsed the way its program parses it (options.py,
specs.py, program_checks.py, sed_awk.py), so that the options that run programs, write files or read
other files are found wherever they hide (clusters, `--opt=val`, after operands). Every path a
program would open must stay inside the corpus folder. docs/REFUSALS.md lists every refusal and why.
"""

from __future__ import annotations

from grepseek_lib.shell.program_checks import CHECKS
from grepseek_lib.shell.sed_awk import check_awk_program, check_sed_script
from grepseek_lib.shell.types import EXIT_REFUSED, Pipeline, Refused, RunResult, Stage
from grepseek_lib.shell.words import split_stages

#: The public entry points; the splitter and script checks are re-exported for their tests.
__all__ = ["ALLOWED_PROGRAMS", "MAX_COMMAND_CHARS", "MAX_STAGES", "check_awk_program", "check_sed_script",
           "check_stage", "hardened_argv", "parse_command", "refusal_line", "refused_result", "split_stages"]

ALLOWED_PROGRAMS = ("rg", "grep", "find", "sed", "awk", "head", "tail", "cat", "ls", "wc", "sort", "cut",
                    "uniq", "tr")

#: Bounds on one command: more stages is a process flood, a longer text is not a search.
MAX_STAGES = 16
MAX_COMMAND_CHARS = 32_768


def refusal_line(reason: str | Refused) -> str:
    """The one stderr line every refusal is reported with (CLI and tool payload alike)."""
    return f"refused: {reason}"


def refused_result(exc: Refused | str) -> RunResult:
    """What a refused command returns: nothing ran, status 126, one `refused:` line on stderr."""
    return RunResult(b"", (refusal_line(exc) + "\n").encode(), EXIT_REFUSED)


def check_stage(argv: list[str]) -> Stage:
    """Check one stage's argv (after quote removal); the Stage carries the parse the check made."""
    program = argv[0]
    if program not in CHECKS:
        allowed = " ".join(ALLOWED_PROGRAMS)
        shown = program if len(program) <= 40 else program[:40] + "..."
        raise Refused(f"{shown!r} is not an allowed program; use only: {allowed} (joined by |)")
    args = CHECKS[program](list(argv[1:]))
    return Stage(tuple(argv), args)


def parse_command(text: str) -> Pipeline:
    """Parse and check a command; return the Pipeline to run or raise Refused with a one-line reason."""
    if not isinstance(text, str):
        raise Refused("the command must be a string")
    if len(text) > MAX_COMMAND_CHARS:
        raise Refused(f"the command is longer than {MAX_COMMAND_CHARS} characters; write a shorter pipeline")
    words = split_stages(text)
    if len(words) > MAX_STAGES:
        raise Refused(f"at most {MAX_STAGES} pipeline stages are allowed, got {len(words)}")
    stages = tuple(check_stage(argv) for argv in words)
    return Pipeline(text=text, stages=stages)


def hardened_argv(stage: Stage) -> list[str]:
    """The argv the runner starts: the stage's, plus arguments that never change what an accepted
    command prints (GNU sed's sandbox rejects e/r/w even if the script walk ever missed one)."""
    argv = list(stage.argv)
    if stage.program == "sed":
        argv.insert(1, "--sandbox")
    return argv
