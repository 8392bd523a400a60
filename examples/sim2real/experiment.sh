#!/usr/bin/env bash
# The whole sim2real experiment in one script: train a policy in the twin (sim-sft), in the
# twin with a fault curriculum (sim-faults-sft), its ablation without faults (sim-sft-seq:
# the same staged collection and training order) and, as the baseline, on the real server
# (real-sft), with equal budgets; then GRPO in the twin through TRL from sim-sft-seq
# (sim-grpo; GRPO_STEPS=0 leaves it out); evaluate them and the untrained policy on the
# held-out tasks, real and twin; print one table. Three more environments, a real
# sandboxed shell (--suite shell; SHELL_SUITE=0 leaves it out), a company wiki in a real
# full-text search engine (--suite search; SEARCH_SUITE=0) and edits to a Python package
# in a sandboxed repository (--suite swe; SWE_SUITE=0): sim-sft, real-sft and
# sim-faults-sft trained and evaluated the same way, with the untrained policy, into
# results-shell/, results-search/ and results-swe/. Then, for each suite, the robustness
# check: the trained policies on the twin with faults injected (results-faults/,
# results-shell-faults/, ...).
# RECORDS_SUITE=0 runs the other suites alone (about an hour each on 2 cores).
#
#   bash examples/sim2real/experiment.sh                        # the README's run, 2 CPU cores: ~5 h
#   RECORDS_SUITE=0 OUT=/tmp/one/results RUNS=/tmp/one/runs bash examples/sim2real/experiment.sh
#   TASKS=700 EPOCHS=3 K=5 bash examples/sim2real/experiment.sh # larger, on a GPU machine
#   SEED=1 OUT=... RUNS=... bash examples/sim2real/experiment.sh  # another training seed
#
# Fine-tuning runs on a GPU when torch sees one (transformers); the policy and the twin run
# in llama.cpp on the CPU. The inputs are this repository (well under 64 MiB without
# .venv); scripts/setup.sh installs the rest from the package registries, and nothing is
# downloaded at run time. Every stage resumes: rerun after an interruption. Use new OUT
# and RUNS folders when changing the sizes (a run refuses data it was not started on).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x .venv/bin/python ] || bash scripts/setup.sh --dev
PY=.venv/bin/python
TASKS=${TASKS:-70}   # training tasks (14 per generated bank; never the held-out ones)
EPOCHS=${EPOCHS:-2}
K=${K:-3}            # samples per held-out task and backend
OUT=${OUT:-examples/sim2real/results}
RUNS=${RUNS:-examples/sim2real/runs}
FAULTS=${FAULTS:-0.5}  # the fault level of the robustness check
CURRICULUM=${CURRICULUM:-linear:0:0.75}  # sim-faults-sft: fault level over the training tasks
GRPO_STEPS=${GRPO_STEPS:-20}  # sim-grpo: GRPO steps (2 tasks x 4 episodes each); 0: none
SEED=${SEED:-0}  # the training seed of every condition (data order, LoRA init, GRPO)
"$PY" -c 'import torch; print("cuda:", torch.cuda.is_available())'
if [ "${RECORDS_SUITE:-1}" != 0 ]; then
  for backend in sim real; do
    "$PY" examples/sim2real/train.py --condition "$backend-sft" --backend "$backend" \
      --train-tasks "$TASKS" --epochs "$EPOCHS" --seed "$SEED" --out "$RUNS/$backend-sft" \
      --results "$OUT/$backend-sft/training.json"
  done
  "$PY" examples/sim2real/train.py --condition sim-faults-sft --curriculum "$CURRICULUM" \
    --train-tasks "$TASKS" --epochs "$EPOCHS" --seed "$SEED" --out "$RUNS/sim-faults-sft" \
    --results "$OUT/sim-faults-sft/training.json"
  "$PY" examples/sim2real/train.py --condition sim-sft-seq --curriculum linear:0:0 \
    --train-tasks "$TASKS" --epochs "$EPOCHS" --seed "$SEED" --out "$RUNS/sim-sft-seq" \
    --results "$OUT/sim-sft-seq/training.json"
  TRAINED="sim-sft real-sft sim-faults-sft sim-sft-seq"
  if [ "$GRPO_STEPS" -gt 0 ]; then
    "$PY" examples/sim2real/grpo.py --condition sim-grpo --steps "$GRPO_STEPS" \
      --base "$RUNS/sim-sft-seq/run/policy.gguf" --train-tasks "$TASKS" --seed "$SEED" \
      --out "$RUNS/sim-grpo" \
      --results "$OUT/sim-grpo/training.json"
    TRAINED="$TRAINED sim-grpo"
  fi
  "$PY" examples/sim2real/run.py --condition untrained --k "$K" --tasks 21 --out "$OUT/untrained"
  for condition in $TRAINED; do
    "$PY" examples/sim2real/run.py --condition "$condition" --k "$K" --tasks 21 \
      --model-path "$RUNS/$condition/run/policy.gguf" --out "$OUT/$condition"
  done
  "$PY" examples/sim2real/run.py --summary --out "$OUT"
  for condition in sim-sft sim-faults-sft sim-sft-seq; do
    "$PY" examples/sim2real/run.py --condition "$condition" --k "$K" --tasks 21 --backends sim \
      --faults "$FAULTS" --max-turns 10 --model-path "$RUNS/$condition/run/policy.gguf" \
      --out "$OUT-faults/$condition"
  done
  "$PY" examples/sim2real/run.py --condition reader --k 1 --tasks 21 --backends sim \
    --faults "$FAULTS" --max-turns 10 --out "$OUT-faults/reader"
  "$PY" examples/sim2real/run.py --summary --out "$OUT-faults"
fi
# One more environment, the same way: sim-sft, real-sft and sim-faults-sft trained in it,
# evaluated with the untrained policy and the reader, then the faulty-twin check.
suite() {
  local name=$1 backend condition
  for backend in sim real; do
    "$PY" examples/sim2real/train.py --suite "$name" --condition "$backend-sft" \
      --backend "$backend" --train-tasks "$TASKS" --epochs "$EPOCHS" --seed "$SEED" \
      --out "$RUNS-$name/$backend-sft" --results "$OUT-$name/$backend-sft/training.json"
  done
  "$PY" examples/sim2real/train.py --suite "$name" --condition sim-faults-sft \
    --curriculum "$CURRICULUM" --train-tasks "$TASKS" --epochs "$EPOCHS" --seed "$SEED" \
    --out "$RUNS-$name/sim-faults-sft" --results "$OUT-$name/sim-faults-sft/training.json"
  "$PY" examples/sim2real/run.py --suite "$name" --condition untrained --k "$K" --tasks 21 \
    --out "$OUT-$name/untrained"
  for condition in sim-sft real-sft sim-faults-sft; do
    "$PY" examples/sim2real/run.py --suite "$name" --condition "$condition" --k "$K" \
      --tasks 21 --model-path "$RUNS-$name/$condition/run/policy.gguf" \
      --out "$OUT-$name/$condition"
  done
  "$PY" examples/sim2real/run.py --suite "$name" --condition reader --k 1 --tasks 21 \
    --out "$OUT-$name/reader"
  "$PY" examples/sim2real/run.py --summary --out "$OUT-$name"
  for condition in sim-sft sim-faults-sft; do
    "$PY" examples/sim2real/run.py --suite "$name" --condition "$condition" --k "$K" \
      --tasks 21 --backends sim --faults "$FAULTS" --max-turns 10 \
      --model-path "$RUNS-$name/$condition/run/policy.gguf" \
      --out "$OUT-$name-faults/$condition"
  done
  "$PY" examples/sim2real/run.py --suite "$name" --condition reader --k 1 --tasks 21 \
    --backends sim --faults "$FAULTS" --max-turns 10 --out "$OUT-$name-faults/reader"
  "$PY" examples/sim2real/run.py --summary --out "$OUT-$name-faults"
}
if [ "${SHELL_SUITE:-1}" != 0 ]; then suite shell; fi
if [ "${SEARCH_SUITE:-1}" != 0 ]; then suite search; fi
if [ "${SWE_SUITE:-1}" != 0 ]; then suite swe; fi
