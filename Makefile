# PE-Lab: `make demo` runs the main job, `make test` runs every test.
# Both create .venv from nothing but python3.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export PYTHONHASHSEED := 0

.PHONY: demo test venv browser clean repro ladder study refresh repro-gpu gpu-wheels

venv: $(STAMP)

# torch 2.13.0 goes in first and is pinned by a constraint file, so nothing later can replace it with a CUDA build.
# Without nvidia-smi it is the CPU build, 2.13.0+cpu: from a wheel pip finds locally (find-links) or on its index,
# else from PyTorch's CPU index (PyPI's 2.13.0 for Linux is the CUDA build, several GB with its nvidia-* wheels).
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@if command -v nvidia-smi >/dev/null; then $(PY) -m pip install -q "torch==2.13.0"; \
	 else $(PY) -m pip install -q "torch==2.13.0+cpu" 2>/dev/null || \
	      $(PY) -m pip install -q "torch==2.13.0+cpu" --index-url https://download.pytorch.org/whl/cpu; fi
	echo "torch==2.13.0" > $(VENV)/constraints.txt
	$(PY) -m pip install -q -c $(VENV)/constraints.txt -e ".[dev]"
	@if $(PY) -m pip list 2>/dev/null | grep -i '^nvidia-'; then \
	    if ! command -v nvidia-smi >/dev/null; then echo "ERROR: CUDA wheels on a CPU machine" >&2; exit 1; fi; fi
	touch $(STAMP)

# Headless chromium + chromedriver (Debian packages) for the dashboard tests.
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	 ( (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null) \
	   || echo "warning: could not install chromium; browser tests will be skipped" )

# TEST_WORKERS pytest processes (pytest-xdist), each given whole files, the slow ones first (tests/conftest.py);
# TEST_WORKERS=0 runs them in this process, one at a time. Three on 2 cores: many tests wait on a browser, a child
# process or a server, and a third worker fills those waits (measured on a 2-core AMD EPYC: 2 workers about 12 min,
# 3 about 10.6, 4 about 11.2; benchmarks/measured/cpu-suite-2026-12-05).
TEST_WORKERS ?= 3
test: $(STAMP) browser
	$(PY) -m workbench check results/repro
	$(PY) -m workbench check results/paper
	@t=$$(mktemp -d /tmp/pelab-test.XXXXXX); RAY_TMPDIR=$$t OMP_WAIT_POLICY=PASSIVE $(PY) -m pytest tests -rs \
	    -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --basetemp=$$t/pytest; rc=$$?; rm -rf $$t; exit $$rc

demo: $(STAMP)
	$(PY) -m workbench.demo

# The reproduction (docs/reproduction.md): train what is unfinished of tier $(TIER) of grids/repro.toml into
# $(REPRO_RUNS) (resumes where it stopped; 2 single-thread workers, niced); beside it, `ship --follow` runs every
# analysis on each run as it finishes and ships it to results/repro (a session that ends mid-grid keeps what
# finished); a last `ship` pass after the sweep, then COMPARISON.md, the README block and the Table 1 figure.
REPRO_RUNS ?= runs-repro
CPU_RUN  := OMP_WAIT_POLICY=PASSIVE nice -n 10 $(VENV)/bin/workbench
CPU_SHIP := OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 nice -n 10 $(VENV)/bin/workbench ship
TIER ?= 1
COMPARE  := $(VENV)/bin/workbench compare results/repro --readme README.md --figure docs/img/findings_table1.png \
            --study-figure docs/img/findings_study.png
repro: $(STAMP)
	$(CPU_RUN) sweep grids/repro.toml --tier $(TIER) --workers 2 --threads 1 --quiet --root $(REPRO_RUNS) \
	    --shipped results/repro & sweep=$$!; \
	$(CPU_SHIP) --grid grids/repro.toml --tier $(TIER) --root $(REPRO_RUNS) --to results/repro --follow 60; \
	wait $$sweep; rc=$$?; \
	$(CPU_SHIP) --grid grids/repro.toml --tier $(TIER) --root $(REPRO_RUNS) --to results/repro && exit $$rc
	$(COMPARE)

# The scale ladder (docs/reproduction.md#the-scale-ladder): the deciding settings at repro-long, repro-paperdata,
# repro-wide (and repro-paperdata-long), seed 42 (43 and 44 where seed 42's verdict moved), into the same store; shipped beside the repro runs, compared with them in COMPARISON.md.
ladder: $(STAMP)
	$(CPU_RUN) sweep grids/ladder.toml --workers 2 --threads 1 --quiet --root $(REPRO_RUNS) \
	    --shipped results/repro & sweep=$$!; \
	$(CPU_SHIP) --grid grids/ladder.toml --root $(REPRO_RUNS) --to results/repro --follow 60; \
	wait $$sweep; rc=$$?; \
	$(CPU_SHIP) --grid grids/ladder.toml --root $(REPRO_RUNS) --to results/repro && exit $$rc
	$(COMPARE)

# The registered seed study (docs/preregistration.md, grids/study.toml): tier $(TIER) (1: RoPE and MLA on Task 1 at
# repro-long, 10 training x 2 data seeds each; 2: NoPE vs RoPE on Task 2; 3: NoPE and Relative on Task 1 at
# repro-long, 4 x 2 seeds each; 4: Relative on Task 1 at repro-xlong, 24 epochs, 4 x 2 seeds) into the same store, $(SWEEPS) niced sweep(s) each packing $(PACK) seeds
# (run locks keep them apart: SWEEPS=2 uses both cores, about twice the rate; the default leaves one core free);
# each run is shipped lean (metrics, zero-ablation and its deposit table) as it finishes. PACK=1 trains each run
# alone: for tier 2 (Task 2 at repro-paperdata-long) two solo runs side by side trained 1.13x the rate of two packs of
# 2 (docs/training.md, "Packed runs"), and a pair's two sides finish together.
SWEEPS ?= 1
PACK ?= 2
study: $(STAMP)
	pids=; for i in $$(seq $(SWEEPS)); do \
	    $(CPU_RUN) sweep grids/study.toml --tier $(TIER) --workers 1 --threads 1 --pack $(PACK) --quiet \
	        --root $(REPRO_RUNS) --shipped results/repro & pids="$$pids $$!"; sleep 20; done; \
	$(CPU_SHIP) --grid grids/study.toml --tier $(TIER) --tables ablation,deposit --root $(REPRO_RUNS) \
	    --to results/repro --follow 120; \
	rc=0; for p in $$pids; do wait $$p || rc=$$?; done; \
	$(CPU_SHIP) --grid grids/study.toml --tier $(TIER) --tables ablation,deposit --root $(REPRO_RUNS) \
	    --to results/repro && exit $$rc
	$(COMPARE)

# Re-make the shipped tables made before their analysis changed its numbers (docs/reproduction.md, "Refreshing such
# tables"): `verify --stale $(STALE) --refresh`, two niced single-thread processes (--shard 0/2, 1/2), re-trains each
# such run this machine may re-train bit for bit, shortest first, into $(REFRESH_RUNS) and, where every epoch's metrics
# equal the shipped ones, ships the tables recomputed from its weights in their place; then COMPARISON.md. Resumes (a
# refreshed run is stale no more). Needs a committed tree, left unedited while it runs (each table records the code
# that made it): a worktree (`git worktree add ../pe-refresh HEAD`) keeps yours free.
STALE ?= probes,patching,trigger_attention,dla,head_summary
REFRESH_RUNS ?= runs-refresh
refresh: $(STAMP)
	pids=; for i in 0 1; do \
	    $(CPU_RUN) verify --stale $(STALE) --shard $$i/2 --refresh -q --root $(REFRESH_RUNS) \
	        --shipped results/repro & pids="$$pids $$!"; done; \
	rc=0; for p in $$pids; do wait $$p || rc=$$?; done; \
	$(COMPARE) && exit $$rc

# The paper-scale reproduction in a lent GPU window (docs/training.md, "One GPU window"): benchmarks/gpu_window.sh
# installs the wheels the image lacks from .whl/ (git-ignored, carried), trains what fits of tier $(TIER) of
# grids/paper.toml (Table 1's runs, seed by seed) in $(WINDOW) seconds (`sweep --deadline`, no run started that is not
# expected to finish), ships each finished run to results/paper as the next trains, and packs results/paper into
# $$OUT to bring back. The next window's same command trains the rest. The first window after a change to the GPU
# path runs `bash benchmarks/gpu_window.sh --check 540` instead (the check first, then training).
WINDOW     ?= 540
repro-gpu:
	TIER=$(TIER) bash benchmarks/gpu_window.sh $(WINDOW)

# Before a GPU window, here (a new checkout has no .whl/): the wheels of benchmarks/gpu_wheels.txt for the device
# image's CPython 3.12, downloaded into .whl/ (4 wheels, 2.3 MiB, a few seconds), which each device call carries;
# then what a call sends (tree + .whl) against the device tool's 64 MiB, failing here rather than at the call.
GPU_PLATFORMS := $(foreach p,manylinux_2_28 manylinux_2_27 manylinux_2_17 manylinux2014 manylinux1,--platform $(p)_x86_64)
gpu-wheels:
	rm -rf .whl.part && mkdir -p .whl.part
	$(PYTHON) -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
	    $(GPU_PLATFORMS) -d .whl.part -r benchmarks/gpu_wheels.txt
	rm -rf .whl && mv .whl.part .whl && ls .whl/*.whl | wc -l | xargs echo "wheels in .whl:"
	$(PYTHON) benchmarks/window_size.py --carry .whl

clean:
	rm -rf $(VENV) runs data_cache
