"""Analyses: one module per analysis, each with a pure `compute(model, data, **params) -> DataFrame` and a
thin `run(run, **params)` that loads the run's model and dataset, computes, stores the table with
`run.save_table(name, df)` and returns it. Table schemas: docs/analyses.md.

    from workbench.analysis import ANALYSES, NotApplicable
    df = ANALYSES["ablation"](run, n_boot=1000)

An analysis a run cannot support raises `NotApplicable` with a message naming what would work.
"""
import functools

from . import (ablation, angles, attribution, deposit, distance_bias, dla, edges, experiments, extrapolation,
               head_summary, patching, probes, qk_means, qkv, self_repair, spectral, trigger_attention)
from ._common import NotApplicable
from .ablation import aggregate_seeds
from .deposit import deposit_sentence
from .distance_bias import rope_expected_score
from .experiments import EXPERIMENTS
from .spectral import hadamard_check

# name -> run(run, **params) -> DataFrame; the table is stored under the same name
# (ablation in mean mode is stored as `ablation_mean`). head_summary joins the per-head tables stored before it;
# attribution checks itself against the patching table stored before it.
ANALYSES = {
    "ablation": ablation.run,
    "deposit": deposit.run,
    "qk_means": qk_means.run,
    "angles": angles.run,
    "spectral": spectral.run,
    "distance_bias": distance_bias.run,
    "extrapolation": extrapolation.run,
    "ablation_resample": ablation.run_resample,
    "patching": patching.run,
    "attribution": attribution.run,
    "edges": edges.run,
    "qkv": qkv.run,
    "probes": probes.run,
    "trigger_attention": trigger_attention.run,
    "dla": dla.run,
    "self_repair": self_repair.run,
    "head_summary": head_summary.run,
}

# name -> compute(model, data, **params) -> DataFrame (deposit: compute(ablation_table, **params);
# head_summary: compute({table name: DataFrame}, **params))
COMPUTE = {
    "ablation": ablation.compute,
    "deposit": deposit.compute,
    "qk_means": qk_means.compute,
    "angles": angles.compute,
    "spectral": spectral.compute,
    "distance_bias": distance_bias.compute,
    "extrapolation": extrapolation.compute,
    "ablation_resample": functools.partial(ablation.compute, mode="resample"),
    "patching": patching.compute,
    "attribution": attribution.compute,
    "edges": edges.compute,
    "qkv": qkv.compute,
    "probes": probes.compute,
    "trigger_attention": trigger_attention.compute,
    "dla": dla.compute,
    "self_repair": self_repair.compute,
    "head_summary": head_summary.compute,
}

# tables that need no run at all
STANDALONE = {"hadamard_check": hadamard_check, "rope_expected_score": rope_expected_score}

__all__ = ["ANALYSES", "COMPUTE", "EXPERIMENTS", "STANDALONE", "NotApplicable", "aggregate_seeds",
           "deposit_sentence", "hadamard_check", "rope_expected_score"]
