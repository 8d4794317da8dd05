export OMP_WAIT_POLICY=PASSIVE PELAB_DATA=$PWD/data_cache ATEN_CPU_CAPABILITY=avx2 OPENBLAS_CORETYPE=Zen
NPY="X86_V4 AVX512_ICL AVX512_SPR"
echo "== openblas and MKL held"; MKL_ENABLE_INSTRUCTIONS=AVX2 .venv/bin/python benchmarks/measured/cpu-probes-residue-2026-12-07/probes_hold.py
echo "== openblas held, one openblas thread"; OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/measured/cpu-probes-residue-2026-12-07/probes_hold.py
echo "== all held, MKL too"; MKL_ENABLE_INSTRUCTIONS=AVX2 NPY_DISABLE_CPU_FEATURES="$NPY" .venv/bin/python benchmarks/measured/cpu-probes-residue-2026-12-07/probes_hold.py
echo "== openblas Haswell"; OPENBLAS_CORETYPE=Haswell .venv/bin/python benchmarks/measured/cpu-probes-residue-2026-12-07/probes_hold.py
echo "== nothing held but ATen"; OPENBLAS_CORETYPE= .venv/bin/python benchmarks/measured/cpu-probes-residue-2026-12-07/probes_hold.py
