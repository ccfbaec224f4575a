#!/usr/bin/env bash
# One #21 check of a cold-start recipe (docs/RESULTS.md, "Counts taught the repeats"): the cold start of the
# first 120 training questions of each split with the given `grepseek coldstart` options, SFT of SmolLM2 on
# it (cpu config, max_length 4096 as the pipeline's 03_sft), the format-check on the same 60 held-out
# questions as exp26, and what came before each repeat.
#   scripts/coldstart_check.sh runs/exp29 --probe-rate 0 --fill-budget-rate 0
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: $0 OUT_DIR [grepseek coldstart options...]" >&2
  exit 2
fi
OUT=$1
shift
BIN=${BIN:-.venv/bin}
mkdir -p "$OUT"
printf 'base: cpu\nsft:\n  max_length: 4096\n' > "$OUT/sft.yaml"
"$BIN/grepseek" coldstart --splits hotpotqa_train,musique_train --limit 120 --out "$OUT/coldstart" \
  --tokenizer smollm2 --max-obs-tokens 256 "$@"
"$BIN/grepseek" train sft --config "$OUT/sft.yaml" --data "$OUT/coldstart/train.jsonl" --out "$OUT/models/sft"
BIN="$BIN" scripts/heldout_check.sh "$OUT/models/sft" "$OUT/fc60_192" "$OUT/coldstart/train.jsonl"
