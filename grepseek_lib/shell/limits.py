"""The limits of a process chain, how they are applied to each stage, and how a hit is reported.

Memory: one budget for the whole chain (`Limits.chain_memory_bytes`), split evenly as RLIMIT_AS
between its stages, so 16 stages cannot hold 16 times a per-process limit. (A cgroup v2 would cap
the sum directly, but it needs a delegated, writable memory controller, which hosts running cgroup v1
or unprivileged containers do not offer; an rlimit share works on every Linux.) rg falls back from
mmap to reads when a share is smaller than the corpus, and sort sizes its buffer from RLIMIT_AS, so
both stay exact at any share the 16-stage maximum allows.

Files: RLIMIT_FSIZE is 0 for every stage (no allowed command writes) except `sort`, which spills
sorted runs to a private scratch folder once its input outgrows its buffer (a few MB from a pipe);
its per-file cap is far above what the corpus can make it sort. A stage killed by a limit is not a
quiet "no results": `death_note` is the stderr line that says what happened.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import resource
import signal

from grepseek_lib import config
from grepseek_lib.errors import UserError

#: sort's scratch cap per file: this many times the corpus size, and never under SORT_SCRATCH_MIN.
SORT_SCRATCH_FACTOR = 4
SORT_SCRATCH_MIN = 1 << 30
#: CPU seconds are capped at timeout x CPUs (+ slack): a backstop if the parent died unnoticed.
_MAX_CPU_S = 10**7


@dataclasses.dataclass(frozen=True)
class Limits:
    """Resource limits of one chain; none of them changes what an accepted command prints."""

    #: Virtual memory of the whole chain, shared evenly by its stages.
    chain_memory_bytes: int = config.CHAIN_MEMORY_BYTES
    #: Files the stages may write: none (sort's scratch is the one exception, see sort_scratch_bytes).
    file_size_bytes: int = 0
    #: Largest scratch file sort may write; None: SORT_SCRATCH_FACTOR x corpus, at least SORT_SCRATCH_MIN.
    sort_scratch_bytes: int | None = None
    #: stderr kept in a buffered RunResult (streamed stderr is not capped).
    max_stderr_bytes: int = 64 << 10

    def share(self, chains: int) -> Limits:
        """These limits with the memory budget of one of `chains` chains running side by side."""
        return dataclasses.replace(self, chain_memory_bytes=self.chain_memory_bytes // max(1, chains))

    def scratch_bytes(self, corpus_bytes: int) -> int:
        if self.sort_scratch_bytes is not None:
            return self.sort_scratch_bytes
        return max(SORT_SCRATCH_MIN, SORT_SCRATCH_FACTOR * corpus_bytes)


DEFAULT_LIMITS = Limits()


def stage_settings(program: str, stages: int, timeout: float, limits: Limits,
                   corpus_bytes: int) -> list[tuple[int, tuple[int, int]]]:
    """The rlimits of one stage of a `stages`-stage chain: (resource, (soft, hard)) pairs."""
    cpu = int(min(math.ceil(timeout * (os.cpu_count() or 1)), _MAX_CPU_S)) + 2
    memory = limits.chain_memory_bytes // max(1, stages)
    fsize = limits.scratch_bytes(corpus_bytes) if program == "sort" else limits.file_size_bytes
    return [
        (resource.RLIMIT_CPU, (cpu, cpu + 1)),
        (resource.RLIMIT_AS, (memory, memory)),
        (resource.RLIMIT_FSIZE, (fsize, fsize)),
        (resource.RLIMIT_CORE, (0, 0)),
    ]


def apply(pid: int, settings: list[tuple[int, tuple[int, int]]]) -> None:
    """Set rlimits on a started stage (prlimit from the parent: no Python between fork and exec)."""
    for which, value in settings:
        with contextlib.suppress(ProcessLookupError, ValueError, PermissionError):
            resource.prlimit(pid, which, value)


# --------------------------------------------------------------------------------------------------
# Reporting a stage that a signal or a limit killed.
# --------------------------------------------------------------------------------------------------

_WHY = {
    signal.SIGXFSZ: "file size limit",
    signal.SIGXCPU: "CPU time limit",
    signal.SIGKILL: "killed outright: CPU time or memory limit",
    signal.SIGSEGV: "crashed: likely out of memory under the memory limit",
    signal.SIGABRT: "aborted: likely out of memory under the memory limit",
    signal.SIGBUS: "crashed: bus error",
}


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n} bytes"


def death_note(index: int, program: str, signum: int, last: bool, stages: int, limits: Limits,
               corpus_bytes: int) -> str:
    """One stderr line for stage `index` (1-based) of `program`, killed by `signum`: what, and what to do.

    `last`: the stage is the last of the pipeline; `stages`: how many stages shared the memory budget.
    """
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    why = _WHY.get(signum, signal.strsignal(signum) or name)
    if signum == signal.SIGXFSZ and program == "sort":
        hint = f"sort's scratch space is capped at {_size(limits.scratch_bytes(corpus_bytes))} per file"
    elif signum == signal.SIGXFSZ:
        hint = "stages may not write files"
    else:
        hint = f"each of the {stages} stages may use {_size(limits.chain_memory_bytes // max(1, stages))}"
    effect = ("its output is incomplete" if last
              else "the stages after it saw partial input, so the result is incomplete or wrong")
    return (f"note: stage {index} ({program}) was killed by {name} ({why}); {effect}; {hint}: "
            "narrow the input first (rg with a more specific pattern, cut the fields you need)")


def reportable(signum: int) -> bool:
    """A stage killed by SIGPIPE only lost its reader (`| head`), which is normal: not reported."""
    return signum != signal.SIGPIPE


# --------------------------------------------------------------------------------------------------
# Checking user-supplied limits.
# --------------------------------------------------------------------------------------------------


def check_timeout(value: float, what: str = "--timeout") -> float:
    """A finite number of seconds in (0, MAX_TIMEOUT_S]; UserError (one line) otherwise."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise UserError(f"{what} must be a number of seconds, got {value!r}") from None
    if not math.isfinite(seconds) or not 0 < seconds <= config.MAX_TIMEOUT_S:
        raise UserError(f"{what} must be a finite number of seconds in (0, {config.MAX_TIMEOUT_S:g}], got {value}")
    return seconds


def check_max_output_bytes(value: int | None, what: str = "--max-output-bytes") -> int | None:
    """None (no cap) or a whole number >= 1: a cap of 0 would print nothing and look like no match."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserError(f"{what} must be a whole number of bytes >= 1, got {value!r}")
    return value
