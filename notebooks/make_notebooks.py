"""Write the tutorial notebooks from the cell sources below (`python notebooks/make_notebooks.py`).

The notebooks are committed without outputs; tests/test_notebooks.py executes them top to bottom with
nbclient at the smoke preset (PELAB_PRESET=smoke, PELAB_RUNS=<temporary store>), so they never rot.
"""
from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent

SETUP = '''\
# Parameters. The test suite runs this notebook with PELAB_PRESET=smoke and PELAB_RUNS=<temporary store>.
import os

PRESET = os.environ.get("PELAB_PRESET", "cpu")     # smoke (seconds) | cpu (about a minute a run) | paper (GPU)
RUNS = os.environ.get("PELAB_RUNS", "runs")         # the run store: trained runs are reused, not retrained
THREADS = int(os.environ.get("PELAB_THREADS", "2"))

import numpy as np
import pandas as pd
import torch

torch.set_num_threads(THREADS)
from workbench.store import RunStore
from workbench.train.loop import train
from workbench.train.presets import resolve_config

store = RunStore(RUNS)


def get_run(scheme, task="trigger-distance", **model_kwargs):
    """The finished run of this configuration: loaded from the store, or trained now (resumed if partial)."""
    sets = [(f"model.scheme_kwargs.{k}", v) for k, v in model_kwargs.items()]
    cfg = resolve_config(preset=PRESET, scheme=scheme, task=task, sets=sets, store=store)
    return train(cfg, store, resume=True, progress=False)


print(f"preset {PRESET}, store {store.root}")
'''

NB0 = [
    new_markdown_cell("""\
# Findings: the core paper reproduced on CPU (no training needed)

This notebook reads the **shipped results** (`results/repro`: configs, provenance, metrics and every analysis
table of each run, no weights) and shows what the reproduction found: the paper's Table 1 next to PE-Lab's
numbers over seeds, each of the paper's claims with a verdict, and the seed-aggregated ablation atlas behind the
central claim. Nothing is trained; to look inside a model, re-create a run (`workbench recreate RUN_ID`, which
re-trains it deterministically) and use notebooks 01-03. The full text is `results/repro/COMPARISON.md`."""),
    new_code_cell('''\
# Parameters. The test suite runs this notebook with PELAB_SHIPPED=<a small shipped store>.
import os

import pandas as pd

from workbench.analysis import aggregate_seeds
from workbench.analysis.claims import claims, run_table, table1
from workbench.analysis.experiments import convergence
from workbench.figures import FIGURES
from workbench.store import RunStore, shipped_root

root = shipped_root()  # $PELAB_SHIPPED, else results/repro of this checkout
assert root is not None, "no shipped results: run from a PE-Lab checkout or set PELAB_SHIPPED"
store = RunStore(root, readonly=True)
runs = run_table(store)
print(f"{len(runs)} shipped runs in {root}")
runs.groupby(["setting", "task"]).variant.agg(lambda v: ", ".join(sorted(set(v))))'''),
    new_markdown_cell("## Table 1: the paper's test accuracy next to PE-Lab's (mean and 95 % interval over seeds)"),
    new_code_cell('''\
t1 = table1(runs)
display(t1.drop(columns=["runs"]))
FIGURES["table1"](t1)'''),
    new_markdown_cell("## The paper's claims, one verdict per setting"),
    new_code_cell('''\
cl = claims(store, runs)
with pd.option_context("display.max_colwidth", 200):
    display(cl[["claim", "setting", "verdict", "evidence"]])'''),
    new_markdown_cell("""\
## The central claim: RoPE's single-head deposit on Task 1
The zero-ablation atlas of the RoPE runs (PE-Lab `paper` architecture), averaged over seeds: mean delta per
head with a Student-t interval over seeds."""),
    new_code_cell('''\
ids = runs[(runs.setting == "paper") & (runs.variant == "rope") & (runs.task == "trigger-distance")].run_id
tables = [store.get(i).load_table("ablation") for i in ids if store.get(i).has_table("ablation")]
print(f"{len(tables)} RoPE Task 1 runs with an ablation table")
FIGURES["ablation"](aggregate_seeds(tables) if len(tables) > 1 else tables[0])'''),
    new_markdown_cell("## Learning curves of the shipped runs"),
    new_code_cell('''\
curves = convergence(runs=[store.get(i) for i in runs[runs.setting == "paper"].run_id])
FIGURES["convergence"](curves)'''),
]

NB1 = [
    new_markdown_cell("""\
# Head ablation: which heads carry the position signal?

The core paper (seed 003) trains 6-layer classifiers on the *trigger distance* task and zeroes one head at a
time: with RoPE, one head of a shallow layer carries almost everything (a **single-head deposit**). This
notebook does the same at a small scale:

1. train (or load) a RoPE run,
2. read the per-head queries and keys twice -- with TransformerLens (`run_with_cache`) and with nnsight
   (`NNsight(model).trace`) -- and check that both see the same tensors,
3. run the head-ablation sweep (`workbench.analysis`), store it with the run,
4. draw the ablation atlas with the shared figure builders (`workbench.figures`) and read the deposit
   statistics.

Everything here is also in the dashboard (`workbench app`, page *Ablation atlas*) and in `workbench report`."""),
    new_code_cell(SETUP),
    new_markdown_cell("## 1. A trained run\n`get_run` trains only when the store does not hold this configuration yet."),
    new_code_cell('''\
run = get_run("rope", "trigger-distance")
model, ds = run.load_model(), run.load_dataset()
print(run.id, run.status, {k: round(v, 4) for k, v in run.final.items() if isinstance(v, float)})
print("example:", ds.decode(ds.test_x[0]), "-> label (distance)", int(ds.test_y[0]))
run.metrics()[["epoch", "train_loss", "train_acc", "test_loss", "test_acc"]]'''),
    new_markdown_cell("""\
## 2. Queries and keys, two ways
`hook_q` / `hook_k` are the per-head projections *before* the rotary transform, `[batch, pos, head, d_head]`.
TransformerLens caches them with `run_with_cache`; nnsight reads the same hook points inside a trace (in
nnsight 0.8 modules are accessed in execution order: layer by layer, `hook_q` before `hook_k`)."""),
    new_code_cell('''\
tokens = torch.as_tensor(ds.test_x[:64])
L = model.cfg.n_layers
names = [f"blocks.{l}.attn.hook_{w}" for l in range(L) for w in ("q", "k")]
logits_tl, cache = model.run_with_cache(tokens, names_filter=lambda n: n in names)
q_tl = torch.stack([cache[f"blocks.{l}.attn.hook_q"] for l in range(L)])
k_tl = torch.stack([cache[f"blocks.{l}.attn.hook_k"] for l in range(L)])
print("TransformerLens q:", tuple(q_tl.shape), "(layer, batch, pos, head, d_head)")'''),
    new_code_cell('''\
from nnsight import NNsight

wrapped = NNsight(model)
saved_q, saved_k = [], []                    # filled inside the trace (lists made outside it persist)
with wrapped.trace(tokens):
    for l in range(L):                       # execution order: layer by layer, q before k
        attn = wrapped.blocks[l].attn
        saved_q.append(attn.hook_q.output.save())
        saved_k.append(attn.hook_k.output.save())
    logits_nn = wrapped.output.save()
q_nn, k_nn = torch.stack(saved_q), torch.stack(saved_k)
torch.testing.assert_close(q_nn, q_tl)
torch.testing.assert_close(k_nn, k_tl)
torch.testing.assert_close(logits_nn, logits_tl)
print("nnsight and TransformerLens agree on q, k and the logits; max |q| =", float(q_nn.abs().max()))'''),
    new_markdown_cell("""\
## 3. The ablation sweep
`delta(l, h) = accuracy(clean) - accuracy(head h of layer l zeroed)` on the test split, with 95 % bootstrap
intervals over test examples. The table is stored with the run (`run.save_table`), so the dashboard and the
reports read it without recomputing."""),
    new_code_cell('''\
from workbench.analysis import ANALYSES

ablation = run.load_table("ablation") if run.has_table("ablation") else ANALYSES["ablation"](run)
acc = ablation[ablation.metric == "accuracy"]
acc.sort_values("delta", ascending=False).head(8)[["layer", "head", "clean", "ablated", "delta", "ci_lo", "ci_hi"]]'''),
    new_markdown_cell("A spot check of one cell of the table by hand: zero the top head's `z` with a hook."),
    new_code_cell('''\
top = acc.sort_values("delta", ascending=False).iloc[0]
l, h = int(top["layer"]), int(top["head"])


def zero_head(z, hook):
    z = z.clone()
    z[:, :, h] = 0.0
    return z


x, y = torch.as_tensor(ds.test_x), torch.as_tensor(ds.test_y)
with torch.no_grad():
    clean = (model(x).argmax(-1) == y).double().mean().item()
    ablated = (model.run_with_hooks(x, fwd_hooks=[(f"blocks.{l}.attn.hook_z", zero_head)]).argmax(-1) == y
               ).double().mean().item()
table_delta = float(top["delta"])
print(f"L{l}.H{h}: clean {clean:.4f}, ablated {ablated:.4f}, delta {clean - ablated:.4f} (table: {table_delta:.4f})")
assert abs((clean - ablated) - table_delta) < 1e-6'''),
    new_markdown_cell("## 4. The atlas and the deposit statistics"),
    new_code_cell('''\
from workbench.figures import FIGURES

FIGURES["ablation"](ablation, metric="accuracy")'''),
    new_code_cell('''FIGURES["ablation_layers"](ablation, metric="accuracy")'''),
    new_markdown_cell("Per layer: the concentration C_l, the top head against the second (paired bootstrap interval of the "
                      "gap) and the verdict: single-head deposit, average deposit or none."),
    new_code_cell('''\
from workbench.analysis import deposit

stats = deposit.compute(ablation, metric="accuracy")
print(deposit.deposit_sentence(stats))
FIGURES["deposit"](stats)'''),
    new_code_cell('''stats[["layer", "pattern", "concentration", "top_head", "top_delta", "top_lo", "top_hi", "gap", "gap_lo", "gap_hi"]]'''),
]

NB2 = [
    new_markdown_cell("""\
# Partial RoPE and MLA

Section 5 of the core paper moves the deposit around by restricting RoPE: **partial RoPE** puts RoPE on the first
k heads of a layer (NoPE on the rest), and **MLA** (DeepSeek-V3 latent attention) keeps a decoupled rotary part
shared across heads. This notebook trains (or loads) a small family of runs on the trigger-distance task --
NoPE, full RoPE, RoPE on one head of layer 0 only, RoPE on the first k heads of every layer, MLA -- ablates
every head of each, and compares accuracy and where the deposit sits.

All tables come from `workbench.analysis`, all figures from `workbench.figures`; the dashboard's *Partial RoPE*
page shows the same experiment."""),
    new_code_cell(SETUP),
    new_code_cell('''\
H = resolve_config(preset=PRESET, scheme="rope", store=store)["model"]["n_heads"]
family = {
    "nope": get_run("nope"),
    "rope (all heads)": get_run("rope"),
    "rope: 1 head, layer 0": get_run("rope", rope_heads=1, rope_layers=[0]),
    f"rope: {H // 2} heads, every layer": get_run("rope", rope_heads=H // 2),
    "mla": get_run("mla"),
}
pd.DataFrame([{"variant": k, "run": r.id, "status": r.status, "test_acc": r.final.get("test_acc")}
              for k, r in family.items()])'''),
    new_markdown_cell("## Ablation of every run (stored with each run)"),
    new_code_cell('''\
from workbench.analysis import ANALYSES, deposit

for name, r in family.items():
    if not r.has_table("ablation"):
        ANALYSES["ablation"](r)
    stats = deposit.compute(r.load_table("ablation"), metric="accuracy")
    print(f"{name:28s} {deposit.deposit_sentence(stats)}")'''),
    new_markdown_cell("## The partial-RoPE experiment table and its figure\n"
                      "One row per RoPE run: k heads with RoPE, the RoPE layer (-1: every layer), accuracy and the "
                      "deepest layer with a deposit."),
    new_code_cell('''\
from workbench.analysis import EXPERIMENTS
from workbench.figures import FIGURES

runs = list(family.values())
table = EXPERIMENTS["partial_rope"](runs=runs)
table[["run_id", "variant", "k", "layer", "test_acc", "deepest_deposit_layer", "n_single_deposits", "deposit"]]'''),
    new_code_cell('''FIGURES["partial_rope"](table)'''),
    new_markdown_cell("## MLA vs RoPE vs NoPE (the paper's Table 1 next to ours)"),
    new_code_cell('''\
mla = EXPERIMENTS["mla_rope_nope"](runs=runs)
display(mla[["scheme", "task", "test_acc", "paper_test_acc", "n_single_deposits", "max_concentration", "deposit"]])
FIGURES["mla_rope_nope"](mla)'''),
    new_markdown_cell("## MLA against RoPE, head by head"),
    new_code_cell('''\
for k in ("rope (all heads)", "mla"):
    display(FIGURES["ablation"](family[k].load_table("ablation"), metric="accuracy").update_layout(title=k))'''),
]

NB3 = [
    new_markdown_cell("""\
# Does the deposit head carry the distance? Patching and probes

The core paper calls a head a *deposit* when zeroing it alone costs accuracy. Zero-ablation shows a head is
**needed**, not what it **carries**: zeros are off-distribution, and a head the rest of the network merely leans on
looks just as important. This walk-through triangulates one head of a RoPE run on Task 1 with the other methods
of SPEC section 5:

1. the paper's view: zero-ablation and the deposit test;
2. resample ablation (z from a same-length test example: on-distribution);
3. activation patching with counterfactual pairs (the second trigger moved, d -> d'), written with **nnsight**;
4. linear probes with **scikit-learn** (position from the stream, the label from each head's z), with controls;
5. trigger attention and direct logit attribution;
6. the head summary: a "deposit head" verdict that needs two methods to agree.

`RUN_ID` picks a stored run (e.g. a shipped one); by default the notebook trains (or reuses) a RoPE run at the
preset of `PELAB_PRESET`."""),
    new_code_cell(SETUP + '''
RUN_ID = os.environ.get("PELAB_RUN_ID")  # a run of the store at RUNS; None = train / reuse a RoPE Task 1 run
'''),
    new_code_cell('''\
run = store.get(RUN_ID) if RUN_ID else get_run("rope", "trigger-distance")
model, ds = run.load_model(), run.load_dataset()
print(run.id, run.config["model"]["scheme"], ds.task, "test accuracy", run.final.get("test_acc"))'''),
    new_markdown_cell("## 1. The paper's view: zero-ablation and the deposit test"),
    new_code_cell('''\
from workbench.analysis import ANALYSES, deposit
from workbench.figures import FIGURES


def table(name, **params):
    """The run's stored table, computed (and stored) when missing."""
    return run.load_table(name) if run.has_table(name) else ANALYSES[name](run, **params)


ablation = table("ablation")
stats = deposit.compute(ablation)
print(deposit.deposit_sentence(stats))
acc = ablation[ablation.metric == "accuracy"]
top = acc.sort_values("delta", ascending=False).iloc[0]
L, H = int(top["layer"]), int(top["head"])
print(f"the head the paper would name: layer {L}, head {H} (zero-ablation delta {top.delta:.3f})")'''),
    new_markdown_cell("## 2. Resample ablation\nThe head's z from another test example of the same length "
                      "(a seeded derangement within each length group), in the same batched sweep."),
    new_code_cell('''\
resample = table("ablation_resample")
r = resample[(resample.metric == "accuracy") & (resample.layer == L) & (resample["head"] == H)].iloc[0]
print(f"L{L}.H{H}: zero {top.delta:.3f} [{top.ci_lo:.3f}, {top.ci_hi:.3f}]  resample {r.delta:.3f} [{r.ci_lo:.3f}, {r.ci_hi:.3f}]")
FIGURES["ablation"](resample)'''),
    new_markdown_cell("""\
## 3. Activation patching with nnsight
Counterfactual pairs come from the task's own generator: the same filler words, only the second trigger moved.
First one patch by hand with nnsight -- the head's z from the counterfactual run written into the clean run --
then the batched sweep over every head, which must give the same number."""),
    new_code_cell('''\
from synthetic_tasks.counterfactual import counterfactual_pairs

pairs = counterfactual_pairs(ds.spec, ds.trigger_ids, 64, seed=0)
print("clean:         ", ds.decode(pairs.clean_x[0]), "-> distance", pairs.clean_y[0])
print("counterfactual:", ds.decode(pairs.cf_x[0]), "-> distance", pairs.cf_y[0])'''),
    new_code_cell('''\
import copy

from nnsight import NNsight

wrapped = NNsight(copy.deepcopy(model))  # wrapping instruments a module for good: wrap a copy
clean, cf = torch.as_tensor(pairs.clean_x), torch.as_tensor(pairs.cf_x)
with torch.no_grad():
    with wrapped.trace(cf):
        z_cf = wrapped.blocks[L].attn.hook_z.output.save()
        logits_cf = wrapped.output.save()
    with wrapped.trace(clean):
        logits_clean = wrapped.output.save()
    with wrapped.trace(clean):
        z = wrapped.blocks[L].attn.hook_z.output
        z[:, :, H] = z_cf[:, :, H]  # patch head H at every position
        logits_patched = wrapped.output.save()
rows = torch.arange(len(pairs))
ld = lambda lg: (lg[rows, pairs.cf_y] - lg[rows, pairs.clean_y]).double()  # logit difference
by_hand = float((ld(logits_patched) - ld(logits_clean)).mean() / (ld(logits_cf) - ld(logits_clean)).mean())

from workbench.analysis import patching

sweep = patching.compute(model, ds, n_pairs=64, n_boot=200, seed=0)
cell = sweep[(sweep.site == "head") & (sweep.layer == L) & (sweep["head"] == H) & (sweep.positions == "all")].iloc[0]
print(f"patching effect of L{L}.H{H}: by hand {by_hand:.4f}, sweep {cell.effect:.4f} [{cell.ci_lo:.3f}, {cell.ci_hi:.3f}]")
assert abs(by_hand - cell.effect) < 1e-3'''),
    new_code_cell('''\
patch = table("patching")
FIGURES["patching"](patch)'''),
    new_markdown_cell("## 4. Probes\nWhere does position become linearly decodable, and which heads' z tell the label? "
                      "Controls: the same probe on shuffled labels; for position also the length alone."),
    new_code_cell('''\
probes = table("probes")
print(probes[probes.probe == "position"][["layer", "score", "score_lo", "score_hi", "control", "baseline"]].round(3))
FIGURES["probes"](probes)'''),
    new_markdown_cell("## 5. Trigger attention and direct logit attribution"),
    new_code_cell('''FIGURES["trigger_attention"](table("trigger_attention"))'''),
    new_code_cell('''FIGURES["dla"](table("dla"))'''),
    new_markdown_cell("## 6. The head summary\nA deposit head needs at least two methods to agree (thresholds are "
                      "parameters); the paper's ablation-only verdict is kept beside it."),
    new_code_cell('''\
summary = ANALYSES["head_summary"](run)  # joins the tables stored above
print(summary[summary.deposit_head | summary.paper_deposit][["layer", "head", "methods", "paper_deposit"]])
FIGURES["head_summary"](summary)'''),
    new_code_cell('''FIGURES["head_card"](summary, layer=L, head=H)'''),
]


def write(name: str, cells: list) -> Path:
    nb = new_notebook(cells=cells, metadata={
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"}})
    path = HERE / name
    nbformat.write(nb, path)
    return path


if __name__ == "__main__":
    for name, cells in (("00_findings.ipynb", NB0), ("01_head_ablation.ipynb", NB1),
                        ("02_partial_rope_mla.ipynb", NB2), ("03_patching_and_probes.ipynb", NB3)):
        print("wrote", write(name, cells))
