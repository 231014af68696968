#!/usr/bin/env bash
# Idempotent set-up for a fresh machine: .venv with the pinned package, and LaTeX and Chromium from Debian if
# missing.
# Used by both README commands and by .ci/run; a second call is a no-op check (seconds).
#
# Accelerator: cuda where an NVIDIA driver answers `nvidia-smi -L` with at least one GPU, else cpu;
# FWBENCH_ACCELERATOR=cpu|cuda overrides. Both install the tested set (pyproject.toml's `tested` extra): cpu with
# `-e .[tested,cpu]` (TensorFlow's CPU build), cuda with `-e .[tested,cuda]` (JAX's CUDA plugin at the pinned JAX
# version, on the CUDA libraries of the pinned torch wheel, and TensorFlow's CUDA build). `bash setup.sh --plan`
# prints the choice and the exact pip requirements, and installs nothing. To install fwbench into an environment
# that already holds its frameworks instead, see the README (`python -m pip install -e .`).
set -euo pipefail
cd "$(dirname "$0")"

plan=0
for arg in "$@"; do
  case "$arg" in
    --plan) plan=1 ;;
    *) echo "setup.sh: unknown argument '$arg' (the only option is --plan)" >&2; exit 2 ;;
  esac
done

accelerator=${FWBENCH_ACCELERATOR-}
case "$accelerator" in
  ""|cpu|cuda) ;;
  *) echo "setup.sh: FWBENCH_ACCELERATOR must be cpu or cuda (or unset: automatic), not '$accelerator'" >&2; exit 2 ;;
esac
gpus=""  # what the NVIDIA driver says, empty if none answers
if command -v nvidia-smi >/dev/null 2>&1 && listing=$(timeout 30 nvidia-smi -L 2>/dev/null); then
  count=$(grep -c '^GPU [0-9]' <<<"$listing" || true)
  first=$(grep -m1 '^GPU [0-9]' <<<"$listing" | sed -E 's/^GPU [0-9]+: //; s/ \(UUID: .*//' || true)
  [ "$count" -eq 0 ] || gpus="nvidia-smi: $count GPU$([ "$count" -eq 1 ] || echo s): $first"
fi
if [ -z "$accelerator" ]; then
  if [ -n "$gpus" ]; then accelerator=cuda; else accelerator=cpu; fi
  echo "setup.sh: accelerator $accelerator (${gpus:-no NVIDIA driver answers nvidia-smi -L}; FWBENCH_ACCELERATOR=cpu|cuda overrides)"
else
  echo "setup.sh: accelerator $accelerator (FWBENCH_ACCELERATOR=$accelerator${gpus:+; $gpus})"
  if [ "$accelerator" = cuda ] && [ -z "$gpus" ]; then
    echo "setup.sh: note: no NVIDIA driver answers nvidia-smi -L here; installing the CUDA set anyway"
  fi
fi
target=".[tested,$accelerator]"

# The newest supported Python found (3.13, 3.12, then 3.11: every pinned package has wheels for each, and
# envs/resolved/ records that the tested set resolves on each); FWBENCH_PYTHON names another interpreter. An existing
# .venv keeps the Python it was made with.
supported='import sys; sys.exit(not ((3, 11) <= sys.version_info[:2] <= (3, 13)))'
python=""
if [ -n "${FWBENCH_PYTHON-}" ]; then
  command -v "$FWBENCH_PYTHON" >/dev/null 2>&1 || { echo "setup.sh: FWBENCH_PYTHON=$FWBENCH_PYTHON: no such interpreter" >&2; exit 1; }
  "$FWBENCH_PYTHON" -c "$supported" 2>/dev/null ||
    { echo "setup.sh: FWBENCH_PYTHON=$FWBENCH_PYTHON is $("$FWBENCH_PYTHON" --version 2>&1 | head -1); Python 3.11, 3.12 or 3.13 is required" >&2; exit 1; }
  python=$FWBENCH_PYTHON
else
  for candidate in python3.13 python3.12 python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c "$supported" 2>/dev/null; then
      python=$candidate; break
    fi
  done
  [ -n "$python" ] || { echo "setup.sh: Python 3.11, 3.12 or 3.13 is required (as python3.13, python3.12, python3.11 or python3; FWBENCH_PYTHON names another)" >&2; exit 1; }
fi
if [ -x .venv/bin/python ] && [ -n "${FWBENCH_PYTHON-}" ]; then
  made_with=$(.venv/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  asked=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  if [ "$made_with" != "$asked" ]; then
    echo "setup.sh: .venv was made with Python $made_with and FWBENCH_PYTHON=$FWBENCH_PYTHON is $asked: remove .venv to make it anew" >&2
    exit 1
  fi
fi

if [ "$plan" -eq 1 ]; then
  venv_python="$("$python" --version 2>&1)"
  [ ! -x .venv/bin/python ] || venv_python="$(.venv/bin/python --version 2>&1) (the existing .venv's)"
  echo "setup.sh: plan: pip install -e '$target' into .venv with $venv_python, i.e. these pinned requirements (nothing installed now):"
  PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=src "$python" - "$accelerator" <<'EOF'
import sys
import tomllib

from fwbench.installation import expand_extra

with open("pyproject.toml", "rb") as f:
    extras = tomllib.load(f)["project"]["optional-dependencies"]
print("\n".join(expand_extra(extras, "tested") + extras[sys.argv[1]]))
EOF
  exit 0
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup.sh: creating .venv with $($python --version)"
  "$python" -m venv .venv
fi
stamp=.venv/.fwbench-install-stamp
wanted="$(sha256sum pyproject.toml | cut -d' ' -f1) $accelerator"  # switching the accelerator reinstalls
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  echo "setup.sh: installing fwbench and its pinned dependencies ($accelerator) into .venv (a few minutes the first time)"
  .venv/bin/python -m pip install --quiet --upgrade pip
  installed=$(.venv/bin/python -m pip list --format=freeze)
  if [ "$accelerator" = cpu ]; then
    # A former CUDA install leaves JAX's CUDA plugin and TensorFlow's CUDA build behind, and the frameworks would
    # pick them up: remove them (not the NVIDIA libraries, which are the torch wheel's own).
    stale=$(grep -oiE '^(jax[-_]cuda[0-9]+[-_](plugin|pjrt)|tensorflow)==' <<<"$installed" | tr -d '=' || true)
  else
    # Both TensorFlow builds install the same `tensorflow` package: the CPU build must go before the CUDA one.
    stale=$(grep -oiE '^tensorflow[-_]cpu==' <<<"$installed" | tr -d '=' || true)
  fi
  [ -z "$stale" ] || .venv/bin/python -m pip uninstall --quiet -y $stale
  .venv/bin/python -m pip install --quiet -e "$target"
  if [ "$accelerator" = cuda ]; then
    # One set of NVIDIA libraries serves both frameworks only if they were built for the same CUDA major version.
    .venv/bin/python - <<'EOF'
import importlib.metadata
import re
import sys

import torch

plugins = {
    m.group(1)
    for d in importlib.metadata.distributions()
    if (m := re.fullmatch(r"jax[-_]cuda(\d+)[-_]plugin", d.metadata["Name"] or "", re.I))
}
torch_major = torch.version.cuda.split(".")[0] if torch.version.cuda else None
if plugins != {torch_major}:
    sys.exit(
        f"setup.sh: torch {torch.__version__} is built for CUDA {torch.version.cuda} but JAX's CUDA plugin is for "
        f"CUDA {', '.join(sorted(plugins)) or '(none installed)'}: the CUDA major versions must agree "
        "(see the cuda extra in pyproject.toml)"
    )
EOF
  fi
  echo "$wanted" > "$stamp"
fi

# From Debian, each only if missing: LaTeX for the paper, and Chromium, the headless browser that checks the HTML
# report (fwbench.workflow.report_check drives it through Playwright, which downloads no browser of its own).
apt_packages=()
apt_what=""
if ! command -v latexmk >/dev/null 2>&1 || ! kpsewhich IEEEtran.cls >/dev/null 2>&1; then
  apt_packages+=(latexmk texlive-latex-extra texlive-publishers texlive-fonts-recommended poppler-utils)
  apt_what="LaTeX (latexmk, IEEEtran)"
fi
if ! command -v chromium >/dev/null 2>&1; then
  apt_packages+=(chromium)
  apt_what="${apt_what:+$apt_what and }Chromium"
fi
if [ "${#apt_packages[@]}" -gt 0 ]; then
  echo "setup.sh: installing $apt_what from Debian"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${apt_packages[@]}" >/dev/null
fi
echo "setup.sh: ready ($(.venv/bin/python -c 'import fwbench; print("fwbench", fwbench.__version__)'), $accelerator)"
