"""Value types shared by the policy, the runner, the engine and the tool."""

from __future__ import annotations

from dataclasses import dataclass, field

#: Exit codes of the `grepseek run` contract (the same numbers bash uses).
EXIT_REFUSED = 126
EXIT_TIMEOUT = 124


class Refused(Exception):
    """A command the policy will not run; str(exc) is a one-line reason the agent can act on."""


@dataclass
class ParsedArgs:
    """A stage's argv split the way its program splits it (options.parse_args)."""

    options: list[tuple[str, str | None]]  #: (canonical name such as "--file", value)
    operands: list[str]

    def has(self, *names: str) -> bool:
        return any(name in names for name, _ in self.options)

    def values(self, *names: str) -> list[str]:
        return [value or "" for name, value in self.options if name in names]


@dataclass(frozen=True)
class Stage:
    """One program of a pipeline: argv after quote removal, argv[0] a bare allowed program name."""

    argv: tuple[str, ...]
    #: The policy's parse of argv[1:], kept so later readers (the planner) need not parse again;
    #: None for find and for a Stage built by hand. Not part of equality: argv alone says what runs.
    args: ParsedArgs | None = field(default=None, compare=False, repr=False)

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
