"""A run's *setting*: the one notion every page, figure, report section and notebook groups runs by.

    from workbench.analysis.settings import describe, setting_of, annotate
    s = describe(run.config)     # Setting(preset="repro", setting="paper", variant="rope", ...)
    s.key, s.label               # ("repro/paper/rope", "rope · PE-Lab `paper` arch · repro")
    df = annotate(store.query()) # + columns setting, setting_label, variant, group, group_label

A setting is (preset, setting, variant):
- `setting` is the authors' named fidelity (`authors`, `authors-mla`: docs/fidelity.md) when the run uses one,
  else its architecture (`paper`, `encoder`, `decoder`); `SETTINGS` maps it to a label, in table order;
- `variant` is the run's tag (tier 4's `nope-final-ln`, partial RoPE's `rope-k4-l0`), else its scheme plus its
  non-default scheme_kwargs (`rope {"rope_heads": 1}`);
- `preset` is the size preset (`repro`, `cpu`, `smoke`): runs of two presets are never pooled either.
Runs of one (preset, setting, variant, task) differ only by seed: those may be averaged, nothing else may.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pandas as pd

SETTINGS = {  # setting key -> label (the order of the tables)
    "paper": "PE-Lab `paper` arch",
    "authors": "authors' transformer script",
    "authors-mla": "authors' MLA script",
    "encoder": "PE-Lab `encoder` arch",
    "decoder": "PE-Lab `decoder` arch",
}
SHORT = {"paper": "paper arch", "authors": "authors' script", "authors-mla": "authors' MLA script",
         "encoder": "encoder arch", "decoder": "decoder arch"}   # in run pickers, where space is short
DEFAULT_SETTING = "paper"   # what pages open on: PE-Lab's own `paper`-arch runs (tier 1 of the shipped grid)
BASE_VARIANTS = ("rope", "nope", "mla")  # Table 1's variants; tier 4 names its runs `<base>-<what changed>`


def reproduction_grid(preset: str | None) -> str:
    """The grid that trains the core paper's reproduction at `preset`: grids/paper.toml at the paper's own scale
    (a GPU), else the CPU reproduction's grids/repro.toml (same tiers: partial RoPE tier 2, one setting tier 4)."""
    return "grids/paper.toml" if preset == "paper" else "grids/repro.toml"


def runs_grid(runs: pd.DataFrame) -> str:
    """`reproduction_grid` of a run table's preset (the first row's: the runs judged together are of one preset)."""
    return reproduction_grid(str(runs.preset.iloc[0]) if len(runs) and "preset" in runs else None)


def setting_of(config: dict[str, Any]) -> str:
    """The setting a run belongs to: the authors' named fidelity settings, else its architecture."""
    fidelity = config.get("fidelity") or "pelab"
    if fidelity in ("authors", "authors-mla"):
        return fidelity
    return (config.get("model") or {}).get("arch", "paper")


def _kwargs(config: dict[str, Any]) -> dict:
    kw = (config.get("model") or {}).get("scheme_kwargs") or {}
    return kw if isinstance(kw, dict) else json.loads(kw)


def variant_of(config: dict[str, Any]) -> str:
    """The run's tag, else its scheme plus its non-default scheme_kwargs as sorted JSON."""
    if config.get("tag"):
        return str(config["tag"])
    scheme = (config.get("model") or {}).get("scheme", "?")
    kw = _kwargs(config)
    return scheme + (" " + json.dumps(kw, sort_keys=True) if kw else "")


def plain_variant(df: pd.DataFrame) -> pd.Series:
    """Which rows of an annotated index (`annotate`, or `claims.run_table`) are their setting's plain run of a scheme,
    not a variant of it (tier 4's `rope-final-ln`, partial RoPE's `rope-k4-l0`): the variant is the scheme itself,
    or one of Table 1's BASE_VARIANTS, which the authors' settings name their runs by whatever their scheme (`rope`
    is `rope+sinusoidal` there): `is_plain` row by row."""
    return pd.Series([is_plain(v, s) for v, s in zip(df["variant"], df["scheme"])], index=df.index, dtype=bool)


def is_plain(variant: str, scheme: str) -> bool:
    """One run's `plain_variant`: its variant is its scheme, or one of BASE_VARIANTS."""
    return variant == scheme or variant in BASE_VARIANTS


def base_scheme(variant: str, scheme: str) -> str:
    """The scheme a variant stands for in figures (its colour): the BASE_VARIANT it is named as or after (the
    authors' `rope` and its tier-4 `rope-final-ln` are RoPE, whatever rope+sinusoidal they run), else its scheme."""
    v = str(variant)
    return next((b for b in BASE_VARIANTS if v == b or v.startswith(f"{b}-")), scheme)


def setting_label(setting: str, preset: str | None = None, short: bool = False) -> str:
    """`PE-Lab `paper` arch` (`short`: `paper arch`), plus ` · preset` when given."""
    label = (SHORT if short else SETTINGS).get(setting, str(setting))
    return f"{label} · {preset}" if preset else label


@dataclass(frozen=True)
class Setting:
    preset: str
    setting: str
    variant: str
    scheme: str
    fidelity: str
    arch: str

    @property
    def key(self) -> str:
        """`preset/setting/variant`: equal keys = runs that may be averaged over seeds (within one task)."""
        return f"{self.preset}/{self.setting}/{self.variant}"

    @property
    def label(self) -> str:
        return f"{self.variant} · {setting_label(self.setting, self.preset)}"


def describe(config: dict[str, Any]) -> Setting:
    """The setting of a run's config (config.json)."""
    model = config.get("model") or {}
    return Setting(preset=str(config.get("preset") or "?"), setting=setting_of(config), variant=variant_of(config),
                   scheme=str(model.get("scheme", "?")), fidelity=str(config.get("fidelity") or "pelab"),
                   arch=str(model.get("arch", "paper")))


def _config(v) -> dict:
    if isinstance(v, dict):
        return v
    try:
        return json.loads(v) if isinstance(v, str) and v else {}
    except ValueError:
        return {}


def annotate(df: pd.DataFrame) -> pd.DataFrame:
    """A store index (`store.query()`, with its `config` column) plus setting, setting_label, variant, group
    (`Setting.key`) and group_label columns; a row without a readable config gets its arch / scheme."""
    df = df.copy()
    configs = [_config(c) for c in df["config"]] if "config" in df.columns else [{} for _ in range(len(df))]
    rows = []
    for cfg, (_, r) in zip(configs, df.iterrows()):
        if not cfg.get("model"):
            cfg = {"preset": r.get("preset"), "tag": r.get("tag"),
                   "model": {"arch": r.get("arch") or "paper", "scheme": r.get("scheme")}}
        rows.append(describe(cfg))
    df["setting"] = [s.setting for s in rows]
    df["setting_label"] = [setting_label(s.setting) for s in rows]
    df["variant"] = [s.variant for s in rows]
    df["group"] = [s.key for s in rows]
    df["group_label"] = [s.label for s in rows]
    return df


def setting_options(df: pd.DataFrame) -> list[dict]:
    """Dropdown options `preset/setting` of an annotated index, in `SETTINGS` order, with a run count (rows without
    a setting, e.g. a damaged run's, are not counted)."""
    df = df[df["setting"].notna()] if "setting" in df.columns else df
    if df.empty:
        return []
    order = {k: i for i, k in enumerate(SETTINGS)}
    g = df.assign(ps=df["preset"].astype(str) + "/" + df["setting"]).groupby("ps")
    keys = sorted(g.groups, key=lambda k: (k.split("/", 1)[0], order.get(k.split("/", 1)[1], 99), k))
    return [{"label": f"{setting_label(k.split('/', 1)[1], k.split('/', 1)[0])} ({len(g.get_group(k))} runs)",
             "value": k} for k in keys]


def default_setting(df: pd.DataFrame) -> str | None:
    """The `preset/setting` a page opens on: the most-populated preset's `paper` setting, else its first."""
    opts = [o["value"] for o in setting_options(df)]
    if not opts:
        return None
    presets = df["preset"].astype(str).value_counts()
    for p in presets.index:
        if f"{p}/{DEFAULT_SETTING}" in opts:
            return f"{p}/{DEFAULT_SETTING}"
    return opts[0]


def in_setting(df: pd.DataFrame, key: str | None) -> pd.DataFrame:
    """The rows of an annotated index in setting `preset/setting` (all rows for None)."""
    if not key or "/" not in str(key):
        return df
    preset, setting = str(key).split("/", 1)
    return df[(df["preset"].astype(str) == preset) & (df["setting"] == setting)]
