import time, os
t=time.perf_counter()
from workbench.store import RunStore
from workbench.analysis.claims import run_table
from workbench.report.comparison import comparison_markdown, readme_block
print("import", round(time.perf_counter()-t,1))
for i in range(2):
    t=time.perf_counter(); c=time.process_time()
    store = RunStore("results/repro", readonly=True)
    comparison_markdown(store)
    print("compare", round(time.perf_counter()-t,1), round(time.process_time()-c,1))
    t=time.perf_counter(); c=time.process_time()
    store = RunStore("results/repro", readonly=True)
    readme_block(store, "docs/img/findings_table1.png", "results/repro", study_figure="docs/img/findings_study.png")
    print("readme", round(time.perf_counter()-t,1), round(time.process_time()-c,1))
