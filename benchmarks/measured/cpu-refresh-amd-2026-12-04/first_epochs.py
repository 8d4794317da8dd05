"""Re-train a shipped CPU run for its first epochs and compare each with the shipped one bit for bit, stopping at
the first that differs or after --epochs equal ones (the AMD EPYC AVX2 cross-machine check of 2026-12-04)."""
import sys, time
from workbench.store import RunStore
from workbench.train.loop import StopTraining
from workbench.train.recreate import recreate, stop_at_first_difference, metric_differences

rid, root, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3])
shipped = RunStore("/work/main/results/repro", readonly=True)
rows = shipped.get(rid).metric_rows()
check = stop_at_first_difference(rows)
t0 = time.time()

def on_epoch(run, row):
    d = metric_differences([r for r in rows if r["epoch"] == row["epoch"]], [row])
    print(f"{rid} epoch {row['epoch']}: " + ", ".join(f"{k} {v:.3g}" for k, v in d.items()) + f" ({time.time()-t0:.0f} s)", flush=True)
    check(run, row)
    if row["epoch"] >= epochs:
        raise StopTraining(f"{epochs} epochs equal to the shipped ones bit for bit: stopped")

run = recreate(shipped, RunStore(root), rid, threads=1, on_epoch=on_epoch, tables=False, say=print)
print(rid, run.status, run.info.get("error"), run.info.get("numerics", {}).get("cpu_capability"), flush=True)
