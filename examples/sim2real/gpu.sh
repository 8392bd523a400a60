#!/usr/bin/env bash
# The sim2real experiment at a larger size, for a machine with a GPU (fine-tuning runs on it
# through transformers) and more cores (the policy and the twin run in llama.cpp on the CPU).
# Its inputs are this repository (well under 64 MiB without .venv): everything else is
# installed by scripts/setup.sh from the package registries, and nothing is downloaded
# at run time. Every stage resumes; rerun after an interruption.
#
#   TASKS=700 EPOCHS=3 K=5 bash examples/sim2real/gpu.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x .venv/bin/python ] || bash scripts/setup.sh --dev
PY=.venv/bin/python
TASKS=${TASKS:-700}    # training tasks (14 per generated bank; never the held-out ones)
EPOCHS=${EPOCHS:-3}
K=${K:-5}              # samples per held-out task and backend
OUT=${OUT:-examples/sim2real/results-large}
RUNS=${RUNS:-examples/sim2real/runs-large}
"$PY" -c 'import torch; print("cuda:", torch.cuda.is_available())'
for backend in sim real; do
  "$PY" examples/sim2real/train.py --condition "$backend-sft" --backend "$backend" \
    --train-tasks "$TASKS" --epochs "$EPOCHS" --out "$RUNS/$backend-sft"
done
"$PY" examples/sim2real/run.py --condition untrained --k "$K" --tasks 21 --out "$OUT/untrained"
for backend in sim real; do
  "$PY" examples/sim2real/run.py --condition "$backend-sft" --k "$K" --tasks 21 \
    --model-path "$RUNS/$backend-sft/run/policy.gguf" --out "$OUT/$backend-sft"
done
