#!/usr/bin/env bash
# The smoke study on a lent GPU machine in one command (docs/gpus.md, "On a lent GPU machine"): the machine's own
# Python with its PyTorch and JAX, fwbench and Snakemake installed from the carried wheels (nothing can be fetched
# there), the study stopped before LaTeX (none there), and its results archived into $OUT to be restored and written
# up elsewhere (docs/elsewhere.md). Through the device tool, with the wheels of benchmarks/gpu/wheels.sh carried:
#   run(command="bash benchmarks/gpu/run_smoke.sh", carry=[".gpu-wheels"], timeout_s=600)
# What comes back in $OUT: machine.txt (nvidia-smi, Python, the study's wall time), install.log, doctor.txt,
# snakemake.log, and gpu-smoke.tar.xz, or partial-results.tar.xz where the study did not finish.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:?OUT must name the folder whose files come back}
wheels=${FWBENCH_WHEELS:-.gpu-wheels}
limit_s=${FWBENCH_SMOKE_LIMIT_S:-500}  # the study's own limit, inside the command's 600 s, leaving time to archive
# FWBENCH_SMOKE_OVERLAY: study files (separated by spaces) layered over the smoke study, given to snakemake and to the
# archive alike: benchmarks/gpu/fourth-model.yaml in a second command, or a rehearsal's on the CPU (device cpu, small
# batches)
read -r -a overlays <<< "${FWBENCH_SMOKE_OVERLAY:-}"
studies=(config/gpu-smoke.yaml "${overlays[@]}")
# JAX's profiler finds CUPTI only on the loader's path (docs/op-profile.md)
for lib in /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/extras/CUPTI/lib64; do
  [ -d "$lib" ] && export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
{ date -u; nvidia-smi; python3 --version; git rev-parse HEAD 2>/dev/null; } > "$OUT/machine.txt" 2>&1
# a second command on the same warm machine (FWBENCH_SMOKE_OVERLAY adding to the study) finds fwbench installed
if python3 -c 'import fwbench, snakemake, sys; sys.exit(not fwbench.__file__.startswith(sys.argv[1]))' "$PWD" 2>/dev/null; then
  echo "fwbench and snakemake already installed from $PWD" > "$OUT/install.log"
elif ! python3 -m pip install --no-index --find-links "$wheels" --no-build-isolation -e . > "$OUT/install.log" 2>&1; then
  echo "run_smoke.sh: installing fwbench from $wheels failed"; tail -20 "$OUT/install.log"; exit 1
fi
python3 -m pip list 2>/dev/null | grep -iE '^(torch|torchvision|triton|jax|jaxlib|jax-cuda13-plugin|flax|optax|numpy|nvidia-cudnn-cu13|snakemake|fwbench) ' >> "$OUT/machine.txt"
timeout 120 python3 -m fwbench.cli doctor --probe > "$OUT/doctor.txt" 2>&1
start=$(date +%s)
timeout "$limit_s" python3 -m snakemake results/tables/study_time.json --cores all --resources gpu=1 --rerun-incomplete \
    --configfile "${studies[@]}" > "$OUT/snakemake.log" 2>&1
status=$?
echo "snakemake exited $status after $(( $(date +%s) - start )) s" | tee -a "$OUT/machine.txt"
if python3 -m fwbench.cli archive . "$OUT/gpu-smoke.tar.xz" "${studies[@]/#/--config=}" > "$OUT/archive.txt" 2>&1; then
  cat "$OUT/archive.txt"
else
  # an unfinished study is not archived for restoring: its results as they are, so that the failure can be read
  cat "$OUT/archive.txt"
  tar -cJf "$OUT/partial-results.tar.xz" results/cells results/logs results/tables results/device.json \
      results/benchmarks .snakemake/log 2>/dev/null
fi
tail -5 "$OUT/snakemake.log"
exit "$status"
