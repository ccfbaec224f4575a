"""Run the agent over benchmarks and score it: per-question records, trajectories, EM / F1 tables.

Long runs get killed; so every finished batch is appended to `records.jsonl` and `trajectories.jsonl`
at once, and a rerun with the same `out_dir` skips the (benchmark, id) pairs already recorded.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

from grepseek_lib import config
from grepseek_lib.agent.actions import format_gate
from grepseek_lib.agent.backends import make_batch_backend
from grepseek_lib.agent.evidence import trajectory_report
from grepseek_lib.agent.loop import (
    DEFAULT_MAX_CONTEXT_TOKENS,
    DEFAULT_MAX_NEW_TOKENS,
    even_batches,
    run_batch,
)
from grepseek_lib.agent.trajectory import Trajectory, append_jsonl
from grepseek_lib.data.formats import benchmark_path, load_benchmark
from grepseek_lib.data.importer import FLASHRAG_FILES
from grepseek_lib.errors import UserError
from grepseek_lib.metrics import aggregate, exact_match, f1
from grepseek_lib.progress import progress_bar
from grepseek_lib.shell.open import open_tool, resolve_corpus

RECORDS = "records.jsonl"
TRAJECTORIES = "trajectories.jsonl"
RESULTS = "results.parquet"
TABLE_MD, TABLE_CSV = "table.md", "table.csv"
#: Columns of the summary table: the paper's metrics, the search report (share of questions whose tool outputs
#: held a gold answer; share that ran some command twice), then tool calls and wall seconds per question
#: (a batch's wall time shared by its questions; llm_s / tool_s per episode stay in the records).
TABLE_METRICS = ("em", "f1", "format_pass", "evidence_found", "repeated_command", "tool_calls", "wall_s")


#: FlashRAG split files; `.../nq/test.jsonl` is benchmark `nq` (a train split gets `_train`, as in our names).
_SPLIT_STEMS = ("test", "dev", "val", "validation", "train")
#: FlashRAG folder -> our benchmark name, where they differ (2wikimultihopqa -> 2wiki).
_FLASHRAG_NAMES = {Path(rel).parent.name: name for name, rel in FLASHRAG_FILES.items()}


def load_questions(benchmark: str, limit: int | None = None, benchmarks_dir: Path | None = None) -> list[dict]:
    """The first `limit` questions of a benchmark (a name in the benchmarks folder, or a FlashRAG file)."""
    source = _source_path(benchmark, benchmarks_dir)
    questions = load_benchmark(source, limit)
    if not questions and (limit is None or limit > 0):
        raise UserError(f"benchmark {benchmark!r}: {source} holds no questions; fix the file or drop it")
    return questions


def _source_path(benchmark: str, benchmarks_dir: Path | None) -> Path:
    return Path(benchmarks_dir) / f"{benchmark}.jsonl" if benchmarks_dir else benchmark_path(benchmark)


def benchmark_name(benchmark: str) -> str:
    """`nq` stays `nq`; a FlashRAG path `.../nq/test.jsonl` is `nq`; any other file is its stem."""
    path = Path(benchmark)
    stem = path.name.removesuffix(".gz").removesuffix(".jsonl")
    folder = path.parent.name
    if stem in _SPLIT_STEMS and folder:
        name = _FLASHRAG_NAMES.get(folder, folder)
        return f"{name}_train" if stem == "train" else name
    return stem


def plan_benchmarks(benchmarks: Sequence[str], benchmarks_dir: Path | None = None) -> list[tuple[str, str]]:
    """(name, source) per benchmark, names unique: a repeated source is dropped, two sources with one name refused.

    Records are keyed by (benchmark, id), so two files under one name would merge into one table row and
    their ids (FlashRAG's `test_0` ...) would mark each other's questions as done.
    """
    chosen: dict[str, tuple[str, Path]] = {}
    for source in benchmarks:
        name, path = benchmark_name(source), _source_path(source, benchmarks_dir).expanduser().resolve()
        if name in chosen and chosen[name][1] != path:
            raise UserError(f"--benchmarks: {chosen[name][0]} and {source} would both be named {name!r}; "
                            "evaluate them into separate --out folders")
        chosen.setdefault(name, (source, path))
    return [(name, source) for name, (source, _) in chosen.items()]


def plan_questions(benchmarks: Sequence[str], limit: int | None = None,
                   benchmarks_dir: Path | None = None) -> list[tuple[str, dict]]:
    """Every (benchmark name, question) an eval asks, in order; fails on a missing or empty benchmark."""
    return [(name, q) for name, source in plan_benchmarks(benchmarks, benchmarks_dir)
            for q in load_questions(source, limit, benchmarks_dir)]


def read_records(out_dir: Path) -> list[dict]:
    """Records written so far (a half-written last line from a killed run is dropped)."""
    path = Path(out_dir) / RECORDS
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def drop_partial_line(path: Path) -> None:
    """Cut a half-written last line (a killed run) so the next append starts on a fresh line."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return
    with path.open("rb+") as handle:
        handle.seek(-1, 2)
        if handle.read(1) == b"\n":
            return
        handle.seek(0)
        data = handle.read()
        handle.truncate(data.rfind(b"\n") + 1)


def make_record(traj: Trajectory, benchmark: str, wall_s: float,
                max_tool_calls: int = config.MAX_TOOL_CALLS) -> dict:
    """One scored question; `wall_s` is the question's share of its batch's wall time. `format_pass` is the
    reward's format gate on the whole episode (what GRPO would pay for), not just "no two errors in a row"."""
    return {"id": traj.id, "benchmark": benchmark, "question": traj.question, "golds": list(traj.golds),
            "prediction": traj.answer, "em": exact_match(traj.answer, traj.golds),
            "f1": f1(traj.answer, traj.golds), "tool_calls": traj.tool_calls,
            "format_pass": format_gate(traj.assistant_texts(), max_tool_calls=max_tool_calls)[0],
            "format_errors": traj.format_errors, "turns": len(traj.turns), "stop_reason": traj.stop_reason,
            "prompt_tokens": sum(t.prompt_tokens for t in traj.turns),
            "completion_tokens": sum(t.completion_tokens for t in traj.turns),
            "llm_s": traj.llm_s, "tool_s": traj.tool_s, "total_s": traj.llm_s + traj.tool_s, "wall_s": wall_s,
            **trajectory_report(traj)}


def markdown_table(table) -> str:
    """A pipe table (pandas' to_markdown needs an extra package)."""
    header = [table.index.name or "", *map(str, table.columns)]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for name, row in table.iterrows():
        cells = [str(int(v)) if col == "n" else f"{v:.4f}" for col, v in row.items()]
        lines.append("| " + " | ".join([str(name), *cells]) + " |")
    return "\n".join(lines) + "\n"


def write_tables(out_dir: Path, metrics: Sequence[str] = TABLE_METRICS):
    """results.parquet (one row a question) + table.md / table.csv (per benchmark, micro, macro)."""
    import pandas as pd

    out_dir = Path(out_dir)
    frame = pd.DataFrame(read_records(out_dir))
    if frame.empty:
        return aggregate(pd.DataFrame(columns=["benchmark", *metrics]), metrics=metrics)
    frame.to_parquet(out_dir / RESULTS, index=False)
    for column in metrics:  # records from before a column existed
        if column not in frame.columns:
            frame[column] = float("nan")
    table = aggregate(frame, by="benchmark", metrics=metrics)
    table.to_csv(out_dir / TABLE_CSV)
    (out_dir / TABLE_MD).write_text(markdown_table(table), encoding="utf-8")
    return table


def evaluate(model: str = "smollm2", backend_kind: str = "hf", benchmarks: Sequence[str] = config.BENCHMARKS,
             limit: int | None = 50, out_dir: Path | None = None, *, batch_size: int = 8,
             corpus: Path | None = None, shards: Path | None = None, backend=None, tool=None,
             benchmarks_dir: Path | None = None, temperature: float = 0.0, redraws: int = 0,
             max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, max_context_tokens: int = DEFAULT_MAX_CONTEXT_TOKENS,
             max_tool_calls: int = config.MAX_TOOL_CALLS, timeout: float = config.DEFAULT_TIMEOUT_S,
             max_obs_tokens: int = config.DEFAULT_MAX_OBS_TOKENS, backend_kwargs: dict | None = None,
             progress: bool = True):
    """Evaluate the agent; returns the summary table (rows: benchmarks, micro, macro; columns n, em, f1,
    tool_calls, wall_s). `batch_size` episodes run in lockstep (one batched generate per turn).
    Pass `backend` / `tool` to reuse built ones; otherwise they are made from model / backend_kind / corpus.
    `redraws` > 0 draws a turn that repeats an earlier command again (`run_batch`).
    """

    out_dir = Path(out_dir) if out_dir else config.runs_dir() / "eval"
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in (RECORDS, TRAJECTORIES):
        drop_partial_line(out_dir / name)
    done = {(r.get("benchmark"), str(r.get("id"))) for r in read_records(out_dir)}
    pending = [(name, q) for name, q in plan_questions(benchmarks, limit, benchmarks_dir)
               if (name, q["id"]) not in done]
    if pending:
        if tool is None:
            corpus, shards = resolve_corpus(corpus, shards)  # fail on a bad path before loading a model
        backend = backend or make_batch_backend(backend_kind, model, batch_size, backend_kwargs)
        tool = tool or open_tool(corpus, shards, timeout=timeout, max_obs_tokens=max_obs_tokens,
                                 tokenizer=getattr(backend, "tokenizer", None))
        bar = progress_bar(total=len(pending), desc="eval", unit="q", disable=not progress)
        for batch in even_batches(pending, batch_size):
            began = time.perf_counter()
            trajs = run_batch([q for _, q in batch], backend, tool, max_tool_calls=max_tool_calls,
                              max_new_tokens=max_new_tokens, max_context_tokens=max_context_tokens,
                              temperature=temperature, redraws=redraws)
            wall_s = (time.perf_counter() - began) / len(batch)
            for (name, _), traj in zip(batch, trajs, strict=True):
                traj.meta["benchmark"] = name
            records = [make_record(traj, name, wall_s, max_tool_calls)
                       for (name, _), traj in zip(batch, trajs, strict=True)]
            append_jsonl(trajs, out_dir / TRAJECTORIES)
            with (out_dir / RECORDS).open("a", encoding="utf-8") as handle:
                handle.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
            bar.update(len(batch))
            bar.set_postfix(f1=f"{sum(r['f1'] for r in records) / len(records):.3f}", s_per_q=f"{wall_s:.1f}")
        bar.close()
    return write_tables(out_dir)


