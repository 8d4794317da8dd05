"""Is t1-tapa-repro-s42's shipped probes table what the re-trained weights give on 2 threads (not the 1 it trained on)?"""
import sys
from workbench.analysis import reproduce as R
from workbench.store import RunStore

shipped = RunStore("results/repro", readonly=True)
own = RunStore("runs-refresh")
rid = "t1-tapa-repro-s42-ea0e93"
srun, rerun = shipped.get(rid) if hasattr(shipped, "get") else shipped.run(rid), None
rerun = own.get(rid) if hasattr(own, "get") else own.run(rid)
for threads in [int(t) for t in sys.argv[1:]]:
    R.analysis_threads = lambda _run, t=threads: t
    tables, params, _ = R.recompute_tables(rerun, srun, ["probes"])
    print(threads, "thread(s):", R.table_agreement(srun.load_table("probes"), tables["probes"]), flush=True)
