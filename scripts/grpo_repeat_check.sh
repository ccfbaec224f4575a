#!/usr/bin/env bash
# One #21 check of GRPO against repeats (docs/RESULTS.md, "GRPO against repeats"): GRPO of an SFT model
# with `repeat_penalty` (cpu config; STEPS (default 8) steps of 2 probe-chosen questions x G=4, pool 8, the same 1536-token
# completions and 256-token observation cap as the default profile), then the format-check on the same 60
# held-out questions as scripts/coldstart_check.sh, and what came before each repeat. LR (env) overrides the
# cpu config's GRPO learning rate; EVIDENCE_BONUS (env) sets `evidence_bonus` (train/reward.py); GENERATIONS,
# QUESTIONS_PER_STEP and TEMPERATURE (env) override the config's G, questions a step and rollout temperature.
#   scripts/grpo_repeat_check.sh runs/exp29/models/sft runs/exp34 0.25
set -euo pipefail
if [ $# -ne 3 ]; then
  echo "usage: $0 SFT_MODEL OUT_DIR REPEAT_PENALTY" >&2
  exit 2
fi
SFT=$1
OUT=$2
PENALTY=$3
BIN=${BIN:-.venv/bin}
# The cold start the SFT model learned from, in scripts/coldstart_check.sh's layout (OUT/models/sft, OUT/coldstart),
# or COLDSTART (env) for a model that is not there (a GRPO model trained on further).
COLD=${COLDSTART:-$(dirname "$(dirname "$SFT")")/coldstart/train.jsonl}
for need in "$SFT/config.json" "$COLD"; do
  if [ ! -f "$need" ]; then
    echo "$0: $need not found: SFT_MODEL must be a saved model inside a run folder with coldstart/train.jsonl (or set COLDSTART)" >&2
    exit 2
  fi
done
mkdir -p "$OUT"
cat > "$OUT/grpo.yaml" <<YAML
base: cpu
grpo:
  repeat_penalty: $PENALTY
  max_steps: ${STEPS:-8}
  max_questions: 8
  max_completion_length: 1536
  max_obs_tokens: 256
${LR:+  learning_rate: $LR}
${EVIDENCE_BONUS:+  evidence_bonus: $EVIDENCE_BONUS}
${GENERATIONS:+  num_generations: $GENERATIONS}
${QUESTIONS_PER_STEP:+  questions_per_step: $QUESTIONS_PER_STEP}
${TEMPERATURE:+  temperature: $TEMPERATURE}
YAML
"$BIN/grepseek" train grpo --config "$OUT/grpo.yaml" --model "$SFT" --out "$OUT/models/grpo"
BIN="$BIN" scripts/heldout_check.sh "$OUT/models/grpo" "$OUT/fc60_192" "$COLD"
