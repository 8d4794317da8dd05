"""Analyses: one module per analysis, each with a pure `compute(model, data, **params) -> DataFrame`; its
`run(run, **params)` loads the run's model and dataset, computes, stores the table with `run.save_table(name, df)`
and returns it (`common.stored`; ablation, deposit, attribution and head_summary have their own). Table schemas:
docs/analyses.md.

    from workbench.analysis import ANALYSES, NotApplicable
    df = ANALYSES["ablation"](run, n_boot=1000)

An analysis a run cannot support raises `NotApplicable` with a message naming what would work.
"""
import functools
import inspect
import json

from . import (ablation, angles, attribution, deposit, distance_bias, dla, edges, experiments, extrapolation,
               head_summary, patching, probes, qk_means, qkv, self_repair, spectral, trigger_attention)
from .common import NotApplicable, stored
from .ablation import aggregate_seeds
from .deposit import deposit_sentence
from .distance_bias import rope_expected_score
from .experiments import EXPERIMENTS
from .spectral import hadamard_check

def recording(fn, compute=None):
    """`fn(run, **params)` whose stored table records the parameters it ran with, defaults included (seed, n_boot,
    mode, ...; those `fn` passes on to `compute` with theirs), in its provenance (`store.run.table_parameters`): a
    table says what made its numbers."""
    from workbench.store.run import table_parameters

    sig = inspect.signature(fn)
    later = {k: p.default for k, p in (inspect.signature(compute).parameters.items() if compute else [])
             if p.default is not inspect.Parameter.empty}

    @functools.wraps(fn)
    def run(run, **params):
        bound = sig.bind(run, **params)
        bound.apply_defaults()
        used = dict(later)
        for k, v in list(bound.arguments.items())[1:]:
            used.update(v if sig.parameters[k].kind is inspect.Parameter.VAR_KEYWORD else {k: v})
        used = {k: v for k, v in used.items() if _plain(v)}
        with table_parameters(used):
            return fn(run, **params)
    return run


def _plain(value) -> bool:
    try:
        json.dumps(value)
        return True
    except (TypeError, ValueError):
        return False


# name -> run(run, **params) -> DataFrame; the table is stored under the same name
# (ablation in mean mode is stored as `ablation_mean`). head_summary joins the per-head tables stored before it;
# attribution checks itself against the patching table stored before it. Each records its parameters (`recording`).
_RUN = {
    "ablation": ablation.run,
    "deposit": deposit.run,
    "qk_means": stored("qk_means", qk_means.compute),
    "angles": stored("angles", angles.compute),
    "spectral": stored("spectral", spectral.compute),
    "distance_bias": stored("distance_bias", distance_bias.compute),
    "extrapolation": stored("extrapolation", extrapolation.compute),
    "ablation_resample": ablation.run_resample,
    "patching": stored("patching", patching.compute),
    "attribution": attribution.run,
    "edges": stored("edges", edges.compute),
    "qkv": stored("qkv", qkv.compute),
    "probes": stored("probes", probes.compute),
    "trigger_attention": stored("trigger_attention", trigger_attention.compute),
    "dla": stored("dla", dla.compute),
    "self_repair": stored("self_repair", self_repair.compute),
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

ANALYSES = {name: recording(fn, COMPUTE[name] if name not in ("deposit", "head_summary") else None)
            for name, fn in _RUN.items()}

# name -> summary(table) -> str: one line about a table, for `workbench analyze`'s console: each analysis module's
# `summary`; the deposit's is its sentence (which `analyze` qualifies by how the run is read)
SUMMARIES = {name: globals()[name].summary for name in _RUN if name not in ("deposit", "ablation_resample")} | {
    "deposit": deposit_sentence, "ablation_resample": lambda df: ablation.summary(df) + " [resample]"}

# tables that need no run at all
STANDALONE = {"hadamard_check": hadamard_check, "rope_expected_score": rope_expected_score}

__all__ = ["ANALYSES", "COMPUTE", "EXPERIMENTS", "STANDALONE", "SUMMARIES", "NotApplicable", "aggregate_seeds",
           "deposit_sentence", "hadamard_check", "rope_expected_score"]
