#!/bin/bash
# Re-train one shipped run in one go at this checkout's code and compare it with the shipped one (every epoch's
# metrics, then its shipped ablation and deposit tables recomputed from the re-run's weights); niced, as shipped
# (one thread); the log is this folder's RUN.log. Usage: bash run.sh RUN_ID
cd "$(git rev-parse --show-toplevel)" || exit 1
OMP_WAIT_POLICY=PASSIVE nice -n 5 /usr/bin/time -v .venv/bin/workbench verify "$1" --root /tmp/vres/runs --tables all \
    > "benchmarks/measured/cpu-verify-resumed-2026-12-06/$1.log" 2>&1
