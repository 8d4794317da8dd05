#!/usr/bin/env bash
# One lent GPU window in one call (docs/training.md, "One GPU window"), ending within BUDGET seconds of its start:
#   1. the wheels the image lacks, from .whl/ (carried), into GPU_SITE; the imports checked;
#   2. with --check: benchmarks/gpu_check.sh into OUT/check (gpu tests, eager vs compiled steps, mask, agreement),
#      whose step_ms.json then feeds the planner and whose compiled-vs-eager RoPE step picks --compile (COMPILE=auto);
#   3. `workbench sweep grids/paper.toml --deadline` over the time left less RESERVE: Table 1's runs (TAGS) of tier
#      TIER in grid order, only runs expected to finish (--no-partial: a checkpoint does not come back), beside
#      `workbench ship --follow --while-pid` (each finished run analysed, TABLES, its head ablations on the GPU
#      too: 153 s on 8 CPU threads a paper-scale run, and shipped to results/paper while the next trains; it stops
#      as soon as the sweep has ended);
#   4. results/paper packed into OUT/results-paper.tgz, every run's metrics (no weights) into OUT/runs-paper-meta.tgz,
#      the logs into OUT/logs.tgz (a call brings back 8 files), and Triton's compiled kernels into OUT/inductor-cache.tgz:
#      copied here to .inductor-cache.tgz (git-ignored) and carried packed, the next window unpacks it and its
#      compilation reads it (RoPE's step: 109 s cold, 3 s warm on the H100; the folder, 42 MB, and .whl, 23 MB,
#      would not both fit the 64 MiB a call carries). The next window's same command trains the rest (--shipped).
#
#   bash benchmarks/gpu_window.sh [--check] [BUDGET]      # OUT defaults to artifacts/gpu-window
#   bash benchmarks/gpu_window.sh --check-only [BUDGET]   # 1, 2 and 4 without training: a second, short call on the
#                                                         # warm machine (T_TESTS=0 leaves out the gpu tests)
#   make repro-gpu WINDOW=BUDGET                            # the same without the check
# Variables: GRID TIER TAGS (grids/paper.toml, 1, rope,nope,mla), TABLES (ablation,deposit), RESULTS (results/paper),
# PAPER_RUNS (runs-paper), STEP_MS, COMPILE (auto|yes|no), COMPILE_MODE (torch.compile's; default),
# SDPA_BACKEND (PyTorch's choice), RESERVE (45 s for the last ship, its ablation on the GPU, and packing), GPU_PY,
# GPU_SITE, DEVICE (cuda), INDUCTOR_CACHE (.inductor-cache), INDUCTOR_TGZ (.inductor-cache.tgz), CHECK_ARGS, T_TESTS / T_STEP (gpu_check.sh). tests/test_gpu_window.py runs it on CPU.
set -u -o pipefail
check=0 only=0
case "${1:-}" in
  --check) check=1; shift ;;
  --check-only) check=1; only=1; shift ;;
esac
budget=${1:-540}
t0=$(date +%s)
out=${OUT:-artifacts/gpu-window}
py=${GPU_PY:-python3}
site=${GPU_SITE:-/tmp/pelab-site}
runs=${PAPER_RUNS:-runs-paper}
results=${RESULTS:-results/paper}
grid=${GRID:-grids/paper.toml}
tier=${TIER:-1}
tags=${TAGS-rope,nope,mla}   # TAGS= : every variant of the tier
tables=${TABLES:-ablation,deposit}
step_ms=${STEP_MS:-benchmarks/measured/step_ms.json}
compile=${COMPILE:-auto}
device=${DEVICE:-cuda}   # DEVICE=cpu with CHECK_ARGS="--device cpu --preset smoke": a dry run of the flow
mkdir -p "$out"
say() { echo "[window $(( $(date +%s) - t0 )) s] $*" | tee -a "$out/window.log"; }

if ls .whl/*.whl >/dev/null 2>&1; then
  "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl \
    2>&1 | grep -v "^WARNING: Target directory" | tail -5
else
  say "no .whl/: using the image's packages"
fi
export PYTHONPATH="$PWD:$site${PYTHONPATH:+:$PYTHONPATH}" OMP_WAIT_POLICY=PASSIVE PYTHONUNBUFFERED=1 \
  TORCHINDUCTOR_CACHE_DIR="${INDUCTOR_CACHE:-$PWD/.inductor-cache}"
# an earlier window's compiled kernels travel packed (Triton's, 2.9 MB, where the cache folder is 42 MB and the
# checkout may carry 64 MiB in all): unpacked where the folder is not already (a warm machine keeps its own)
cache_tgz=${INDUCTOR_TGZ:-.inductor-cache.tgz}
if [ -f "$cache_tgz" ] && [ -z "$(ls -A "$TORCHINDUCTOR_CACHE_DIR" 2>/dev/null)" ]; then
  mkdir -p "$TORCHINDUCTOR_CACHE_DIR" && tar xzf "$cache_tgz" -C "$TORCHINDUCTOR_CACHE_DIR" --strip-components=1 \
    && say "compile cache unpacked from $cache_tgz"
fi
"$py" -c "import torch, transformer_lens, workbench.cli; print('torch', torch.__version__, 'cuda', torch.version.cuda,
torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU')" 2>&1 | tee -a "$out/window.log" || exit 1
say "environment ready"

if [ "$check" = 1 ]; then
  PYTHON="$py" EPOCH=${EPOCH:-0} T_TESTS=${T_TESTS:-45} T_STEP=${T_STEP:-200} bash benchmarks/gpu_check.sh "$out/check" ${CHECK_ARGS:---steps 50 --profile --sdpa flash_attention,efficient_attention,cudnn_attention --modes reduce-overhead}
  [ -f "$out/check/step_ms.json" ] && step_ms="$out/check/step_ms.json"
  say "check done"
fi
if [ "$compile" = auto ]; then  # eager only where this window's check measured it faster (H100: compiled 3.35x)
  compile=$("$py" - "$out/check/gpu_step.json" <<'EOF'
import json, sys
for path in sys.argv[1:]:
    try:
        row = json.load(open(path))["step"]["rope"]
    except (OSError, KeyError, ValueError):
        continue
    print("yes" if row.get("compiled_ms", float("inf")) < row["eager_ms"] else "no")
    break
else:
    print("yes")
EOF
)
fi
flag=$([ "$compile" = yes ] && echo --compile)
# COMPILE_MODE=reduce-overhead (CUDA graphs) where a check measured it the faster (gpu_step.json "modes")
[ "$compile" = yes ] && [ -n "${COMPILE_MODE:-}" ] && flag="$flag --compile-mode $COMPILE_MODE"
# SDPA_BACKEND=flash_attention (or another) where a check measured that backend's step the faster (gpu_step.json "sdpa")
[ -n "${SDPA_BACKEND:-}" ] && flag="$flag --sdpa-backend $SDPA_BACKEND"
window=$(( budget - ($(date +%s) - t0) - ${RESERVE:-45} ))
[ "$only" = 1 ] || say "training for $window s (compile: $compile ${COMPILE_MODE:-}, sdpa: ${SDPA_BACKEND:-default}, step ms: $step_ms)"
mkdir -p "$results"
if [ "$only" = 1 ]; then
  say "check only: no training"; rc=0
elif [ "$window" -gt 30 ]; then
  "$py" -m workbench sweep "$grid" --tier "$tier" $([ -n "$tags" ] && echo --tags "$tags") --device "$device" $flag --deadline "$window" \
      --no-partial --checkpoint-every 10 --quiet --root "$runs" --shipped "$results" \
      $([ -f "$step_ms" ] && echo --step-ms "$step_ms") 2>&1 | tee "$out/sweep.log" &
  sweep=$!
  # the follower is stopped 20 s before the budget whatever it is doing (a run being shipped is left unshipped,
  # never half-written: ship_run renames a finished copy into place), so the packing below always runs
  OMP_NUM_THREADS=${SHIP_THREADS:-8} timeout $(( budget - ($(date +%s) - t0) - 20 )) "$py" -m workbench ship --grid "$grid" --tier "$tier" $([ -n "$tags" ] && echo --tags "$tags") --root "$runs" \
      --to "$results" --tables "$tables" --device "$device" --follow 20 --while-pid "$sweep" 2>&1 | tee "$out/ship.log"
  wait "$sweep"; rc=$?
else
  say "too little time left to train"; rc=1
fi
say "sweep exit $rc; packing"
[ "$only" = 1 ] || tar czf "$out/results-paper.tgz" "$results"
[ "$only" = 0 ] && [ -d "$runs" ] && tar czf "$out/runs-paper-meta.tgz" --exclude='*.safetensors' "$runs"
[ -f "$out/check/gpu_step.json" ] && cp "$out/check/gpu_step.json" "$out/gpu_step.json"
# Triton's compiled kernels only (keyed by their source, so shared by every model with the same kernel: 2.9 MB
# packed for RoPE's training); inductor's graph cache (3.1 MB more a model, a hit only for the same model and code)
# would outgrow the 16 MiB a file may bring back (the whole cache after the check's extra modes did)
[ -d "$TORCHINDUCTOR_CACHE_DIR/triton" ] && \
  tar czf "$out/inductor-cache.tgz" -C "$(dirname "$TORCHINDUCTOR_CACHE_DIR")" "$(basename "$TORCHINDUCTOR_CACHE_DIR")/triton"
say "done"
(cd "$out" && tar czf logs.tgz --remove-files $(ls -d check sweep.log ship.log 2>/dev/null))
exit "$rc"
