#!/bin/bash
# git bisect run: exit 0 when this commit's `workbench analyze --what probes` re-makes t1-tapa-repro-s42's shipped probes
# from its bit-identical re-trained weights (1 thread), 1 when it does not, 125 when it cannot run.
rm -rf /tmp/tapa-bis && mkdir -p /tmp/tapa-bis && cp -a /work/pe-refresh/runs-refresh/t1-tapa-repro-s42-ea0e93 /tmp/tapa-bis/ \
  && rm -rf /tmp/tapa-bis/t1-tapa-repro-s42-ea0e93/tables
cd /tmp/pe-b523926
PYTHONPATH=/tmp/pe-b523926 OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 timeout 300 nice -n 5 /work/pe-refresh/.venv/bin/python -c "
import sys
from workbench.cli import app
sys.argv=['workbench','analyze','t1-tapa-repro-s42-ea0e93','--what','probes','--root','/tmp/tapa-bis']
app()
" > /tmp/bisect_last.log 2>&1
ls /tmp/tapa-bis/t1-tapa-repro-s42-ea0e93/tables/probes* >/dev/null 2>&1 || exit 125
cd /work/main && OMP_WAIT_POLICY=PASSIVE .venv/bin/python - <<'PY'
import glob, sys, pandas as pd
from workbench.analysis import reproduce as R
from workbench.store import RunStore
s = RunStore("results/repro", readonly=True).get("t1-tapa-repro-s42-ea0e93")
mine = pd.read_parquet(glob.glob("/tmp/tapa-bis/t1-tapa-repro-s42-ea0e93/tables/probes*")[0])
a = R.table_agreement(s.load_table("probes"), mine)
print(a["why"]); sys.exit(0 if a["equal"] else 1)
PY
