"""Each epoch a `workbench verify` re-training has recorded so far against the shipped run's, bit for bit.

    python compare_epochs.py RUN_ID VERIFY_ROOT      # VERIFY_ROOT: the --root the verify trains into

Prints one line per epoch the re-training has finished: equal (every field but the timings: `run.learned`) or the
fields that differ with both values. Read-only: it reads the shipped results/repro and the re-training's metrics."""
import json
import sys
from pathlib import Path

from workbench.store.run import learned

REPO = Path(__file__).resolve().parents[3]
rid, root = sys.argv[1], Path(sys.argv[2])
shipped = [json.loads(x) for x in (REPO / "results" / "repro" / rid / "metrics.jsonl").read_text().splitlines() if x]
mine = [json.loads(x) for x in (root / rid / "metrics.jsonl").read_text().splitlines() if x]
for a, b in zip(learned(shipped), learned(mine)):
    diff = {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}
    print(f"{rid} epoch {a['epoch']}: " + ("bit-identical" if not diff else f"differs: {diff}"))
print(f"{rid}: {min(len(shipped), len(mine))} of {len(shipped)} epochs compared")
