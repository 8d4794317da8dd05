"""Write the tutorial notebooks from the cell sources below (`python notebooks/make_notebooks.py`).

Every notebook reads the shipped results by default (`results/repro`, or $PELAB_SHIPPED: configs, metrics and
analysis tables, no weights), so it runs without training. Notebooks 01-03 also have a train mode
(`PELAB_TRAIN=1`, or `TRAIN = True` in their parameter cell: train at PELAB_PRESET into PELAB_RUNS); their cells
that need a live model run in train mode or once a shipped run is re-created into PELAB_RUNS
(`workbench recreate RUN_ID`), and otherwise print that command. The notebooks are committed without outputs;
tests/test_notebooks.py executes them top to bottom with nbclient in both modes (shipped: on a small shipped
store built from smoke runs, also empty and with re-created runs; train: at PELAB_PRESET=smoke), so they never rot.
"""
from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent

PARAMS = '''\
# Parameters: two modes.
# * shipped (default): read the shipped results ($PELAB_SHIPPED, else results/repro of this checkout): each run's
#   config, metrics and analysis tables, no weights. Nothing is trained. Cells that need a live model run once
#   the run is re-created into your store RUNS (`workbench recreate RUN_ID --root RUNS`: deterministic
#   re-training, about 6 CPU-minutes a run at the repro preset); until then they print that command.
# * train (TRAIN = True, or PELAB_TRAIN=1): train (or reuse) the runs at PRESET in RUNS; missing tables are
#   computed from the models and stored with the runs.
# The test suite runs both: shipped mode on a small shipped store, train mode with PELAB_PRESET=smoke.
import os

TRAIN = os.environ.get("PELAB_TRAIN") == "1"
PRESET = os.environ.get("PELAB_PRESET", "cpu")   # train mode: smoke (seconds) | cpu (a minute a run) | repro | paper
RUNS = os.environ.get("PELAB_RUNS", "runs")      # your run store: trained runs and re-created shipped runs
THREADS = int(os.environ.get("PELAB_THREADS", "2"))
'''

DISCLAIMER = '''\
from IPython.display import Markdown

from workbench.train.presets import PRESETS, scale_disclaimer

if run and run.config.get("preset") in PRESETS:  # read this first: how the run's preset differs from the paper's setup
    display(Markdown(scale_disclaimer(run.config["preset"])))'''

HELPERS = '''\
import pandas as pd
import torch

from workbench.analysis import ANALYSES
from workbench.analysis.common import run_data
from workbench.analysis.claims import base_preset, run_table
from workbench.analysis.experiments import run_deposit
from workbench.figures import FIGURES
from workbench.store import RunStore, shipped_root

torch.set_num_threads(THREADS)
if TRAIN:
    from workbench.train.loop import train
    from workbench.train.presets import resolve_config

    store = own = RunStore(RUNS)
    print(f"train mode: preset {PRESET}, store {store.root}")
else:
    root = shipped_root()
    shipped = RunStore(root, readonly=True) if root is not None and root.is_dir() else None
    own = RunStore(RUNS, readonly=True) if os.path.isdir(RUNS) else None  # only read: re-created runs' weights
    catalog = run_table(shipped) if shipped else run_table(runs=[])
    # the preset of the main tables (`repro`), as the Findings notebook: the scale ladder's rungs (repro-long,
    # repro-wide, ...) share its seeds and are compared in COMPARISON.md, never mixed in
    BASE = base_preset(catalog)
    print(f"shipped mode: {len(catalog)} shipped runs in {root}, {(catalog.preset == BASE).sum()} at the `{BASE}` "
          "preset (the ones this notebook reads)" if len(catalog) else
          f"shipped mode, but no run is shipped in {root}: open this notebook in a PE-Lab checkout (results/repro), "
          "set PELAB_SHIPPED to a results store, or set PELAB_TRAIN=1 to train the runs it needs")


def get_run(scheme, task="trigger-distance", tables=("ablation",), **scheme_kwargs):
    """Train mode: the finished run of this configuration at PRESET (trained now, or resumed, when missing).
    Shipped mode: the shipped run of this scheme, task and scheme_kwargs in PE-Lab's `paper` setting at the base
    preset BASE (`repro`) that holds `tables` (lowest training seed, then data seed); None, after saying so, when
    none is shipped."""
    if TRAIN:
        sets = [(f"model.scheme_kwargs.{k}", v) for k, v in scheme_kwargs.items()]
        cfg = resolve_config(preset=PRESET, scheme=scheme, task=task, sets=sets, store=store)
        return train(cfg, store, resume=True, progress=False)
    rows = catalog[(catalog.setting == "paper") & (catalog.preset == BASE) & (catalog.scheme == scheme)
                   & (catalog.task == task)]
    for rid in rows.sort_values(["seed", "data_seed", "run_id"], kind="stable").run_id:
        run = shipped.get(rid)
        if (run.config["model"].get("scheme_kwargs") or {}) == scheme_kwargs and set(tables) <= set(run.tables()):
            return run
    if len(catalog):  # (an empty store was reported above)
        what = f"{scheme} run" + (f" with {scheme_kwargs}" if scheme_kwargs else "")
        print(f"No {what} on {task} at the `{BASE}` preset with the tables {list(tables)} is shipped in {root} "
              "(COMPARISON.md there lists the pending grid points); PELAB_TRAIN=1 trains one at PELAB_PRESET.")
    return None


def live(run):
    """The run with its weights, for the cells that need a model: the run itself (trained here) or your re-created
    copy of the shipped run (same id, in RUNS); None, after saying what to run, when there is neither."""
    if run is None or run.has_weights:
        return run
    if own is not None and run.id in own.run_ids():
        mine = own.get(run.id)
        if mine.status == "finished" and mine.has_weights:
            return mine
    print(f"This cell needs the model of {run.id}, whose weights are not shipped: run "
          f"`workbench recreate {run.id} --root {os.path.abspath(RUNS)}` (re-trains it deterministically), "
          "then run this notebook again.")
    return None


def table(run, name, **params):
    """The run's stored analysis table; in train mode computed (and stored with the run) when missing."""
    return ANALYSES[name](run, **params) if TRAIN and not run.has_table(name) else run.load_table(name)


def deposit_of(run):
    """Per-layer deposit statistics of the run's zero-ablation (accuracy): the stored `deposit` table, else
    computed from its `ablation` table."""
    dep = run_deposit(run, compute_missing=TRAIN)
    return dep[dep.metric == "accuracy"]
'''

NB0 = [
    new_markdown_cell("""\
# Findings: the core paper re-run on CPU (no training needed)

This notebook reads the **shipped results** (`results/repro`: configs, provenance, metrics and every analysis
table of each run, no weights) and shows what the reproduction found: the paper's Table 1 next to PE-Lab's
numbers over seeds, each of the paper's claims with a verdict, and the seed-aggregated ablation atlas behind the
central claim. Nothing is trained. Notebooks 01-03 read the same shipped runs head by head, and look inside a
model once its run is re-created (`workbench recreate RUN_ID`, which re-trains it deterministically). The full
text is `results/repro/COMPARISON.md`. To re-check a shipped run yourself, `workbench verify RUN_ID` (or
`--sample 3`) re-trains it, compares every epoch's metrics and recomputes every table it was shipped with from the
re-trained weights (docs/reproduction.md)."""),
    new_code_cell('''\
# Parameters. The test suite runs this notebook with PELAB_SHIPPED=<a small shipped store>.
import os

import pandas as pd

from workbench.analysis import aggregate_seeds
from workbench.analysis.claims import base_preset, claims, run_table, table1
from workbench.analysis.experiments import convergence
from workbench.figures import FIGURES
from workbench.store import RunStore, shipped_root
from workbench.train.presets import scale_disclaimer

root = shipped_root()  # $PELAB_SHIPPED, else results/repro of this checkout
assert root is not None, "no shipped results: run from a PE-Lab checkout or set PELAB_SHIPPED"
store = RunStore(root, readonly=True)
every = run_table(store)
preset = base_preset(every)  # repro: the scale ladder's other presets are compared in COMPARISON.md, never mixed in
runs = every[every.preset == preset]
print(f"{len(every)} shipped runs in {root}, {len(runs)} at the `{preset}` preset")
runs.groupby(["setting", "task"]).variant.agg(lambda v: ", ".join(sorted(set(v))))'''),
    new_code_cell('''\
from IPython.display import Markdown

Markdown(scale_disclaimer(preset))  # read this first: how the preset differs from the paper's setup'''),
    new_markdown_cell("""\
## Table 1: the paper's test accuracy next to PE-Lab's (mean and the seeds' range)
The amber lines on the bars: the same cells trained at the paper's own scale on a GPU (below), dotted where a run of
them is still learning."""),
    new_code_cell('''\
from workbench.report.paper_scale import with_paper_scale_table1
from workbench.store import paper_root

t1 = table1(runs)
display(t1.drop(columns=["runs"]))
FIGURES["table1"](with_paper_scale_table1(t1, paper_root(root)))  # + the paper-scale means, where there are any'''),
    new_markdown_cell("""\
## Table 1 at the paper's own scale (GPU runs)
The runs trained at the `paper` preset (the paper's model and data with the authors' settings) on a lent GPU, kept
in `paper/` beside the shipped store (results/paper): each cell's mean with what its seeds can show, beside the
paper's number and the CPU mean above (`cpu_mean`). Fewer seeds than the CPU rows; a run still learning at its last
epoch cannot settle a claim. Below it, where each of those runs puts its largest single-head deposit
(the deposit map, from the head ablations run on the GPU)."""),
    new_code_cell('''\
from workbench.report.paper_scale import paper_scale_deposits, paper_scale_note, paper_scale_table1

print(paper_scale_note(paper_root(root), "results/paper"))
display(paper_scale_table1(t1, paper_root(root)).drop(columns=["runs"]))
paper_deposits = paper_scale_deposits(paper_root(root))  # where each paper-scale run's largest deposit falls
FIGURES["deposit_map"](paper_deposits) if len(paper_deposits) else print("no paper-scale run with a deposit table")'''),
    new_markdown_cell("""\
## The registered rules
Every verdict of the paper's claims follows a registered rule (docs/preregistration.md): the paper's own sentence,
the statistic, and the decision (a share of agreeing runs with its Wilson 95 % interval against 1/2, or a paired
ordering). The rules were registered on 2026-11-26, after the `repro` runs below were trained (for them a stricter
re-reading, not a prediction) and before the seed study trained any run; PE-Lab's own questions have no paper rule.
A rule changed later keeps its id and gets a higher version; what changed is listed under the table."""),
    new_code_cell('''\
from workbench.analysis.claims import load_registry, registration_changes

reg = load_registry()
with pd.option_context("display.max_colwidth", 120):
    display(pd.DataFrame(reg.claims)[["id", "version", "section", "quote", "decision", "agree"]])
print("What changed since the registration:", *registration_changes(), sep="\\n- ")'''),
    new_markdown_cell("## The paper's claims, one verdict per setting"),
    new_code_cell('''\
cl = claims(store, runs)
with pd.option_context("display.max_colwidth", 200):
    display(cl[["claim", "claim_id", "setting", "verdict", "rests_on", "evidence"]])'''),
    new_markdown_cell("""\
## The seed study of the headline claims
RoPE and MLA on Task 1 at `repro-long`, 10 training seeds x 2 data seeds each (grids/study.toml): where the
largest single-head deposit falls, run by run, and the registered readouts. The scale ladder's runs at that
preset ("ladder seeds", trained before the registration) are shown beside the study, never pooled into it. First,
what differs from the paper's setup:"""),
    new_code_cell('''\
from workbench.analysis.claims import study_readouts, study_table
from workbench.figures.study import study_map
from workbench.report.study import preset_difference, study_differs

print(f"Not the paper's setup: {preset_difference('repro-long')}.", study_differs())
st = study_table(store, every)
display(study_readouts(st))
study_map(st)'''),
    new_markdown_cell("""\
Tier 2: NoPE vs RoPE on Task 2 at `repro-paperdata-long` (`[study.tier2]`), paired by training x data seed and
judged by the ordering rule of `nope-beats-rope-t2` (its status checks first)."""),
    new_code_cell('''\
from workbench.analysis.claims import tier2_pairs, tier2_readouts

print(f"Not the paper's setup: {preset_difference('repro-paperdata-long', task='trigger-count')}.")
display(tier2_readouts(every))
tier2_pairs(every)'''),
    new_markdown_cell("""\
The share tiers, each read by the rule of `nope-no-generalise-t1`, version 3 (a settled run agrees only when it
clearly did not learn: the Wilson upper bound of its test accuracy below the bar; it disagrees when it learned, and is
not counted in between) against tier 1's RoPE runs, one decision a scheme: tier 3, NoPE and Relative on Task 1 at
`repro-long` (`[study.tier3]`; NoPE's half cannot come out otherwise: without position the `paper` arch is
permutation-invariant, so it checks the instrument); tier 4, Relative's same seeds at `repro-xlong`, 24 epochs
(`[study.tier4]`), beside tier 3's runs of those seeds, never pooled."""),
    new_code_cell('''\
from workbench.analysis.claims import share_tiers, tier_readouts, tier_runs

for tier in share_tiers():
    print(f"Tier {tier}:")
    display(tier_readouts(every, tier))
tier_runs(every, 4)  # each tier-4 run beside tier 3's of the same seeds'''),
    new_markdown_cell("""\
## The central claim: RoPE's single-head deposit on Task 1
The zero-ablation atlas of the RoPE runs (PE-Lab `paper` architecture), averaged over every seed, counted or not:
mean delta per head with a Student-t interval over seeds. It shows the heads; it is not the verdict, which reads
only the seeds its rule counts (printed first; the seed study above is where the claim is tested)."""),
    new_code_cell('''\
row = cl[(cl.claim_id == "rope-deposit-first-layer") & (cl.setting == "paper")].iloc[0]
print(f"verdict: {row.verdict} (rests on {row.rests_on})")
ids = runs[(runs.setting == "paper") & (runs.variant == "rope") & (runs.task == "trigger-distance")].run_id
tables = [store.get(i).load_table("ablation") for i in ids if store.get(i).has_table("ablation")]
print(f"{len(tables)} RoPE Task 1 runs with an ablation table, averaged below")
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
time: the paper reports that with RoPE one head of a shallow layer carries almost everything (a **single-head
deposit**; PE-Lab's registered seed study at `repro-long` does not find it in the first layer: the Findings notebook
and COMPARISON.md). This notebook looks at one RoPE run, at a preset that is not the paper's setup (the box below
says how it differs):

1. a RoPE run on Task 1: by default a **shipped** run of the reproduction at its `repro` preset (nothing is
   trained); with `PELAB_TRAIN=1` one trained (or reused) at `PELAB_PRESET`,
2. its per-head queries and keys read twice -- with TransformerLens (`run_with_cache`) and with nnsight
   (`NNsight(model).trace`) -- checking that both see the same tensors (needs the model: train mode, or the
   shipped run re-created with `workbench recreate RUN_ID`),
3. its head-ablation sweep (`workbench.analysis`, stored with the run) and one cell of it checked by hand
   (needs the model),
4. the ablation atlas drawn with the shared figure builders (`workbench.figures`) and the deposit statistics.

Everything here is also in the dashboard (`workbench app`, page *Ablation atlas*) and in `workbench report`."""),
    new_code_cell(PARAMS),
    new_code_cell(HELPERS),
    new_markdown_cell("## 1. A RoPE run\nShipped mode: the shipped RoPE Task 1 run at the `repro` preset (PE-Lab "
                      "`paper` setting, lowest seed) with an ablation table. Train mode: `get_run` trains only when "
                      "the store does not hold this configuration yet. Then, before its results, how the run's "
                      "preset differs from the paper's setup."),
    new_code_cell('''\
run = get_run("rope", "trigger-distance", tables=["ablation"])
if run:
    print(run.id, run.status, "preset", run.config.get("preset"))'''),
    new_code_cell(DISCLAIMER),
    new_code_cell('''\
if run:
    print({k: round(v, 4) for k, v in run.final.items() if isinstance(v, float)})
    display(run.metrics()[["epoch", "train_loss", "train_acc", "test_loss", "test_acc"]])'''),
    new_markdown_cell("""\
## 2. Queries and keys, two ways (needs the model)
`hook_q` / `hook_k` are the per-head projections *before* the rotary transform, `[batch, pos, head, d_head]`.
TransformerLens caches them with `run_with_cache`; nnsight reads the same hook points inside a trace (in
nnsight 0.8 modules are accessed in execution order: layer by layer, `hook_q` before `hook_k`)."""),
    new_code_cell('''\
model_run = live(run)  # the run with weights: trained here, or your re-created copy of the shipped run
if model_run:
    model, ds = model_run.load_model(), run_data(model_run)  # the test split as the analyses count it
    print("example:", ds.decode(ds.test_x[0]), "-> label (distance)", int(ds.test_y[0]))
    tokens = torch.as_tensor(ds.test_x[:64])
    L = model.cfg.n_layers
    names = [f"blocks.{l}.attn.hook_{w}" for l in range(L) for w in ("q", "k")]
    logits_tl, cache = model.run_with_cache(tokens, names_filter=lambda n: n in names)
    q_tl = torch.stack([cache[f"blocks.{l}.attn.hook_q"] for l in range(L)])
    k_tl = torch.stack([cache[f"blocks.{l}.attn.hook_k"] for l in range(L)])
    print("TransformerLens q:", tuple(q_tl.shape), "(layer, batch, pos, head, d_head)")'''),
    new_code_cell('''\
from nnsight import NNsight

if live(run):
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
`delta(l, h) = accuracy(clean) - accuracy(head h of layer l zeroed)` on the test split (or a seeded sample of
`n_examples` of it), with 95 % bootstrap intervals over test examples. The table is stored with the run
(`run.save_table`), so the dashboard and the reports read it without recomputing; shipped runs carry it."""),
    new_code_cell('''\
if run:
    ablation = table(run, "ablation")
    acc = ablation[ablation.metric == "accuracy"]
    top = acc.sort_values("delta", ascending=False).iloc[0]
    display(acc.sort_values("delta", ascending=False).head(8)[
        ["layer", "head", "clean", "ablated", "delta", "ci_lo", "ci_hi", "n_examples"]])'''),
    new_markdown_cell("A spot check of one cell of the table by hand (needs the model): zero the top head's `z` with "
                      "a hook, on the same test examples the sweep used."),
    new_code_cell('''\
from workbench.analysis.common import subsample

if run and live(run):
    l, h = int(top["layer"]), int(top["head"])

    def zero_head(z, hook):
        z = z.clone()
        z[:, :, h] = 0.0
        return z

    # the sweep's examples: the whole test split, or the seeded sample of n_examples (seed 0, as `workbench ship`)
    keep = subsample(len(ds.test_x), int(top["n_examples"]), seed=0)
    x, y = torch.as_tensor(ds.test_x[keep]), torch.as_tensor(ds.test_y[keep])
    with torch.no_grad():
        clean = (model(x).argmax(-1) == y).double().mean().item()
        ablated = (model.run_with_hooks(x, fwd_hooks=[(f"blocks.{l}.attn.hook_z", zero_head)]).argmax(-1) == y
                   ).double().mean().item()
    table_delta = float(top["delta"])
    print(f"L{l}.H{h}: clean {clean:.4f}, ablated {ablated:.4f}, delta {clean - ablated:.4f} "
          f"(table: {table_delta:.4f})")
    assert abs((clean - ablated) - table_delta) < 1e-6'''),
    new_markdown_cell("## 4. The atlas and the deposit statistics"),
    new_code_cell('''\
if run:
    display(FIGURES["ablation"](ablation, metric="accuracy"))
    display(FIGURES["ablation_layers"](ablation, metric="accuracy"))'''),
    new_markdown_cell("Per layer: the concentration C_l, the top head against the second (paired bootstrap interval "
                      "of the gap) and the verdict: single-head deposit, average deposit or none (the stored `deposit` "
                      "table, else `deposit.compute` on the ablation table)."),
    new_code_cell('''\
from workbench.analysis import deposit
from workbench.analysis.claims import as_read, reading_of

if run:  # the sentence as the run's status lets it be read: "cannot tell" for a run that did not learn
    stats = deposit_of(run)
    print(as_read(deposit.deposit_sentence(stats), reading_of(run)))
    display(FIGURES["deposit"](stats))
    display(stats[["layer", "pattern", "concentration", "top_head", "top_delta", "top_lo", "top_hi", "gap", "gap_lo",
                   "gap_hi"]])'''),
]

NB2 = [
    new_markdown_cell("""\
# Partial RoPE and MLA

Section 5 of the core paper moves the deposit around by restricting RoPE: **partial RoPE** puts RoPE on the first
k heads of a layer (NoPE on the rest), and **MLA** (DeepSeek-V3 latent attention) keeps a decoupled rotary part:
a rotary query per head and one rotary key shared by all heads. This notebook compares NoPE, full RoPE, partial
RoPE and MLA on the trigger-distance task: accuracy and where the ablation deposit sits.

By default it reads the **shipped** runs of the reproduction (`grids/repro.toml`; nothing is trained): NoPE,
RoPE and MLA are tier 1, the partial-RoPE runs tier 2 (the notebook lists any grid point not shipped).
With `PELAB_TRAIN=1` it trains (or loads) a small family at `PELAB_PRESET` instead -- NoPE, full RoPE, RoPE on
one head of layer 0 only, RoPE on the first k heads of every layer, MLA -- and ablates every head of each.

All tables come from `workbench.analysis`, all figures from `workbench.figures`; the dashboard's *Partial RoPE*
page shows the same experiment."""),
    new_code_cell(PARAMS),
    new_code_cell(HELPERS),
    new_code_cell('''\
from IPython.display import Markdown

from workbench.train.presets import PRESETS, scale_disclaimer

runs_preset = PRESET if TRAIN else BASE if len(catalog) else None  # the preset of every run below
if runs_preset in PRESETS:  # read this first: how that preset differs from the paper's setup
    display(Markdown(scale_disclaimer(runs_preset)))'''),
    new_markdown_cell("## The runs\nShipped mode: every shipped NoPE / RoPE / MLA run on Task 1 in PE-Lab's `paper` "
                      "setting at the `repro` preset with an ablation table (the base preset of the Findings "
                      "notebook; the runs of the scale ladder's other presets and of the seed study at `repro-long` "
                      "are counted below, not shown: the Findings notebook and COMPARISON.md compare them), and the "
                      "grid points not shipped yet."),
    new_code_cell('''\
if TRAIN:
    H = resolve_config(preset=PRESET, scheme="rope", store=store)["model"]["n_heads"]
    family = {
        "nope": get_run("nope"),
        "rope (all heads)": get_run("rope"),
        "rope: 1 head, layer 0": get_run("rope", rope_heads=1, rope_layers=[0]),
        f"rope: {H // 2} heads, every layer": get_run("rope", rope_heads=H // 2),
        "mla": get_run("mla"),
    }
else:
    every = catalog[(catalog.setting == "paper") & (catalog.task == "trigger-distance")
                    & catalog.scheme.isin(["nope", "rope", "mla"])]
    rows = every[every.preset == BASE]  # one preset: the ladder's rungs share seeds and are never mixed in
    family = {}
    for r in rows.itertuples():
        run = shipped.get(r.run_id)
        kw = run.config["model"].get("scheme_kwargs") or {}
        if run.has_table("ablation"):
            label = f"{r.scheme} {kw}" if kw and r.variant == r.scheme else r.variant  # untagged partial RoPE
            family[f"{label}, seed {r.seed}, data seed {r.data_seed}"] = run
    other = every[every.preset != BASE].preset.value_counts()
    print(f"{len(family)} runs at the `{BASE}` preset with an ablation table; not shown: "
          + (", ".join(f"{n} at `{p}`" for p, n in sorted(other.items())) or "no run at another preset"))
    from pathlib import Path

    import workbench
    from workbench.report.comparison import pending_points

    grid = Path(workbench.__file__).resolve().parents[1] / "grids" / "repro.toml"
    if shipped and grid.is_file():
        print("not shipped yet (grids/repro.toml; partial RoPE is tier 2):")
        print("\\n".join(pending_points(shipped, grid)) or "nothing: every grid point is shipped")
pd.DataFrame([{"variant": k, "run": r.id, "status": r.status, "test_acc": r.final.get("test_acc")}
              for k, r in family.items()], columns=["variant", "run", "status", "test_acc"])'''),
    new_markdown_cell("## Where each run's deposit sits\nFrom the run's stored deposit / ablation tables (train mode: "
                      "the ablation sweep is run and stored first when missing)."),
    new_code_cell('''\
from workbench.analysis import deposit
from workbench.analysis.claims import as_read, reading_of

for name, r in family.items():  # each read by its run's status ("cannot tell" for a run that did not learn)
    print(f"{name:40s} {as_read(deposit.deposit_sentence(deposit_of(r)), reading_of(r))}")'''),
    new_markdown_cell("## The partial-RoPE experiment table and its figure\n"
                      "One row per RoPE run: k heads with RoPE, the RoPE layer (-1: every layer), accuracy and the "
                      "deepest layer with a deposit."),
    new_code_cell('''\
from workbench.analysis import EXPERIMENTS

runs = list(family.values())
partial = EXPERIMENTS["partial_rope"](runs=runs, compute_missing=TRAIN)
if len(partial):
    display(partial[["run_id", "variant", "k", "layer", "test_acc", "deepest_deposit_layer", "n_single_deposits",
                   "deposit"]])
    display(FIGURES["partial_rope"](partial))
    if not (partial.variant == "partial").any():
        print("no partial-RoPE run yet: only full RoPE is shown (train them, or see the grid points listed above)")
else:
    print("no RoPE run to show")'''),
    new_markdown_cell("## MLA vs RoPE vs NoPE (the paper's Table 1 next to ours)"),
    new_code_cell('''\
mla = EXPERIMENTS["mla_rope_nope"](runs=runs, compute_missing=TRAIN)
if len(mla):
    display(mla[["scheme", "task", "test_acc", "paper_test_acc", "n_single_deposits", "max_concentration",
                 "deposit"]])
    display(FIGURES["mla_rope_nope"](mla))
    missing = {"mla", "rope", "nope"} - set(mla.scheme)
    if missing:
        print(f"not shipped yet: {', '.join(sorted(missing))}")
else:
    print("no MLA, RoPE or NoPE run to show")'''),
    new_markdown_cell("## MLA against RoPE, head by head\nThe first full-RoPE run and the first MLA run of the list "
                      "above."),
    new_code_cell('''\
shown = set()
for name, r in family.items():
    scheme = r.config["model"]["scheme"]
    if scheme in ("rope", "mla") and scheme not in shown and not r.config["model"].get("scheme_kwargs"):
        shown.add(scheme)
        display(FIGURES["ablation"](r.load_table("ablation"), metric="accuracy").update_layout(title=name))'''),
]

NB3 = [
    new_markdown_cell("""\
# Does the deposit head carry the distance? Patching and probes

The core paper calls a head a *deposit* when zeroing it alone costs accuracy. Zero-ablation shows a head is
**needed**, not what it **carries**: zeros are off-distribution, and a head the rest of the network merely leans on
looks just as important. This walk-through triangulates one head of a RoPE run on Task 1 with the other methods
of docs/paper.md §5:

1. the paper's view: zero-ablation and the deposit test;
2. resample ablation (z from a same-length test example: on-distribution);
3. activation patching with counterfactual pairs (the second trigger moved, d -> d'), one patch written with
   **nnsight** by hand (needs the model), and its gradient estimate, attribution patching, checked against it,
   split by the later component that reads the head (edge attribution);
4. linear probes with **scikit-learn** (position from the stream, the label from each head's z), with controls;
5. trigger attention, direct logit attribution and self-repair;
6. the head summary: a "deposit head" verdict that needs two methods to agree.

By default the run is a **shipped** one (its stored tables; nothing is trained; the hand-written patch needs
the model: re-create the run with `workbench recreate RUN_ID`). `PELAB_RUN_ID` picks a run (shipped, or of your
store in train mode); with `PELAB_TRAIN=1` a RoPE run is trained (or reused) at `PELAB_PRESET` and its missing
tables are computed."""),
    new_code_cell(PARAMS + '''\
RUN_ID = os.environ.get("PELAB_RUN_ID")  # a shipped run (train mode: a run of RUNS); None = a RoPE Task 1 run
'''),
    new_code_cell(HELPERS),
    new_code_cell('''\
HEAD_TABLES = ["ablation", "ablation_resample", "patching", "probes", "trigger_attention", "dla", "head_summary"]
if RUN_ID and TRAIN:
    run = store.get(RUN_ID)  # its missing tables are computed below
elif RUN_ID and shipped:
    run = shipped.get(RUN_ID)
    mine = own.get(RUN_ID) if own is not None and RUN_ID in own.run_ids() else None
    if not set(HEAD_TABLES) <= set(run.tables()) and mine is not None and set(HEAD_TABLES) <= set(mine.tables()):
        run = mine  # your re-created copy, analysed in your store
    elif not set(HEAD_TABLES) <= set(run.tables()):
        missing = [t for t in HEAD_TABLES if t not in run.tables()]
        kind = catalog[catalog.run_id == RUN_ID][["setting", "variant", "task"]]  # its setting, variant and task
        rows = catalog[catalog.preset == BASE].merge(kind)
        have = [r for r in rows.run_id if set(HEAD_TABLES) <= set(shipped.get(r).tables())]
        print(f"{RUN_ID} is shipped without the tables {missing} that this notebook reads (it has "
              f"{sorted(run.tables())}). Shipped runs of its setting, variant and task at the `{BASE}` preset with "
              f"all of them: {', '.join(have) or 'none'}. Or make them in your store: `workbench recreate "
              f"{RUN_ID} --root {os.path.abspath(RUNS)}`, then `workbench analyze {RUN_ID} --root "
              f"{os.path.abspath(RUNS)} --what resample,patching,probes,trigger-attention,dla,head-summary`, and run "
              "this notebook again.")
        run = None
else:
    run = get_run("rope", "trigger-distance", tables=HEAD_TABLES)
if run:
    print(run.id, run.config["model"]["scheme"], run.config["task"]["task"], "preset", run.config.get("preset"))'''),
    new_code_cell(DISCLAIMER + '''
if run:
    print("test accuracy", run.final.get("test_acc"))'''),
    new_markdown_cell("## 1. The paper's view: zero-ablation and the deposit test"),
    new_code_cell('''\
from workbench.analysis import deposit
from workbench.analysis.claims import as_read, reading_of

if run:
    ablation = table(run, "ablation")
    stats = deposit_of(run)
    print(as_read(deposit.deposit_sentence(stats), reading_of(run)))
    acc = ablation[ablation.metric == "accuracy"]
    single = stats[stats.pattern == "single-head"]  # the paper's deposits: the top head of such a layer
    if len(single):  # the largest of them (the head summary's `paper_deposit` heads)
        best = single.sort_values(["top_delta", "layer"], ascending=[False, True], kind="stable").iloc[0]
        L, H = int(best["layer"]), int(best["top_head"])
        top = acc[(acc.layer == L) & (acc["head"] == H)].iloc[0]
        print(f"the head the paper would name: layer {L}, head {H}, the largest of its {len(single)} single-head "
              f"deposit(s) (zero-ablation delta {top.delta:.3f})")
    else:
        top = acc.sort_values(["delta", "layer", "head"], ascending=[False, True, True], kind="stable").iloc[0]
        L, H = int(top["layer"]), int(top["head"])
        print(f"no single-head deposit, so no head the paper would name; followed below: the largest zero-ablation "
              f"delta, layer {L}, head {H} ({top.delta:.3f})")'''),
    new_markdown_cell("## 2. Resample ablation\nThe head's z from another test example of the same length "
                      "(a seeded derangement within each length group), in the same batched sweep."),
    new_code_cell('''\
if run:
    resample = table(run, "ablation_resample")
    r = resample[(resample.metric == "accuracy") & (resample.layer == L) & (resample["head"] == H)].iloc[0]
    print(f"L{L}.H{H}: zero {top.delta:.3f} [{top.ci_lo:.3f}, {top.ci_hi:.3f}]  "
          f"resample {r.delta:.3f} [{r.ci_lo:.3f}, {r.ci_hi:.3f}]")
    display(FIGURES["ablation"](resample))'''),
    new_markdown_cell("""\
## 3. Activation patching with nnsight
Counterfactual pairs come from the task's own generator: the same filler words, only the second trigger moved.
First one patch by hand with nnsight -- the head's z from the counterfactual run written into the clean run --
then the batched sweep over every head, which must give the same number (both need the model)."""),
    new_code_cell('''\
from synthetic_tasks.counterfactual import counterfactual_pairs

model_run = live(run)  # the run with weights: trained here, or your re-created copy of the shipped run
if model_run:
    model, ds = model_run.load_model(), run_data(model_run)  # the test split as the analyses count it
    pairs = counterfactual_pairs(ds.spec, ds.trigger_ids, 64, seed=0)
    print("clean:         ", ds.decode(pairs.clean_x[0]), "-> distance", pairs.clean_y[0])
    print("counterfactual:", ds.decode(pairs.cf_x[0]), "-> distance", pairs.cf_y[0])'''),
    new_code_cell('''\
import copy

from nnsight import NNsight

from workbench.analysis import patching

if live(run):
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

    sweep = patching.compute(model, ds, n_pairs=64, n_boot=200, seed=0)
    cell = sweep[(sweep.site == "head") & (sweep.layer == L) & (sweep["head"] == H) & (sweep.positions == "all")
                 ].iloc[0]
    print(f"patching effect of L{L}.H{H}: by hand {by_hand:.4f}, sweep {cell.effect:.4f} "
          f"[{cell.ci_lo:.3f}, {cell.ci_hi:.3f}]")
    assert abs(by_hand - cell.effect) < 1e-3'''),
    new_markdown_cell("""\
### Attribution patching: every site from one backward pass
AtP (Nanda 2023; Kramár et al. 2024) estimates each site's patching effect from the clean run's gradient,
(z_cf − z_clean) · ∂LD/∂z summed over the site's positions: one forward and backward instead of a patched run per
site. It is exact where the path to the logits is linear and a first-order screen elsewhere, so it is checked
against the sweep above, on the same pairs."""),
    new_code_cell('''\
from workbench.analysis import attribution

if live(run):
    atp = attribution.check_against(attribution.compute(model, ds, n_pairs=64, n_boot=200, seed=0), sweep)
    est = atp[(atp.site == "head") & (atp.layer == L) & (atp["head"] == H) & (atp.positions == "all")].iloc[0]
    print(f"L{L}.H{H}: AtP estimate {est.effect:.4f}, patching {est.patching_effect:.4f}; rank correlation "
          f"over heads {est.rank_corr:+.2f}")
    display(FIGURES["attribution"](atp))'''),
    new_markdown_cell("""\
Who reads what the head writes? Edge attribution splits the head's estimate by the later component that reads it
(each later layer's attention and MLP, and the readout); the head's edges sum to its estimate above, and the
largest edges are path-patched for real (the head's difference added to that one reader's input)."""),
    new_code_cell('''\
from workbench.analysis import edges

if live(run):
    graph = edges.compute(model, ds, n_pairs=64, n_boot=200, seed=0)
    mine = graph[(graph.source == "head") & (graph.layer == L) & (graph["head"] == H)]
    print(f"L{L}.H{H}'s edges sum to {mine.effect.sum():.4f} (its AtP estimate: {est.effect:.4f})")
    print(mine[["target", "target_layer", "effect", "path_effect"]].round(4).to_string(index=False))
    display(FIGURES["edges"](graph))'''),
    new_markdown_cell("""\
Where does the head's effect enter: through where it looks (its queries and keys, which the positional encoding
rotates or biases) or through what it reads (its values)? `qkv` estimates each head's q, k and v patch; for
queries and keys AtP* (Kramár et al. 2024) recomputes the attention softmax exactly instead of its linear term, which
misses patches that move a saturated pattern. The largest rows are patched for real."""),
    new_code_cell('''\
from workbench.analysis import qkv

if live(run):
    entry = qkv.compute(model, ds, n_pairs=64, n_boot=200, seed=0)
    mine = entry[(entry.layer == L) & (entry["head"] == H) & (entry.positions == "all")]
    print(f"L{L}.H{H} by input (AtP*, AtP):", ", ".join(f"{r.site} {r.effect:+.4f}, {r.atp:+.4f}"
                                                        for r in mine.itertuples()))
    print(qkv.check_line(entry))
    display(FIGURES["qkv"](entry))'''),
    new_markdown_cell("The run's stored patching table (every head and every layer's stream; more pairs than above)."),
    new_code_cell('''\
if run:
    display(FIGURES["patching"](table(run, "patching")))'''),
    new_markdown_cell("## 4. Probes\nWhere does position become linearly decodable, and which heads' z tell the label? "
                      "Controls: the same probe on shuffled labels; for position also the length alone."),
    new_code_cell('''\
if run:
    probes = table(run, "probes")
    position = probes[probes.probe == "position"]
    print(position[["layer", "score", "score_lo", "score_hi", "control", "baseline"]].round(3))
    display(FIGURES["probes"](probes))'''),
    new_markdown_cell("""\
## 5. Trigger attention, direct logit attribution and self-repair

Direct logit attribution splits the logits into one term per component (the final LayerNorm's scale frozen). The
figure reads each head's term on the label minus its term on the runner-up class, the margin the prediction turns
on; tables made before 2026-11-28 have only the margin over the class mean, which on this task moves with whole
groups of neighbouring distances (docs/analyses.md, `dla`, "Which margin")."""),
    new_code_cell('''\
if run:
    display(FIGURES["trigger_attention"](table(run, "trigger_attention")))
    display(FIGURES["dla"](table(run, "dla")))'''),
    new_markdown_cell("""\
### Self-repair: does the rest of the model make up for the head?
Ablation measures a head's total effect, direct logit attribution its direct one. `self_repair` ablates each head
as the paper does (zero) and splits the gap between the two: how much later heads, MLPs and the final LayerNorm made
up (McGrath et al. 2023). A head whose direct effect is mostly made up looks small under ablation."""),
    new_code_cell('''\
from workbench.analysis import self_repair

if live(run):
    repair = self_repair.compute(model, ds, n_examples=300, n_boot=200, seed=0)
    r = repair[(repair.layer == L) & (repair["head"] == H)].iloc[0]
    print(f"L{L}.H{H}: direct {r.direct:+.3f}, total {r.total:+.3f} logits; made up by later heads "
          f"{r.via_heads:+.3f}, MLPs {r.via_mlps:+.3f}, the final LayerNorm {r.via_layernorm:+.3f} "
          f"(most: {r.top_component})")
    display(FIGURES["self_repair"](repair))'''),
    new_markdown_cell("## 6. The head summary\nA deposit head needs at least two methods to agree (thresholds are "
                      "parameters); the paper's ablation-only verdict is kept beside it. Train mode joins the tables "
                      "stored above; shipped runs carry the summary."),
    new_code_cell('''\
if run:
    summary = ANALYSES["head_summary"](run) if TRAIN else run.load_table("head_summary")
    print(summary[summary.deposit_head | summary.paper_deposit][["layer", "head", "methods", "paper_deposit"]])
    display(FIGURES["head_summary"](summary))
    display(FIGURES["head_card"](summary, layer=L, head=H))'''),
]


NOTEBOOKS = {"00_findings.ipynb": NB0, "01_head_ablation.ipynb": NB1, "02_partial_rope_mla.ipynb": NB2,
             "03_patching_and_probes.ipynb": NB3}


def write(name: str, cells: list, folder: Path = HERE) -> Path:
    """Write one notebook (no outputs; cell ids numbered, so an unchanged notebook is rewritten byte for byte)."""
    for i, cell in enumerate(cells):
        cell.id = f"cell-{i:02d}"
    nb = new_notebook(cells=cells, metadata={
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"}})
    path = Path(folder) / name
    nbformat.write(nb, path)
    return path


if __name__ == "__main__":
    for name, cells in NOTEBOOKS.items():
        print("wrote", write(name, cells))
