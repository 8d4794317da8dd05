"""What a process pays to start: the CPU seconds of `import workbench.train` (what every command, sweep worker and
analysis process imports) with TransformerLens' hook classes imported alone (`workbench/model/tl.py`), against the
same import after a plain `import transformer_lens` (its package `__init__`: HookedTransformer's bridge,
`transformers`, `datasets`), each in fresh Python processes, alternated, the median of --repeat.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/bench_import.py [--repeat 5] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASES = {"plain transformer_lens first": "import transformer_lens; import workbench.train",
         "workbench.train alone": "import workbench.train"}
PROBE = ("import resource, sys; {code}; r = resource.getrusage(resource.RUSAGE_SELF); "
         "print(r.ru_utime + r.ru_stime, 'transformers' in sys.modules)")


def cpu_of(code: str) -> tuple[float, bool]:
    """(process CPU seconds, whether `transformers` was imported) of a fresh Python running `code`."""
    out = subprocess.run([sys.executable, "-c", PROBE.format(code=code)], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout.split()
    return float(out[0]), out[1] == "True"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    runs: dict[str, list[float]] = {name: [] for name in CASES}
    imported = {}
    for _ in range(args.repeat):
        for name, code in CASES.items():
            cpu, imported[name] = cpu_of(code)
            runs[name].append(cpu)
    ref, fast = CASES
    med = {name: statistics.median(v) for name, v in runs.items()}
    for name in CASES:
        print(f"{name:30s} median {med[name]:5.2f} CPU-s  (transformers imported: {imported[name]})  {runs[name]}")
    print(f"ratio {ref} / {fast}: {med[ref] / med[fast]:.2f}x")
    if args.json:
        from workbench.store.runstore import code_version
        from workbench.store.run import machine_identity

        args.json.write_text(json.dumps({"cpu_s": runs, "median_cpu_s": med, "transformers_imported": imported,
                                         "ratio": med[ref] / med[fast], "code_version": code_version(),
                                         "machine": machine_identity(), "python": sys.version.split()[0]}, indent=1))


if __name__ == "__main__":
    main()
