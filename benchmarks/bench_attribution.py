"""Attribution patching (AtP) vs activation patching, side by side in one process on the same run and pairs.

    patching     workbench.analysis.patching, batched nnsight path: a patched copy of the upper layers per site
    attribution  workbench.analysis.attribution: one counterfactual forward, one clean forward and backward per
                 batch, every site from the gradient

Both compute their whole table (every head and every layer's stream at all, trigger and non-trigger positions)
with the same pairs, bootstrap and seed. Prints wall and process-CPU times and their ratio (attribution timed before
and after patching, the better kept), then how well the screen ranks what patching measures: per position set, the
rank correlation over heads, the estimates inside patching's interval, how many of patching's top-k heads the
estimate's top k finds, and the largest misses (|estimate - patched effect|). With `--ig-steps M` also AtP-IG
(the gradient integrated along the inputs' path, M points) against the same patching table, and with `--edges`
EAP and EAP-IG against the real path patches of the union of each one's 20 largest edges. With `--grad-drop`, AtP
with GradDrop scores (Kramár et al. 2024) against the same patching table, by magnitude.

    .venv/bin/python benchmarks/bench_attribution.py RUN_ID [--root runs] [--pairs 256] [--threads 1] \
        [--ig-steps M [--edges]] [--grad-drop] [--json OUT]

The run needs its weights: a run of your store, or a shipped one re-created into it (`workbench recreate RUN_ID`).
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from timing import SideBySide, open_run, provenance, run_arguments, write_json  # noqa: E402  (on sys.path)
from workbench.analysis import attribution, edges, patching  # noqa: E402


def agreement(checked, top: int = 5) -> list[dict]:
    """Per position set: rank correlation, estimates inside patching's interval, top-k overlap, largest miss."""
    out = []
    for pos, sub in checked[checked["site"] == "head"].groupby("positions", sort=False):
        miss = (sub["effect"] - sub["patching_effect"]).abs()
        k = min(top, len(sub))
        atp_top = set(sub.nlargest(k, "effect")[["layer", "head"]].itertuples(index=False))
        real_top = set(sub.nlargest(k, "patching_effect")[["layer", "head"]].itertuples(index=False))
        worst = sub.loc[miss.idxmax()] if miss.notna().any() else None
        out.append({"positions": pos, "rank_corr": float(sub["rank_corr"].iloc[0]),
                    "inside_ci": int(sub["in_patching_ci"].sum()), "heads": int(len(sub)),
                    "top_found": len(atp_top & real_top), "k": k,
                    "max_miss": float(miss.max()), "max_miss_head": None if worst is None else
                    f"L{int(worst.layer)}.H{int(worst['head'])} (AtP {worst.effect:.3f}, patching "
                    f"{worst.patching_effect:.3f})"})
    return out


def edge_agreement(est: np.ndarray, path: dict) -> dict:
    """One edge estimate's [k] agreement with the path patches `path` (`patching.normalised` of the same k edges)."""
    inside = attribution.inside(pd.Series(est), pd.Series(path["ci_lo"]), pd.Series(path["ci_hi"]))
    return {"rank_corr": attribution._spearman(est, path["effect"]), "inside_ci": int(inside.sum()),
            "max_miss": float(np.nanmax(np.abs(est - path["effect"])))}


def integrated(bench, model, data, real, kw, args) -> dict:
    """AtP-IG against patching (and, with --edges, EAP and EAP-IG against path patches), timed and printed."""
    steps = args.ig_steps
    atp_ig = bench.measure(f"AtP-IG ({steps} steps)", lambda: attribution.compute(model, data, ig_steps=steps, **kw))
    rows = agreement(attribution.check_against(atp_ig, real))
    print(f"AtP-IG: completeness {atp_ig['completeness'].iloc[0]:.3f}")
    for r in rows:
        print(f"{r['positions']:12s} rank correlation {r['rank_corr']:+.3f}; {r['inside_ci']} of {r['heads']} "
              f"inside patching's interval; top {r['k']}: {r['top_found']} found; largest miss {r['max_miss']:.3f} "
              f"at {r['max_miss_head']}")
    stream = atp_ig[(atp_ig["site"] == "resid") & (atp_ig["positions"] == "all")].sort_values("layer")
    out = {"steps": steps, "completeness": float(atp_ig["completeness"].iloc[0]), "agreement": rows,
           "stream_all": [float(v) for v in stream["effect"]]}
    print("stream (all positions), AtP-IG by layer: " + ", ".join(f"{v:.3f}" for v in out["stream_all"]))
    if args.edges:
        pairs = patching.pairs_for(data, args.pairs, 0)
        order = edges.edge_list(model.cfg.n_layers, model.cfg.n_heads)
        eap = bench.measure("EAP", lambda: edges.per_pair(model, pairs))
        eap_ig = bench.measure(f"EAP-IG ({steps})", lambda: edges.per_pair(model, pairs, ig_steps=steps))
        norm = {name: patching.normalised(r["edges"].T, r, n_boot=args.n_boot, seed=0)["effect"]
                for name, r in (("eap", eap), ("eap_ig", eap_ig))}
        top = sorted(set(attribution.largest(pd.Series(norm["eap"]), 20))
                     | set(attribution.largest(pd.Series(norm["eap_ig"]), 20)))
        path_ld = bench.measure("path patches", lambda: edges.path_per_pair(model, pairs, [order[i] for i in top]))
        path = patching.normalised(path_ld.T, eap, n_boot=args.n_boot, seed=0)
        out["edges"] = {"checked": len(top), **{name: edge_agreement(norm[name][top], path) for name in norm}}
        for name in norm:
            e = out["edges"][name]
            print(f"{name:7s} against {len(top)} path patches: Spearman {e['rank_corr']:+.3f}, {e['inside_ci']} "
                  f"inside, largest miss {e['max_miss']:.3f}")
    return out


def grad_drop(bench, model, data, real, kw, top: int = 5) -> list[dict]:
    """GradDrop against plain AtP as a screen for patching, by magnitude (GradDrop has no sign): per position set,
    Spearman of |AtP| and of GradDrop with |patched effect| over heads, and how many of patching's top-k heads (by
    |effect|) each one's top k finds."""
    gd = bench.measure("AtP + GradDrop", lambda: attribution.compute(model, data, grad_drop=True, **kw))
    checked = attribution.check_against(gd, real)
    out = []
    for pos, sub in checked[checked["site"] == "head"].groupby("positions", sort=False):
        real_abs, k = sub["patching_effect"].abs(), min(top, len(sub))
        want = set(real_abs.nlargest(k).index)
        row = {"positions": pos, "k": k}
        for name, score in (("atp", sub["effect"].abs()), ("grad_drop", sub["grad_drop"])):
            row[f"{name}_spearman"] = attribution._spearman(score.to_numpy(), real_abs.to_numpy())
            row[f"{name}_top_found"] = len(set(score.nlargest(k).index) & want)
        out.append(row)
        print(f"{pos:12s} |estimate| vs |patching| over heads: Spearman AtP {row['atp_spearman']:+.3f}, GradDrop "
              f"{row['grad_drop_spearman']:+.3f}; patching's top {k} found: AtP {row['atp_top_found']}, GradDrop "
              f"{row['grad_drop_top_found']}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    run_arguments(ap)
    ap.add_argument("--ig-steps", type=int, default=0, help="also AtP-IG with this many steps (and, with --edges, "
                    "EAP-IG), each against the same real patches")
    ap.add_argument("--edges", action="store_true", help="with --ig-steps: EAP and EAP-IG against the real path "
                    "patches of the union of each one's 20 largest edges")
    ap.add_argument("--grad-drop", action="store_true", help="also AtP with GradDrop scores, against the same "
                    "patching table by magnitude")
    args = ap.parse_args()
    run, model, data = open_run(args)
    bench = SideBySide(width=18)
    kw = dict(n_pairs=args.pairs, n_boot=args.n_boot, seed=0)
    bench.measure("attribution", lambda: attribution.compute(model, data, **kw))
    real = bench.measure("patching", lambda: patching.compute(model, data, **kw))
    atp = bench.measure("attribution again", lambda: attribution.compute(model, data, **kw))
    bench.ratio("patching", "attribution", "attribution again")
    checked = attribution.check_against(atp, real)
    if checked["check"].iloc[0]:
        print("not compared:", checked["check"].iloc[0])
    rows = agreement(checked)
    for r in rows:
        print(f"{r['positions']:12s} rank correlation {r['rank_corr']:+.3f}; {r['inside_ci']} of {r['heads']} "
              f"estimates inside patching's 95 % interval; top {r['k']} heads: {r['top_found']} "
              f"found; largest miss {r['max_miss']:.3f} at {r['max_miss_head']}")
    stream = checked[(checked["site"] == "resid") & (checked["positions"] == "all")].sort_values("layer")
    print("stream (all positions), AtP / patching by layer: " + ", ".join(
        f"{int(r.layer)}: {r.effect:.3f} / {r.patching_effect:.3f}" for r in stream.itertuples()))
    ig = integrated(bench, model, data, real, kw, args) if args.ig_steps else None
    gd = grad_drop(bench, model, data, real, kw) if args.grad_drop else None
    if args.json:
        out = {**provenance(run, args, bench, "patching", "attribution", "attribution again"), "agreement": rows,
               "stream_all": [{"layer": int(r.layer), "atp": float(r.effect), "patching": float(r.patching_effect)}
                              for r in stream.itertuples()], "ig": ig, "grad_drop": gd}
        write_json(args.json, out)


if __name__ == "__main__":
    main()
