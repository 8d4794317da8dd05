#!/usr/bin/env bash
# The CUDA checks of the GPU path in one script of at most 6 minutes, for the first call of a lent GPU window
# (docs/training.md, "One GPU window"): the device; the `gpu` tests (bf16 train/eval parity, resume on CUDA, the
# memory estimate against the measured peak, packed runs against solo, the step without host synchronisation);
# then benchmarks/gpu_step.py: eager vs compiled step times for RoPE, NoPE and MLA (CUDA events, median of 100),
# mask vs no mask, 300-step eager/compiled loss agreement, two full Task 1 epochs with evaluation. Each step has its
# own time limit (seconds: T_TESTS, T_STEP), so one slow step cannot take the other's time; OUT/gpu_step.json is
# rewritten as each part ends and OUT/step_ms.json is what `workbench sweep --step-ms` reads.
#
#   benchmarks/gpu_check.sh OUT [gpu_step.py arguments]          (EPOCH=0: without the full epochs)
#   PYTHON=... T_TESTS=90 T_STEP=260 benchmarks/gpu_check.sh OUT --device cpu --preset smoke --steps 5   # dry run
set -u
out=${1:?usage: benchmarks/gpu_check.sh OUT [gpu_step.py arguments]}
shift
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
py=${PYTHON:-python3}
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
  "$py" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())"
  nproc; } 2>&1 | tee "$out/device.txt"
if [ "${T_TESTS:-90}" != 0 ]; then  # T_TESTS=0: without the gpu tests (a later call on the same machine)
  timeout "${T_TESTS:-90}" "$py" -m pytest -m gpu -p no:cacheprovider -rs -q tests/test_fast_path.py \
      tests/test_gpu_path.py tests/test_packed.py 2>&1 | tee "$out/gpu_tests.log"
fi
# EPOCH=0 leaves out the full epochs (gpu_window.sh: its training measures them)
timeout "${T_STEP:-260}" "$py" benchmarks/gpu_step.py --json "$out/gpu_step.json" $([ "${EPOCH:-1}" = 1 ] && echo --epoch) "$@" 2>&1 \
    | tee "$out/gpu_step.log"
"$py" -c "import json, sys; d = json.load(open(sys.argv[1])); json.dump(d['step_ms'], open(sys.argv[2], 'w'))" \
    "$out/gpu_step.json" "$out/step_ms.json" 2>/dev/null || echo "no step_ms.json (gpu_step.py did not time a step)"
