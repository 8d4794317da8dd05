#!/usr/bin/env bash
# A lent GPU window (docs/training.md, "One GPU window"): train Table 1's paper-scale runs that fit, ship each one,
# and pack what the window brings back.
#   1. the wheels the image lacks, from .whl/ (carried), into GPU_SITE; the imports checked (a failure: exit 1, the
#      traceback in window.log); no CUDA GPU: exit 1;
#   2. with --check: benchmarks/gpu_check.sh into OUT/check (gpu tests, eager vs compiled steps, mask, agreement),
#      whose step_ms.json then feeds the planner (the stored table filling the schemes it did not time) and whose compiled-vs-eager RoPE step picks --compile (COMPILE=auto);
#   3. the training job: `workbench sweep grids/paper.toml --deadline` up to the window's end less RESERVE: Table 1's
#      runs (TAGS) of tier TIER in grid order, only runs expected to finish (--no-partial: a checkpoint does not come
#      back), beside `workbench ship --follow --while-pid` (each finished run analysed, TABLES, its head ablations on
#      the GPU, and shipped while the next trains, then analysed for THEN_TABLES on the CPU and shipped again; it
#      stops as the sweep ends, and 20 s before the window's end whatever it is doing: a run being shipped is left
#      unshipped or with its first ship, never half-written); where the sweep ends with
#      SPARE_MIN s or more left (no run fitted them), benchmarks/gpu_step.py SPARE in that time (logs/spare_step.json:
#      RoPE's step, the Triton attention kernel's agreement and steps, and MLA's step, by default);
#   4. the shipped runs packed into OUT/results-paper.tgz (members results/paper/RUN_ID/...), every run's metrics (no
#      weights) into OUT/runs-paper-meta.tgz, the logs into OUT/logs.tgz (a call brings back 8 files), and Triton's
#      compiled kernels into OUT/inductor-cache.tgz: kept here, tracked, as benchmarks/kernels/triton.tgz (all of it
#      lands here by `python benchmarks/window_back.py FILES_AT`), so it travels packed with every later checkout
#      and the next window unpacks it (RoPE's step: 109 s cold, 3 s warm on the H100; the folder, 42 MB, would not
#      fit beside the 37-MiB tree in the 64 MiB a call carries). The next window's same command trains the rest.
#
#   bash benchmarks/gpu_window.sh [--check] [BUDGET]      # one call: the job ends BUDGET s after the start
#   bash benchmarks/gpu_window.sh --check-only [BUDGET]   # 1, 2 and 4 without training (T_TESTS=0: no gpu tests)
#   bash benchmarks/gpu_window.sh --detach [--check] WINDOW CALL   # two calls: the job runs detached (its own
#        # process session, which outlives the call) until WINDOW s after the start; this call packs what is shipped
#        # by CALL s and returns; the job goes on training while the reply travels and the next call starts
#   bash benchmarks/gpu_window.sh --attach BUDGET          # the next call, on the same warm machine (within its 30-s
#        # idle): waits for the job (at most BUDGET s less the packing) and packs everything; a job that did not
#        # survive the first call's end is resumed from its checkpoints in this call, in the time left
#   make repro-gpu WINDOW=BUDGET                            # the one-call form without the check
# Variables: GRID TIER TAGS (grids/paper.toml, 1, rope,nope,mla), TABLES (ablation,deposit), THEN_TABLES
# (qk_means,angles,spectral,distance_bias; empty: none), RESULTS (results/paper),
# PAPER_RUNS (runs-paper), STORED_MS (benchmarks/measured/step_ms.json: the planner's ms a step, filling the
# schemes a check did not time), STEP_MS (the check's step_ms.json where it ran, else STORED_MS), COMPILE (auto|yes|no: auto, compiled unless the check says eager is faster),
# COMPILE_MODE (torch.compile's; default), SDPA_BACKEND (PyTorch's order; a backend, or auto: the check's choice; triton: PE-Lab's kernel, after its agreement check),
# RESERVE (45 s for the last ship, its ablation on the GPU, and packing), PACK_S (15 s a detached call keeps for
# packing), WINDOW_STATE (artifacts/window-state: the job's pid, exit status, logs
# and, detached, its shipped runs; an ignored path, so the next call's copy of the checkout leaves it), GPU_PY,
# GPU_SITE, WHEELS (.whl), DEVICE (cuda), INDUCTOR_CACHE (.inductor-cache), INDUCTOR_TGZ (benchmarks/kernels/triton.tgz), CHECK_ARGS,
# T_TESTS / T_STEP (gpu_check.sh), SPARE (gpu_step.py's arguments for the time the sweep leaves; empty: none),
# SPARE_MIN (60 s: less is left alone), SPARE_END (35 s kept after it, with a kill 5 s after its time: the
# --attach call packs 15 s before its end). tests/test_gpu_window.py runs every form on CPU.
set -u -o pipefail
mode=run check=0 only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --check) check=1 ;;
    --check-only) check=1; only=1 ;;
    --detach) mode=detach ;;
    --attach) mode=attach ;;
    --job) mode=job ;;   # internal: the detached training job; END and the call's start (epoch seconds)
    *) break ;;
  esac
  shift
done
t0=$(date +%s)
case "$mode" in
  run) end=$(( t0 + ${1:-540} )); call_end=$end ;;
  detach) end=$(( t0 + ${1:?usage: gpu_window.sh --detach WINDOW CALL} ));
          call_end=$(( t0 + ${2:?usage: gpu_window.sh --detach WINDOW CALL} )) ;;
  attach) call_end=$(( t0 + ${1:?usage: gpu_window.sh --attach BUDGET} )) ;;
  job) end=${1:?--job END T0}; t0=${2:?--job END T0} ;;  # the job counts from the start of the call that detached it
esac
out=${OUT:-artifacts/gpu-window}
py=${GPU_PY:-python3}
site=${GPU_SITE:-/tmp/pelab-site}
wheels=${WHEELS:-.whl}   # carried: the wheels the image lacks (benchmarks/gpu_wheels.txt)
state=${WINDOW_STATE:-artifacts/window-state}
runs=${PAPER_RUNS:-runs-paper}
results=${RESULTS:-results/paper}
grid=${GRID:-grids/paper.toml}
tier=${TIER:-1}
tags=${TAGS-rope,nope,mla}   # TAGS= : every variant of the tier
tables=${TABLES:-ablation,deposit}
# analysed once a run is shipped with TABLES, then shipped again (a kill in that step leaves the first ship whole):
# the fast analyses, on the CPU (at paper scale 3.3-3.9 s each on 2 threads of the CPU machine); THEN_TABLES= : none
then_tables=${THEN_TABLES-qk_means,angles,spectral,distance_bias}
# what the job measures in the time the sweep leaves (no run fitted it; at least SPARE_MIN s): gpu_step.py's
# arguments; SPARE= : nothing. By default RoPE's step, then PE-Lab's Triton attention kernel (its agreement with
# SDPA, then RoPE's eager and compiled steps with it, beside SDPA's in one process), then MLA's step (issue 41's
# MLA <= 2x RoPE); a measurement cut short keeps the parts done
spare=${SPARE-"--schemes rope,mla --steps 30 --agree-steps 0 --no-mask --sdpa triton"}
# the stored table (window_back.py folds each check into it) fills what a check did not time (a check of RoPE
# alone: NoPE and MLA), scaled by the ratio on the schemes both time (`sweep.fill_step_ms`); without it the planner
# never starts a run of unknown time (the H200 window of 2026-11-28 trained RoPE alone)
stored_ms=${STORED_MS:-benchmarks/measured/step_ms.json}
step_ms=${STEP_MS:-$stored_ms}
compile=${COMPILE:-auto}
device=${DEVICE:-cuda}   # DEVICE=cpu with CHECK_ARGS="--device cpu --preset smoke": a dry run of the flow
# where the job ships: results/paper itself in one call; detached, a copy of it in the state folder, since the next
# call's copy of the checkout brings results/paper (tracked) back to this checkout's version
shipto=$results
[ "$mode" = run ] || shipto=$state/results
[ "$mode" = job ] && out=$state/logs   # the call's OUT is emptied before the next call
mkdir -p "$out" "$state/logs"
say() { echo "[window $(( $(date +%s) - t0 )) s] $*" | tee -a "$out/window.log"; }

install_wheels() {  # the wheels named into GPU_SITE, no index, no dependencies resolved
  "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "$@" \
    2>&1 | grep -v "^WARNING: Target directory" | tail -5
}

imports_ok() {  # the imports the window needs, then torch's line (version, CUDA, the GPU or "no GPU"), in one
  # process (each of three took about 2 CPU-s to import torch); a failure's traceback goes to window.log
  "$py" -c "import torch, transformer_lens, workbench.cli; print('torch', torch.__version__, 'cuda', \
torch.version.cuda, torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU')" 2>>"$out/window.log"
}

setup() {  # the wheels, the environment, the carried compile cache; the imports checked
  if ls "$wheels"/*.whl >/dev/null 2>&1; then
    install_wheels "$wheels"/*.whl
  else
    say "no $wheels/: using the image's packages (\`make gpu-wheels\` fetches those it lacks, before the window)"
  fi
  export PYTHONPATH="$PWD:$site${PYTHONPATH:+:$PYTHONPATH}" OMP_WAIT_POLICY=PASSIVE PYTHONUNBUFFERED=1 \
    TORCHINDUCTOR_CACHE_DIR="${INDUCTOR_CACHE:-$PWD/.inductor-cache}"
  # an earlier window's compiled kernels travel packed (Triton's, 2.9 MB, where the cache folder is 42 MB and the
  # checkout may carry 64 MiB in all): unpacked where the folder is not already (a warm machine keeps its own)
  local cache_tgz=${INDUCTOR_TGZ:-benchmarks/kernels/triton.tgz}
  if [ -f "$cache_tgz" ] && [ -z "$(ls -A "$TORCHINDUCTOR_CACHE_DIR" 2>/dev/null)" ]; then
    mkdir -p "$TORCHINDUCTOR_CACHE_DIR" && tar xzf "$cache_tgz" -C "$TORCHINDUCTOR_CACHE_DIR" --strip-components=1 \
      && say "compile cache unpacked from $cache_tgz"
  fi
  # the image's own transformers and hub serve transformer_lens (benchmarks/gpu_wheels.txt, its "image:" lines;
  # the H200 window of 2026-11-28, evening, imported and trained on them)
  local torch_line
  if ! torch_line=$(imports_ok); then
    say "ERROR: $py cannot import torch, transformer_lens and workbench (the traceback is in $out/window.log): on a" \
        "device machine the image has torch and .whl/ the rest (\`make gpu-wheels\`); elsewhere name a Python that" \
        "has them, e.g. GPU_PY=.venv/bin/python"
    exit 1
  fi
  echo "$torch_line" | tee -a "$out/window.log"
  if [ "$device" = cuda ] && [[ "$torch_line" == *"no GPU" ]]; then
    say "ERROR: no CUDA GPU here: this script trains the paper grid in a lent GPU window (docs/training.md, \"One" \
        "GPU window\"); on CPU, \`make repro\` trains the CPU reproduction (DEVICE=cpu with" \
        "CHECK_ARGS=\"--device cpu --preset smoke\" runs this flow as a dry run)"
    exit 1
  fi
  say "environment ready"
}

train_job() {  # train and ship until epoch second $1 (the sweep's deadline RESERVE before it); the exit status to state
  local stop=$1 flags=$flags left rc sweep  # flags: this window's, less a backend that failed
  while :; do
    left=$(( stop - $(date +%s) - ${RESERVE:-45} ))
    say "training for $left s (flags:${flags:- none}; step ms: $step_ms, filled from $stored_ms; shipping to $shipto)"
    mkdir -p "$shipto"
    if [ "$left" -le 30 ]; then
      say "too little time left to train"; rc=1; break
    fi
    # with an SDPA backend put first (chosen from the check's eager steps), the first failure stops the sweep and
    # the runs go on in PyTorch's order, so a backend that breaks the compiled step cannot fail the whole window
    "$py" -m workbench sweep "$grid" --tier "$tier" $([ -n "$tags" ] && echo --tags "$tags") --device "$device" \
        $flags $(case "$flags" in *--sdpa-backend*) echo --fail-fast ;; esac) --deadline "$left" --no-partial \
        --checkpoint-every 10 --quiet --root "$runs" --shipped "$shipto" \
        $(for f in $(printf '%s\n' "$step_ms" "$stored_ms" | awk '!seen[$0]++'); do [ -f "$f" ] && echo --step-ms "$f"; done) \
        2>&1 | tee -a "$state/logs/sweep.log" &
    sweep=$!
    OMP_NUM_THREADS=${SHIP_THREADS:-8} timeout $(( stop - $(date +%s) - 20 )) "$py" -m workbench ship --grid "$grid" \
        --tier "$tier" $([ -n "$tags" ] && echo --tags "$tags") --root "$runs" --to "$shipto" --tables "$tables" \
        --device "$device" $([ -n "$then_tables" ] && echo --then-tables "$then_tables") --follow 20 \
        --while-pid "$sweep" 2>&1 | tee -a "$state/logs/ship.log"
    restore_aside
    wait "$sweep"; rc=$?
    case "$flags" in
      *--sdpa-backend*) [ "$rc" = 0 ] && break
        say "the sweep failed with SDPA's ${flags##*--sdpa-backend } first: the runs again in PyTorch's order"
        flags=$(echo "$flags" | sed 's/ *--sdpa-backend [a-z_]*//') ;;
      *) break ;;
    esac
  done
  say "sweep exit $rc"
  spare_check "$stop"
  echo "$rc" > "$state/job.rc"   # after the spare measurement: an --attach call waits for it, then packs
}

restore_aside() {  # a re-ship killed between its two renames: the copies shipped before put back (store.ship)
  local back
  back=$("$py" -c "import sys; from workbench.store.ship import restore_aside; print(*restore_aside(sys.argv[1]))" \
    "$shipto" 2>>"$out/window.log")
  [ -z "$back" ] || say "shipped copies put back after a cut re-ship: $back"
}

spare_check() {  # the time the sweep left before epoch second $1 (no run fitted it): SPARE's step measurement
  local left=$(( $1 - $(date +%s) - ${SPARE_END:-35} ))  # SPARE_END: kept for the attach call's packing
  [ -n "$spare" ] || return 0
  if [ "$left" -lt "${SPARE_MIN:-60}" ]; then
    say "no spare time for a step measurement ($left s; SPARE_MIN ${SPARE_MIN:-60})"; return 0
  fi
  say "spare time: up to $left s of benchmarks/gpu_step.py $spare (logs/spare_step.json)"
  timeout -k 5 "$left" "$py" benchmarks/gpu_step.py --device "$device" --json "$state/logs/spare_step.json" $spare \
      >> "$state/logs/spare.log" 2>&1
  say "spare measurement exit $? (124: its time was up; the parts done are in spare_step.json)"
}

job_running() {  # its pid alive and not a zombie (a killed job waits for init to reap it), no exit status yet
  local pid
  pid=$(cat "$state/job.pid" 2>/dev/null) && [ ! -f "$state/job.rc" ] && [ -e "/proc/$pid" ] \
    && ! grep -q '^[0-9]* ([^)]*) Z' "/proc/$pid/stat" 2>/dev/null
}

session_of() {  # the session of process $1: /proc/PID/stat's 6th field (its name, in parentheses, may hold spaces)
  sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f4
}

wait_job() {  # until the job has written its exit status or died, or epoch second $1
  while job_running && [ "$(date +%s)" -lt "$1" ]; do sleep 2; done
}

pack() {  # what a call brings back; the shipped runs as results/paper/RUN_ID/..., never a half-shipped folder
  # (a detached job may still be writing: its files may change or go while they are read, and tar then exits 1 with
  # a whole archive). Each archive is written under a .part name and renamed when tar has ended: a call cut off
  # mid-pack leaves the last whole one (and a .part, which window_back.py never reads)
  local live="--warning=no-file-changed --warning=no-file-removed --ignore-failed-read"
  [ -d "$shipto" ] && { tar czf "$out/results-paper.tgz.part" $live -C "$shipto" --exclude='.*.shipping' \
    --exclude='.*.old' --transform "s,^\.,${results#/}," .; mv "$out/results-paper.tgz.part" "$out/results-paper.tgz"; }
  [ -d "$runs" ] && { tar czf "$out/runs-paper-meta.tgz.part" $live --exclude='*.safetensors' \
    --exclude='*.safetensors.next' --exclude='*.tmp' "$runs"
    mv "$out/runs-paper-meta.tgz.part" "$out/runs-paper-meta.tgz"; }
  [ -f "$state/gpu_step.json" ] && { cp "$state/gpu_step.json" "$out/gpu_step.json.part"
    mv "$out/gpu_step.json.part" "$out/gpu_step.json"; }
  # Triton's compiled kernels only (keyed by their source, so shared by every model with the same kernel: 2.9 MB
  # packed for RoPE's training); inductor's graph cache (3.1 MB more a model, a hit only for the same model and
  # code) would outgrow the 16 MiB a file may bring back (the whole cache after the check's extra modes did)
  [ -d "$TORCHINDUCTOR_CACHE_DIR/triton" ] && { tar czf "$out/inductor-cache.tgz.part" \
    -C "$(dirname "$TORCHINDUCTOR_CACHE_DIR")" "$(basename "$TORCHINDUCTOR_CACHE_DIR")/triton"
    mv "$out/inductor-cache.tgz.part" "$out/inductor-cache.tgz"; }
  say "packed"
  tar czf "$out/logs.tgz.part" $live -C "$state/logs" . $([ -d "$out/check" ] && echo -C "$out" check)
  mv "$out/logs.tgz.part" "$out/logs.tgz" && rm -rf "$out/check"
}

if [ "$mode" = job ]; then  # the detached job: the environment from the call that started it, the flags from state
  . "$state/job.env"
  train_job "$end"
  exit 0
fi
if [ "$mode" = attach ]; then
  export TORCHINDUCTOR_CACHE_DIR="${INDUCTOR_CACHE:-$PWD/.inductor-cache}"
  # packed once at once: a call cut off before its end (the session's device time spent) still brings back what
  # the job had shipped by now; packed again at the end
  [ -f "$state/job.pid" ] && job_running && pack
  if job_running; then
    say "the detached job is training (pid $(cat "$state/job.pid")); waiting"
    wait_job $(( call_end - ${PACK_S:-15} ))
  elif [ -f "$state/job.rc" ]; then
    say "the detached job has ended (exit $(cat "$state/job.rc"))"
  elif [ -f "$state/job.pid" ]; then  # the first call's end killed it: resume its runs from their checkpoints
    say "the detached job did not outlive the first call: resuming its runs here"
    . "$state/job.env"
    setup
    train_job $(( call_end - ${PACK_S:-15} ))
  else
    say "no detached job on this machine (a fresh machine?): nothing to wait for"
  fi
  tail -n 20 "$state/logs/job.log" 2>/dev/null
  job_running && say "the job is still training: packing what is shipped"
  pack
  [ "$(cat "$state/job.rc" 2>/dev/null)" = 0 ]; exit
fi

if job_running; then
  say "a detached job is still training here (pid $(cat "$state/job.pid")): --attach to it, or wait for it"; exit 1
fi
rm -rf "$state/logs" "$state/job.pid" "$state/job.rc" "$state/job.env" "$state/step_ms.json" "$state/gpu_step.json"
mkdir -p "$state/logs"
setup
if [ "$check" = 1 ]; then
  PYTHON="$py" EPOCH=${EPOCH:-0} T_TESTS=${T_TESTS:-45} T_STEP=${T_STEP:-200} bash benchmarks/gpu_check.sh "$out/check" ${CHECK_ARGS:---steps 50 --profile --sdpa flash_attention,efficient_attention,cudnn_attention --modes reduce-overhead}
  [ -f "$out/check/step_ms.json" ] && cp "$out/check/step_ms.json" "$state/step_ms.json" && step_ms=$state/step_ms.json
  [ -f "$out/check/gpu_step.json" ] && cp "$out/check/gpu_step.json" "$state/gpu_step.json"  # for each call to bring
  say "check done"
fi
if [ "$only" = 1 ]; then
  say "check only: no training"
  pack
  exit 0
fi
# COMPILE=auto: compiled unless this window's check measured RoPE's eager step faster (H100: compiled 2.7x);
# SDPA_BACKEND=auto: the backend of the check's fastest eager RoPE step where it saves > 3 % (window_choice.py)
chosen_compile=yes chosen_sdpa=-
[ -f "$out/check/gpu_step.json" ] && read -r chosen_compile chosen_sdpa < <("$py" benchmarks/window_choice.py \
  "$out/check/gpu_step.json" 2>/dev/null || echo "yes -")
[ "$compile" = auto ] && compile=$chosen_compile
sdpa=${SDPA_BACKEND:-}
[ "$sdpa" = auto ] && { sdpa=$chosen_sdpa; [ "$sdpa" = - ] && sdpa=""; }
# SDPA_BACKEND=triton (PE-Lab's attention kernel) that no check of this window cleared: its agreement with SDPA
# first (gpu_step.py --kernel-check, about 10 s); where it disagrees or fails, the window trains in PyTorch's order
if [ "$sdpa" = triton ] && [ "$chosen_sdpa" != triton ]; then
  if "$py" benchmarks/gpu_step.py --device "$device" --kernel-check "$state/logs/kernel_check.json" \
      >> "$state/logs/kernel_check.log" 2>&1; then
    say "the Triton attention kernel agrees with SDPA (logs/kernel_check.json): training with it"
  else
    say "the Triton attention kernel did not pass its agreement with SDPA (logs/kernel_check.json): PyTorch's order"
    sdpa=""
  fi
fi
flags=$([ "$compile" = yes ] && echo --compile)
# COMPILE_MODE=reduce-overhead (CUDA graphs) where a check measured it the faster (gpu_step.json "modes")
[ "$compile" = yes ] && [ -n "${COMPILE_MODE:-}" ] && flags="$flags --compile-mode $COMPILE_MODE"
# SDPA_BACKEND=flash_attention (or another, or auto) tried first by SDPA (gpu_step.json "sdpa" times each)
[ -n "$sdpa" ] && flags="$flags --sdpa-backend $sdpa"
# for the detached job, or its resume in --attach: this call's settings, whatever the next call's environment says
printf 'flags=%q\nstep_ms=%q\ntags=%q\ntier=%q\ntables=%q\nthen_tables=%q\nspare=%q\n' "$flags" "$step_ms" "$tags" \
  "$tier" "$tables" "$then_tables" "$spare" > "$state/job.env"
if [ "$mode" = run ]; then
  train_job "$end"
else  # detached: seeded with what is shipped, so the sweep skips it; its own process session outlives this call
  rm -rf "$shipto" && mkdir -p "$shipto" && { [ -d "$results" ] && cp -a "$results/." "$shipto/"; }
  "$py" -c 'import os, sys; os.setsid(); os.execvp("bash", ["bash"] + sys.argv[1:])' "$0" --job "$end" "$t0" \
      </dev/null >"$state/logs/job.log" 2>&1 &
  echo $! > "$state/job.pid"
  # until the job has called setsid it is in this call's process group, which the device machine kills at the
  # call's end (a call that returned at once lost its job so on a loaded machine): wait for it, 30 s at most
  for _ in $(seq 300); do [ "$(session_of $!)" = "$!" ] && break; sleep 0.1; done
  say "training job detached (pid $!, ends $(( end - t0 )) s after this call's start); this call returns at $(( call_end - t0 )) s"
  wait_job $(( call_end - ${PACK_S:-15} ))
  tail -n 20 "$state/logs/job.log"
  job_running && say "the job goes on training: packing what is shipped so far"
fi
pack
[ "$(cat "$state/job.rc" 2>/dev/null || echo 0)" = 0 ]
