#!/bin/bash
# AMD AVX-512 refresh grid (Zen 4: family 25, model 17): verify --refresh of the AMD-trained stale runs, from a clean
# worktree of the commit, writing into /work/main/results/repro. $1 = shard (1 or 2).
cd /tmp/refresh-wt
export PYTHONPATH=/tmp/refresh-wt OMP_WAIT_POLICY=PASSIVE PELAB_DATA=/tmp/vq/data_cache
echo 19 > /proc/self/autogroup
exec nice -n 15 /work/main/.venv/bin/python -m workbench verify --stale probes,patching,trigger_attention,dla,head_summary \
  --shard "$1/2" --refresh -q --shipped /work/main/results/repro --root /tmp/vq/runs
