"""The merge rules of the sharded engine: how per-shard outputs become exactly what one run prints.

The planner (plan.py) proves which rule is exact for a pipeline; this module applies it, and raises
Fallback whenever the shards did something the rule does not explain, so the engine answers with
one sequential run instead of a guess.
"""

from __future__ import annotations

import subprocess
import time

from grepseek_lib.shell import plan as planner
from grepseek_lib.shell.folder import private_dir
from grepseek_lib.shell.merge import first_lines, renumber, shift
from grepseek_lib.shell.runner import child_env, resolve_program
from grepseek_lib.shell.shards import Manifest
from grepseek_lib.shell.types import RunResult


class Fallback(Exception):
    """The shards did something one run would not explain: answer with one sequential run."""


def check_shard(result: RunResult, chosen: planner.Plan) -> None:
    """A shard is trusted only if it behaved as a clean run: no message, no cut, a normal status."""
    if result.stderr or result.truncated:
        raise Fallback
    last = chosen.parallel[-1].program
    allowed = (0, 1) if last in ("rg", "grep") else (0,)
    if result.exit_code not in allowed:
        raise Fallback


class Merger:
    """Accumulates shard outputs in shard order and applies the plan's merge rule."""

    def __init__(self, chosen: planner.Plan, manifest: Manifest) -> None:
        self.plan = chosen
        self.manifest = manifest
        self.parts: list[bytes] = []
        self.lines = 0
        self.size = 0

    def add(self, index: int, out: bytes) -> bool:
        """Take shard `index`'s output; True once a head plan needs nothing from later shards."""
        p = self.plan
        if p.renumber is not None and index > 0:  # shard 0 starts the file: its numbers are right
            shard = self.manifest.shards[index]
            try:
                out = renumber(out, p.renumber, shift(shard.first_line - 1), shift(shard.byte_offset))
            except ValueError:
                raise Fallback from None
        if p.strategy != planner.HEAD:
            self.parts.append(out)
            return False
        if p.head_bytes is not None:
            out = out[: p.head_bytes - self.size]
            self.parts.append(out)
            self.size += len(out)
            return self.size >= p.head_bytes
        out = first_lines(out, p.head_lines - self.lines)
        self.parts.append(out)
        self.lines += out.count(b"\n")
        return self.lines >= p.head_lines

    def finish(self, results: list[RunResult], deadline: float) -> tuple[bytes, int]:
        p = self.plan
        codes = [r.exit_code for r in results]
        if p.strategy in (planner.CONCAT, planner.HEAD):
            code = (0 if 0 in codes else 1) if p.match_exit else 0
            return b"".join(self.parts), code
        if p.strategy == planner.SUM:
            return _sum_counts(self.parts, codes)
        if p.strategy == planner.SORT_MERGE:
            return _sort_merge(self.parts, p, deadline), 0
        raise AssertionError(p.strategy)


def _sum_counts(parts: list[bytes], codes: list[int]) -> tuple[bytes, int]:
    """Add `N[suffix]\\n` counts; zero keeps the shards' own (identical) zero output and status."""
    total = 0
    shapes = set()
    for out in parts:
        if not out:
            continue
        head, sep, rest = out.partition(b"\n")
        digits_end = len(head) - len(head.lstrip(b"0123456789"))
        if not sep or rest or digits_end == 0:
            raise Fallback
        total += int(head[:digits_end])
        shapes.add(head[digits_end:])
    if total == 0:
        if len(set(parts)) != 1 or len(set(codes)) != 1:
            raise Fallback
        return parts[0], codes[0]
    if len(shapes) != 1 or any(c not in (0, 1) for c in codes) or 0 not in codes:
        raise Fallback
    return b"%d%s\n" % (total, shapes.pop()), 0


def _sort_merge(parts: list[bytes], p: planner.Plan, deadline: float) -> bytes:
    """`sort -m` with the same options over the per-shard results, then uniq and head again."""
    sort = resolve_program("sort")
    if sort is None:
        raise Fallback
    with private_dir("sortm") as folder:
        names = []
        for i, out in enumerate(parts):
            name = f"part-{i:03d}"
            (folder / name).write_bytes(out)
            names.append(name)
        try:
            proc = subprocess.run(["sort", "-m", *p.sort_options, "--", *names], executable=sort, cwd=folder,
                                  env={**child_env(), "TMPDIR": str(folder)}, capture_output=True,
                                  timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise Fallback from None
        if proc.returncode != 0 or proc.stderr:
            raise Fallback
        merged = proc.stdout
    if p.merge_uniq:
        merged = _uniq(merged)
    return first_lines(merged, p.head_lines or 0)


def _uniq(data: bytes) -> bytes:
    """Bare `uniq`: drop a line equal to the one before it."""
    lines = data.split(b"\n")
    tail = lines.pop()
    kept = [line for k, line in enumerate(lines) if k == 0 or line != lines[k - 1]]
    out = b"".join(line + b"\n" for line in kept)
    if tail and (not lines or tail != lines[-1]):
        out += tail
    return out

