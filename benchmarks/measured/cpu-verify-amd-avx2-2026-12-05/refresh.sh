#!/bin/bash
# verify --refresh of one AVX2-trained shipped run on this AVX2 AMD EPYC: $1 = run id; tables into /work/main/results/repro
cd /tmp/refresh-wt
export PYTHONPATH=/tmp/refresh-wt OMP_WAIT_POLICY=PASSIVE PELAB_DATA=/tmp/vq2/data_cache
echo 19 > /proc/self/autogroup
t0=$(date +%s)
nice -n 15 /work/main/.venv/bin/python -m workbench verify "$1" --tables all --refresh -q \
  --shipped /work/main/results/repro --root /tmp/rf/runs-$1
echo "rc=$? wall=$(( $(date +%s) - t0 ))s"
