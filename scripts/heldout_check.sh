#!/usr/bin/env bash
# The #21 held-out check shared by scripts/coldstart_check.sh and scripts/grpo_repeat_check.sh: the
# format-check of MODEL on the same 60 held-out questions (20 HotpotQA, 20 MuSiQue, 20 PopQA), then what came
# before each repeat, beside the cold-start data the model learned from.
#   scripts/heldout_check.sh runs/exp29/models/sft runs/exp29/fc60_192 runs/exp29/coldstart/train.jsonl
set -euo pipefail
if [ $# -ne 3 ]; then
  echo "usage: $0 MODEL OUT_DIR COLDSTART_JSONL" >&2
  exit 2
fi
BIN=${BIN:-.venv/bin}
for need in "$1/config.json" "$3"; do
  if [ ! -f "$need" ]; then
    echo "$0: $need not found: MODEL must be a saved model directory and COLDSTART_JSONL a file" >&2
    exit 2
  fi
done
"$BIN/grepseek" train format-check --model "$1" --benchmarks hotpotqa,musique,popqa --limit 60 \
  --max-obs-tokens 256 --max-new-tokens 192 --batch-size 24 --out "$2"
"$BIN/python" scripts/repeat_context.py --episodes "$2/format_check_episodes.jsonl" --coldstart "$3"
