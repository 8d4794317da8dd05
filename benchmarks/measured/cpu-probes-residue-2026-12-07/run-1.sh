export OMP_WAIT_POLICY=PASSIVE PELAB_DATA=$PWD/data_cache ATEN_CPU_CAPABILITY=avx2
NPY="X86_V4 AVX512_ICL AVX512_SPR"
echo "== all held"; OPENBLAS_CORETYPE=Zen NPY_DISABLE_CPU_FEATURES="$NPY" .venv/bin/python benchmarks/measured/cpu-probes-residue-2026-12-07/probes_hold.py
echo "== openblas held"; OPENBLAS_CORETYPE=Zen .venv/bin/python benchmarks/measured/cpu-probes-residue-2026-12-07/probes_hold.py
echo "== numpy held"; NPY_DISABLE_CPU_FEATURES="$NPY" .venv/bin/python benchmarks/measured/cpu-probes-residue-2026-12-07/probes_hold.py
