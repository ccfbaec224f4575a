"""Training and generation benchmark: float32 as it ran before vs the new path, same examples, one run.

SFT: the CPU config's first `steps` steps on the same cold-start examples, once per path and repeat (float32
with trl's LM head as before, and the new precision with the labelled-positions head, alternating), timing
each optimizer step; the loss curves of both are kept
and compared step by step. Generation: the HF backend on the same agent opening prompts, greedy, `generate`
in float32 (how the backend decoded before) vs the lean loop in the new precision, alternating; tokens/s of
each backend's first batch and of later batches of new questions (the eval's steady state), and whether the
texts are identical. Episodes: the real agent loop with the real shell tool on held-out questions
(greedy, the protocol's observation cap), as episodes ran before (float32 `generate`, every turn reading its
whole prompt) vs the new path (lean loop, key/value reuse across turns), and the reuse alone on the lean loop;
seconds per episode and whether the trajectories are identical. GRPO: one seeded step of the CPU config as it
ran before (float32, trl's LM head, trl's `generate` every turn) vs the new path, and the lean rollouts alone;
seconds per rollout and whether the rewards agree. Reported: medians, the ratio, the loss curves and their
largest gap.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from grepseek_lib.agent.backends import HFBackend
from grepseek_lib.agent.loop import run_batch
from grepseek_lib.agent.precision import resolve_precision
from grepseek_lib.agent.prompt import initial_messages
from grepseek_lib.shell.tool import ShellTool
from grepseek_lib.train import grpo
from grepseek_lib.train.configs import load_config
from grepseek_lib.train.sft import build_trainer, load_chat_rows

#: Question shapes and places the generation benchmark fills in (a year per question keeps every one distinct):
#: each batch it decodes asks questions no earlier batch asked, so the new path's turn cache replays none.
TEMPLATES = ("Who was the mayor of {place} in {year}?", "Which river flooded {place} in {year}?",
             "What was the population of {place} in {year}?", "Which team from {place} won a title in {year}?")
PLACES = ("Lyon", "Krakow", "Osaka", "Tbilisi", "Quito", "Perth", "Bergen", "Cusco")
#: The corpus size the prompt announces; any number renders a realistic prompt.
N_LINES = 28_960


def step_timer() -> Any:
    """A trainer callback recording the wall time of every optimizer step."""
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.seconds: list[float] = []
            self._start = 0.0

        def on_step_begin(self, args, state, control, **kwargs):
            self._start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.seconds.append(time.perf_counter() - self._start)

    return StepTimer()


def sft_run(data: Path, model: str, precision: str, steps: int, compact_head: bool) -> dict[str, Any]:
    """`steps` SFT steps of the CPU config in `precision`; step seconds and per-step losses."""
    settings = dataclasses.replace(load_config("cpu").sft, precision=precision, save_steps=10**9,
                                   max_examples=steps, logging_steps=1)
    rows = load_chat_rows(data, settings.max_examples)
    with tempfile.TemporaryDirectory(prefix="bench_sft_") as out:
        trainer, _ = build_trainer(rows, model, Path(out), settings, max_steps=steps, compact_head=compact_head)
        timer = step_timer()
        trainer.add_callback(timer)
        trainer.args.disable_tqdm = True
        trainer.train()
    losses = [float(r["loss"]) for r in trainer.state.log_history if "loss" in r]
    return {"seconds": timer.seconds, "losses": losses}


def prompts(n: int, batch: int = 0) -> list[list[dict]]:
    """The opening prompts (the eval's first turn) of batch number `batch`: n questions no other batch asks."""
    numbers = range(batch * n, (batch + 1) * n)
    return [initial_messages(TEMPLATES[i % len(TEMPLATES)].format(
        place=PLACES[i // len(TEMPLATES) % len(PLACES)], year=1800 + i), N_LINES) for i in numbers]


def generation_run(backend: Any, convs: list[list[dict]], max_new_tokens: int) -> dict[str, Any]:
    start = time.perf_counter()
    gens = backend.generate(convs, max_new_tokens=max_new_tokens, temperature=0.0)
    seconds = time.perf_counter() - start
    tokens = sum(int(g.completion_tokens or 0) for g in gens)
    return {"seconds": seconds, "tokens": tokens, "texts": [g.text for g in gens]}


def episode_run(backend: Any, questions: list[dict], tool: ShellTool, max_new_tokens: int) -> dict[str, Any]:
    """The agent loop over `questions` in one lockstep batch; seconds per episode and what every turn did."""
    reused = backend.reused_tokens
    start = time.perf_counter()
    trajectories = run_batch(questions, backend, tool, max_new_tokens=max_new_tokens)
    seconds = time.perf_counter() - start
    return {"seconds": seconds / max(1, len(questions)),
            "turns": [[(t.text, t.observation_text) for t in traj.turns] for traj in trajectories],
            "prompt_tokens": sum(t.prompt_tokens for traj in trajectories for t in traj.turns),
            "reused_tokens": backend.reused_tokens - reused}


def episode_rows(model: str, precision: str, questions: list[dict], tool: ShellTool, repeats: int,
                 max_new_tokens: int) -> list[dict[str, Any]]:
    """Episodes before (float32 `generate`) vs now (lean loop + turn reuse), and turn reuse alone, alternating."""
    backends = {"before": HFBackend(model, device="cpu", batch_size=len(questions), lean=False,
                                    precision="float32", reuse_turns=False),
                "lean": HFBackend(model, device="cpu", batch_size=len(questions), precision=precision,
                                  reuse_turns=False),
                "new": HFBackend(model, device="cpu", batch_size=len(questions), precision=precision)}
    runs: dict[str, list[dict]] = {name: [] for name in backends}
    for _ in range(repeats):
        for name, backend in backends.items():
            runs[name].append(episode_run(backend, questions, tool, max_new_tokens))
    new = runs["new"]
    share = sum(r["reused_tokens"] for r in new) / max(1, sum(r["prompt_tokens"] for r in new))
    turns = sum(len(t) for t in new[0]["turns"])

    def same(name: str) -> str:
        return f"identical trajectories {sum(a['turns'] == b['turns'] for a, b in zip(runs[name], new, strict=True))}/{repeats}"

    note = f"{len(questions)} episodes, {turns} turns, {share:.0%} of prompt tokens reused"
    return [_median_row("agent episode", "s/episode", [r["seconds"] for r in runs["before"]],
                        [r["seconds"] for r in new], False, f"{note}; {same('before')}"),
            _median_row("agent episode, turn reuse alone", "s/episode", [r["seconds"] for r in runs["lean"]],
                        [r["seconds"] for r in new], False, f"old column: lean loop, no reuse; {same('lean')}")]


#: GRPO paths: (precision, labelled-positions head, lean rollouts); "new" takes the benchmark's new precision.
GRPO_PATHS = {"before": ("float32", False, False), "trl generate": (None, True, False), "new": (None, True, True)}


def grpo_run(model: str, questions: list[dict], corpus: Path, path: tuple[str | None, bool, bool],
             generations: int, precision: str) -> dict[str, Any]:
    """One GRPO step of the CPU config (one question, `generations` rollouts) from `model` on `path`
    (GRPO_PATHS), seeded; seconds a rollout (generation, tool calls, scoring, the update) and the rewards."""
    import torch

    path_precision, compact_head, lean = path
    settings = dataclasses.replace(load_config("cpu").grpo, questions_per_step=1, num_generations=generations,
                                   per_device_train_batch_size=1, max_steps=1, probe_candidates=0, save_steps=10**9,
                                   lean_rollouts=lean, precision=path_precision or precision)
    with tempfile.TemporaryDirectory(prefix="bench_grpo_") as out:
        trainer, _ = grpo.build_trainer(model, Path(out), settings, corpus=corpus, questions=questions[:1],
                                        compact_head=compact_head)
        trainer.args.disable_tqdm = True
        trainer.skip_zero_advantages = False  # sampled rewards differ by path: every path runs its update
        torch.manual_seed(settings.seed)
        start = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - start
        parts = grpo.read_reward_parts(Path(out) / grpo.REWARD_PARTS_FILE)
        logged = next((r for r in trainer.state.log_history if "completions/mean_length" in r), {})
    length = float(logged.get("completions/mean_length", 0.0))
    return {"seconds": seconds / generations, "rewards": [p.get("rewards") for p in parts],
            "ms_per_token": 1000 * seconds / (generations * length) if length else float("nan"),
            "shape": f"{length:.0f} tokens, {float(logged.get('tools/call_frequency', 0.0)):.2f} calls"}


def grpo_rows(model: str, questions: list[dict], corpus: Path, repeats: int, generations: int,
              precision: str) -> list[dict[str, Any]]:
    """GRPO s/rollout, the same seeded step on each path of GRPO_PATHS, alternating: float32 with trl's head
    and trl's `generate` (as GRPO ran before) vs the new path, and the lean rollouts alone."""
    runs: dict[str, list[dict]] = {name: [] for name in GRPO_PATHS}
    for _ in range(repeats):
        for name, path in GRPO_PATHS.items():
            runs[name].append(grpo_run(model, questions, corpus, path, generations, precision))
    new = runs["new"]

    def same(name: str) -> str:
        return f"same rewards {sum(a['rewards'] == b['rewards'] for a, b in zip(runs[name], new, strict=True))}/{repeats}"

    def shapes(name: str) -> str:
        return "; ".join(r["shape"] for r in runs[name])

    note = f"1 question x {generations} rollouts, one update"
    return [_median_row("GRPO step", "s/rollout", [r["seconds"] for r in runs["before"]],
                        [r["seconds"] for r in new], False,
                        f"{note}; old column: float32, trl's LM head, trl generate; {same('before')}"),
            _median_row("GRPO step, per rollout token", "ms/token", [r["ms_per_token"] for r in runs["before"]],
                        [r["ms_per_token"] for r in new], False,
                        f"sampled rollouts differ by path; mean rollout length, tool calls: old {shapes('before')}, "
                        f"new {shapes('new')}"),
            _median_row("GRPO step, lean rollouts alone", "s/rollout", [r["seconds"] for r in runs["trl generate"]],
                        [r["seconds"] for r in new], False,
                        f"{note}; old column: {precision} + the new head, trl generate; {same('trl generate')}")]


def _median_row(task: str, unit: str, old: list[float], new: list[float], higher_is_better: bool,
                note: str = "") -> dict[str, Any]:
    a, b = statistics.median(old), statistics.median(new)
    ratio = (b / a if higher_is_better else a / b) if a and b else float("nan")
    return {"task": task, "unit": unit, "float32": round(a, 3), "new": round(b, 3), "speed-up": round(ratio, 2),
            "runs": f"{len(old)}+{len(new)}", "note": note}


def identical_texts(old: list[dict], new: list[dict]) -> str:
    """How many batches decoded the same texts on both paths, as "k/n"."""
    pairs = list(zip(old, new, strict=True))
    return f"{sum(o['texts'] == n['texts'] for o, n in pairs)}/{len(pairs)}"


def generation_rows(gen: dict[str, list[dict]], prompts_n: int, max_new_tokens: int) -> list[dict[str, Any]]:
    """tokens/s of each backend's first batch (cold) and of the later ones (warm: the eval's steady state, every
    batch new questions over the system-prompt cache the backend built once); texts compared batch by batch."""
    def tokens_per_s(runs: list[dict]) -> list[float]:
        return [r["tokens"] / r["seconds"] for r in runs]

    def same(old: str, new: str) -> str:
        return f"identical texts {identical_texts(gen[old], gen[new])}"

    shape = f"{prompts_n} prompts x {max_new_tokens} tokens"
    return [_median_row("greedy generation, first batch", "tokens/s", tokens_per_s(gen["float32 first"]),
                        tokens_per_s(gen["new first"]), True,
                        f"{shape}; each backend's first call (warm-up, system-prompt cache); "
                        f"{same('float32 first', 'new first')}"),
            _median_row("greedy generation", "tokens/s", tokens_per_s(gen["float32"]), tokens_per_s(gen["new"]), True,
                        f"{shape}; after the first batch, new questions every batch; {same('float32', 'new')}")]


def bench_train(model: str, data: Path, *, steps: int, repeats: int, prompts_n: int, max_new_tokens: int,
                precision: str = "auto", gen_repeats: int | None = None, episodes: dict | None = None,
                grpo_setup: dict | None = None) -> dict[str, Any]:
    """The benchmarks, float32 and `precision` alternating; returns {rows, curves, ...} for the report.

    `episodes`: {questions, tool, max_new_tokens} for the agent-episode rows; `grpo_setup`: {questions (training
    ones), corpus, generations} for the GRPO row (None: skipped)."""
    new_precision = resolve_precision(precision, "cpu")
    gen_repeats = gen_repeats or repeats
    old_backend = HFBackend(model, device="cpu", batch_size=prompts_n, lean=False, precision="float32")
    new_backend = HFBackend(model, device="cpu", batch_size=prompts_n, precision=new_precision)
    gen: dict[str, list[dict]] = {"float32": [], "new": [], "float32 first": [], "new first": []}
    for batch in range(gen_repeats + 1):  # batch 0: each backend's first call (warm-up, its system-prompt cache)
        convs = prompts(prompts_n, batch)
        for name, backend in (("float32", old_backend), ("new", new_backend)):
            gen[name if batch else f"{name} first"].append(generation_run(backend, convs, max_new_tokens))
    del old_backend, new_backend
    sft: dict[str, list[dict]] = {"float32": [], "new": []}
    for _ in range(repeats):
        sft["float32"].append(sft_run(data, model, "float32", steps, compact_head=False))
        sft["new"].append(sft_run(data, model, new_precision, steps, compact_head=True))
    curves = {k: [statistics.mean(vals) for vals in zip(*(r["losses"] for r in runs), strict=True)]
              for k, runs in sft.items()}
    gap = max((abs(a - b) for a, b in zip(curves["float32"], curves["new"], strict=True)), default=0.0)
    rows = [
        _median_row("SFT step", "s/step", [s for r in sft["float32"] for s in r["seconds"]],
                    [s for r in sft["new"] for s in r["seconds"]], False, f"max loss gap {gap:.2e}"),
        *generation_rows(gen, prompts_n, max_new_tokens),
    ]
    if grpo_setup:
        rows += grpo_rows(model, grpo_setup["questions"], grpo_setup["corpus"], gen_repeats,
                          grpo_setup["generations"], new_precision)
    if episodes:
        rows += episode_rows(model, new_precision, episodes["questions"], episodes["tool"], gen_repeats,
                             episodes["max_new_tokens"])
    return {"model": model, "precision": new_precision, "steps": steps, "repeats": repeats,
            "gen_repeats": gen_repeats, "rows": rows,
            "curves": curves, "max_loss_gap": gap, "identical_generations": identical_texts(gen["float32"], gen["new"])}


def markdown(report: dict[str, Any]) -> str:
    """The table, then the loss curves of both paths."""
    keys = ["task", "unit", "float32", "new", "speed-up", "runs", "note"]
    lines = [f"model {report['model']}, new path: precision {report['precision']} + lean decode loop"
             " (+ key/value reuse across turns in the episode rows)", "",
             "| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(row[k]) for k in keys) + " |" for row in report["rows"]]
    lines += ["", "| step | loss float32 | loss new |", "|---|---|---|"]
    lines += [f"| {i + 1} | {a:.4f} | {b:.4f} |"
              for i, (a, b) in enumerate(zip(report["curves"]["float32"], report["curves"]["new"], strict=True))]
    lines += ["", f"max per-step loss difference: {report['max_loss_gap']:.2e}"]
    return "\n".join(lines) + "\n"


def write_report(report: dict[str, Any], out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    (out / "train_bench.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    path = out / "train_bench.md"
    path.write_text(markdown(report), encoding="utf-8")
    return path
