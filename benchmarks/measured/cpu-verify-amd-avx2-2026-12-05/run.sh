#!/bin/bash
# full verify of one AVX2-recorded shipped run on this AVX2 AMD EPYC: $1 = run id
cd /tmp/verify-wt
export PYTHONPATH=/tmp/verify-wt OMP_WAIT_POLICY=PASSIVE PELAB_DATA=/tmp/vq2/data_cache
echo 19 > /proc/self/autogroup
t0=$(date +%s)
nice -n 15 /work/main/.venv/bin/python -m workbench verify "$1" --tables all \
  --shipped /work/main/results/repro --root /tmp/vq2/runs-$1
echo "rc=$? wall=$(( $(date +%s) - t0 ))s"
