"""Cold start as one library call: questions -> verified trajectories -> the chat dataset and its report.

`grepseek coldstart` and the `02_cold_start` notebook both call `build_coldstart`; every processed question
is appended to OUT/records.jsonl at once, so a killed run resumes where it stopped.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grepseek_lib import config
from grepseek_lib.agent.backends import make_backend
from grepseek_lib.agent.loop import corpus_lines
from grepseek_lib.coldstart import export
from grepseek_lib.coldstart.accept import FILL_BUDGET_RATE, process_question
from grepseek_lib.coldstart.chain import DETOUR_RATE, FILL_WITH, OTHER_NAME_RATE, PROBE_RATE, ZERO_COUNT_RATE
from grepseek_lib.coldstart.derive import with_single_hops
from grepseek_lib.coldstart.offline import OfflinePlanner, OfflineTutor
from grepseek_lib.coldstart.roles import Item, LLMPlanner, LLMTutor, Planner, TeacherClient, Tutor
from grepseek_lib.coldstart.searches import BLIND_GUESS_RATE, PHRASE_FIRST_RATE
from grepseek_lib.data.formats import benchmark_path, iter_corpus, load_benchmark
from grepseek_lib.errors import UserError
from grepseek_lib.progress import progress_bar
from grepseek_lib.shell.open import open_tool, resolve_corpus

STATS = "stats.json"


@dataclass
class Teacher:
    """Who plays Tutor and Planner: `offline` (dataset annotations, no LLM) or `openai` (a server)."""

    kind: str = "offline"
    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None
    max_new_tokens: int = 512


@dataclass
class ColdStartSettings:
    """How trajectories are drawn (see chain.py / accept.py for what each rate replays)."""

    seed: int = 0
    probe_rate: float = PROBE_RATE
    fill_budget_rate: float = FILL_BUDGET_RATE
    fill_with: str = "counts"
    single_hops: bool = False
    detour_rate: float = DETOUR_RATE
    zero_count_rate: float = ZERO_COUNT_RATE
    other_name_rate: float = OTHER_NAME_RATE
    blind_guess_rate: float = BLIND_GUESS_RATE
    phrase_first_rate: float = PHRASE_FIRST_RATE
    repeat_recovery_rate: float = export.REPEAT_RECOVERY_RATE
    max_hops: int = 3
    dev_percent: float = 10.0
    timeout: float = config.DEFAULT_TIMEOUT_S
    max_obs_tokens: int = config.DEFAULT_MAX_OBS_TOKENS

    def __post_init__(self) -> None:
        if self.fill_with not in FILL_WITH:
            raise UserError(f"fill_with must be one of {', '.join(FILL_WITH)}, got {self.fill_with!r}")


@dataclass
class ColdStartResult:
    out: Path
    report: dict[str, Any]
    sizes: dict[str, int]
    processed: int
    resumed: int
    wall_s: float
    records: list[dict] = field(default_factory=list)


def load_items(splits: list[str], limit: int | None = None) -> list[Item]:
    """The training questions: the first `limit` of each split (a benchmark name or a FlashRAG file)."""
    return [Item(r["id"], r["question"], r["golden_answers"], benchmark_path(name).stem, r["metadata"])
            for name in splits for r in load_benchmark(name, limit)]


def gold_passages(corpus: Path, items: list[Item]) -> dict[str, str]:
    """Contents of the annotated evidence passages (one streaming pass; the offline Tutor reads them)."""
    wanted = set()
    for item in items:
        for ids in (item.metadata.get("gold_passages") or {}).values():
            wanted.update(str(i) for i in (ids if isinstance(ids, list) else [ids]))
    found: dict[str, str] = {}
    if wanted:
        for passage in iter_corpus(corpus):
            if passage["id"] in wanted:
                found[passage["id"]] = passage["contents"]
    return found


def make_roles(teacher: Teacher, passages: dict[str, str], settings: ColdStartSettings) -> tuple[Tutor, Planner]:
    if teacher.kind == "offline":
        return OfflineTutor(passages, max_hops=settings.max_hops, blind_guess_rate=settings.blind_guess_rate,
                            phrase_first_rate=settings.phrase_first_rate), OfflinePlanner()

    kw = {k: v for k, v in (("base_url", teacher.base_url), ("api_key", teacher.api_key)) if v is not None}
    client = TeacherClient(make_backend("openai", teacher.model, **kw), max_new_tokens=teacher.max_new_tokens)
    return LLMTutor(client, max_hops=settings.max_hops), LLMPlanner(client)


def build_coldstart(splits: list[str], out: Path, *, corpus: Path | None = None, shards: Path | None = None,
                    limit: int | None = None, tokenizer: Any = None, teacher: Teacher | None = None,
                    settings: ColdStartSettings | None = None, progress: bool = True) -> ColdStartResult:
    """Process every question not yet in OUT/records.jsonl, then rewrite the dataset files and stats.json.

    `tokenizer` is the target policy's (observations are cut with it, as at inference)."""
    teacher, settings = teacher or Teacher(), settings or ColdStartSettings()
    items = load_items(splits, limit)
    items = with_single_hops(items) if settings.single_hops else items
    corpus, shards = resolve_corpus(corpus, shards)
    tool = open_tool(corpus, shards, timeout=settings.timeout, max_obs_tokens=settings.max_obs_tokens,
                     tokenizer=tokenizer)
    n_lines = corpus_lines(tool)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    records_path = out / export.RECORDS
    done = export.load_records(records_path)
    todo = [item for item in items if (item.source, item.id) not in done]
    passages = gold_passages(corpus, todo) if teacher.kind == "offline" else {}
    tutor, planner = make_roles(teacher, passages, settings)
    began = time.perf_counter()
    accepted = 0
    bar = progress_bar(todo, desc="coldstart", unit="q", disable=not progress)
    for item in bar:
        outcome = process_question(item, tutor, planner, tool, seed=settings.seed, probe_rate=settings.probe_rate,
                                   fill_budget_rate=settings.fill_budget_rate, detour_rate=settings.detour_rate,
                                   zero_count_rate=settings.zero_count_rate,
                                   other_name_rate=settings.other_name_rate, fill_with=settings.fill_with)
        record = export.make_record(item, outcome, n_lines, max_obs_tokens=tool.max_obs_tokens,
                                    repeat_recovery_rate=settings.repeat_recovery_rate)
        export.append_record(records_path, record)
        done[(item.source, item.id)] = record
        accepted += outcome.accepted
        bar.set_postfix(accepted=accepted)
    ordered = [done[(item.source, item.id)] for item in items if (item.source, item.id) in done]
    sizes = export.export(out, ordered, settings.dev_percent)
    report = export.stats(ordered)
    if tokenizer is not None:
        report["all"]["assistant_turn_tokens"] = export.turn_tokens(ordered, tokenizer)
    (out / STATS).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return ColdStartResult(out, report, sizes, len(todo), len(items) - len(todo),
                           time.perf_counter() - began, ordered)
