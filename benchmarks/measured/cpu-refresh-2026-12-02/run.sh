#!/bin/bash
# The refresh grid: verify --refresh of the shipped runs whose probes came from the former solver (run from a clean
# worktree of the commit, writing into /work/main/results/repro). $1 = shard (1 or 2); shard 1 first takes the runs
# re-trained that morning in /tmp/vq/runs (only their tables are recomputed).
cd /tmp/refresh-wt
export PYTHONPATH=/tmp/refresh-wt OMP_WAIT_POLICY=PASSIVE PELAB_DATA=/tmp/vq/data_cache
extra=()
if [ "$1" = 1 ]; then extra=(t2-nope-repro-s42-7584c3 t2-mla-repro-s42-901034 t1-nope-repro-s42-9a509a); fi
if [ "$1" = 2 ]; then extra=(t2-nope-repro-s43-a06b2d t2-rope-repro-s42-333ab3 t1-mla-repro-s42-2bde80); fi
echo 19 > /proc/self/autogroup  # its own session (setsid): nice alone would not yield to the tests' session
exec nice -n 15 /work/main/.venv/bin/python -m workbench verify "${extra[@]}" --stale probes --shard "$1/2" --refresh -q \
  --shipped /work/main/results/repro --root /tmp/vq/runs
