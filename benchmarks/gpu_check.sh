#!/usr/bin/env bash
# The CUDA checks of the GPU path in one short script, for the few minutes a lent GPU machine gives
# (docs/training.md, "GPU benchmark"): the device, the `gpu` tests (bf16 train/eval parity, resume on CUDA, the
# memory estimate against the measured peak, packed equals solo), benchmarks/bench_gpu.py at the paper preset
# (rows printed and OUT/bench_gpu.json rewritten as each measurement ends) and benchmarks/bench_train.py at paper
# scale. Each step has its own time limit (seconds: T_TESTS, T_GPU, T_TRAIN), so one slow step cannot take the
# others' time; a step cut short keeps what it printed in OUT/*.log.
#
#   benchmarks/gpu_check.sh OUT [bench_gpu.py arguments, default --ks 1,3,6]
set -u
out=${1:?usage: benchmarks/gpu_check.sh OUT [bench_gpu.py arguments]}
shift
[ $# -gt 0 ] || set -- --ks 1,3,6
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
py=${PYTHON:-python3}
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  "$py" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())"
  nproc; } 2>&1 | tee "$out/device.txt"
timeout "${T_TESTS:-150}" "$py" -m pytest -m gpu -p no:cacheprovider -rs -v tests/test_gpu_path.py tests/test_packed.py \
    2>&1 | tee "$out/gpu_tests.log"
timeout "${T_GPU:-300}" "$py" benchmarks/bench_gpu.py --json "$out/bench_gpu.json" "$@" \
    2>&1 | tee "$out/bench_gpu.log"
timeout "${T_TRAIN:-90}" "$py" benchmarks/bench_train.py --device cuda --repeats 3 2>&1 | tee "$out/bench_train.log"
