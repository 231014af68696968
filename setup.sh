#!/usr/bin/env bash
# Idempotent set-up for a fresh machine: .venv with the pinned package, and LaTeX from Debian if missing.
# Used by both README commands and by .ci/run; a second call is a no-op check (seconds).
set -euo pipefail
cd "$(dirname "$0")"

python=""
for candidate in python3.11 python3; do
  if command -v "$candidate" >/dev/null 2>&1 &&
     "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
    python=$candidate; break
  fi
done
[ -n "$python" ] || { echo "setup.sh: Python 3.11 is required (the pinned torch/torchvision wheels are for 3.11)" >&2; exit 1; }

if [ ! -x .venv/bin/python ]; then
  echo "setup.sh: creating .venv with $($python --version)"
  "$python" -m venv .venv
fi
stamp=.venv/.fwbench-install-stamp
wanted=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  echo "setup.sh: installing fwbench and its pinned dependencies into .venv (a few minutes the first time)"
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e .
  echo "$wanted" > "$stamp"
fi

if ! command -v latexmk >/dev/null 2>&1 || ! kpsewhich IEEEtran.cls >/dev/null 2>&1; then
  echo "setup.sh: installing LaTeX (latexmk, IEEEtran) from Debian"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
    latexmk texlive-latex-extra texlive-publishers texlive-fonts-recommended poppler-utils >/dev/null
fi
echo "setup.sh: ready ($(.venv/bin/python -c 'import fwbench; print("fwbench", fwbench.__version__)'))"
