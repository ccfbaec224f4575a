"""Value types shared by the policy, the runner, the engine and the tool."""

from __future__ import annotations

from dataclasses import dataclass

#: Exit codes of the `grepseek run` contract (the same numbers bash uses).
EXIT_REFUSED = 126
EXIT_TIMEOUT = 124


class Refused(Exception):
    """A command the policy will not run; str(exc) is a one-line reason the agent can act on."""


@dataclass(frozen=True)
class Stage:
    """One program of a pipeline: argv after quote removal, argv[0] a bare allowed program name."""

    argv: tuple[str, ...]

    @property
    def program(self) -> str:
        return self.argv[0]


@dataclass(frozen=True)
class Pipeline:
    """An accepted command: its original text and its stages, joined by pipes."""

    text: str
    stages: tuple[Stage, ...]


@dataclass
class RunResult:
    """What a pipeline printed and how it ended (exit code of the last stage, as bash without pipefail)."""

    stdout: bytes
    stderr: bytes
    exit_code: int
    timed_out: bool = False
    truncated: bool = False
