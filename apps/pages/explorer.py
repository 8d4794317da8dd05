"""Attention explorer: pick a run and a test example, see its tokens (trigger words highlighted), every head's
attention pattern, and ablate heads live (zeroing `blocks.{l}.attn.hook_z[:, :, h]` through
`model.run_with_hooks`) to see the prediction change."""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from dash import Input, Output, State, dcc, html

from apps import common as C
from apps.jobs import register_recreate

PATH, NAME, ORDER = "/explorer", "Attention explorer", 8
P = "exp"


def _heads_param(ablate: str | None) -> list[str]:
    """`?ablate=1.1|2.3` -> ["1.1", "2.3"] (layer.head)."""
    return [v for v in (ablate or "").replace(",", "|").split("|") if v.count(".") == 1]


def _int(value, what: str, lo: int, hi: int) -> int:
    """A whole number in [lo, hi] from a browser value, else ValueError saying what is allowed."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ValueError(f"{what} {str(value)[:40]!r} is not valid: pick a whole number from {lo} to {hi}.")
    return value


def check_inputs(run, example, layer, ablate) -> tuple[int, int, list[tuple[int, int]]]:
    """(example, layer, [(layer, head), ...]) from the page's inputs, checked against the run's model and test
    set; ValueError (shown as a hint) for anything else."""
    m = run.config["model"]
    L, H = int(m["n_layers"]), int(m["n_heads"])
    n = len(run.load_dataset().test_x)
    example = _int(0 if example in (None, "") else example, "test example", 0, max(0, n - 1))
    layer = _int(0 if layer in (None, "") else layer, "layer", 0, L - 1)
    if ablate in (None, ""):
        ablate = []
    if not isinstance(ablate, list):
        raise ValueError("ablate heads: pick heads (layer.head) from the list.")
    heads = []
    for v in ablate:
        parts = str(v).split(".")
        if len(parts) != 2 or not all(p.isdigit() for p in parts) or not (int(parts[0]) < L and int(parts[1]) < H):
            raise ValueError(f"ablate heads: {str(v)[:20]!r} is not a head of this model; use layer.head with layer "
                             f"0-{L - 1} and head 0-{H - 1}.")
        heads.append((int(parts[0]), int(parts[1])))
    return example, layer, heads


def layout(run: str | None = None, example: str | None = None, layer: str | None = None,
           ablate: str | None = None, **query):
    store = C.stores()
    df = C.index(store)
    value = C.default_run(df, run, need_weights=True)  # a run with weights when there is one
    return html.Div([
        C.page_header("Attention explorer", "One test example through one model: the tokens (trigger words "
                      "highlighted), every head's attention pattern in a layer, and the prediction with any heads "
                      "ablated (their z zeroed before W_O, as in the ablation sweep)."),
        html.Div([
            C.labelled("run", dcc.Dropdown(id=f"{P}-run", options=C.run_options(df), value=value),
                       width="720px"),
            C.labelled("test example", dcc.Input(id=f"{P}-example", type="number", min=0, step=1,
                                                 value=C.url_int(example),
                                                 debounce=True)),
            C.labelled("layer (patterns)", dcc.Dropdown(id=f"{P}-layer", clearable=False,
                                                        value=C.url_int(layer),
                                                        options=[0]), width="150px"),
            C.labelled("ablate heads", dcc.Dropdown(id=f"{P}-ablate", multi=True, value=_heads_param(ablate),
                                                    placeholder="none: pick layer.head"), width="420px"),
        ], className="controls"),
        html.Div([C.recreate_panel(P), html.Div(id=f"{P}-hint"), html.Div(id=f"{P}-tokens", className="tokens"),
                  html.Div(id=f"{P}-prediction", className="prediction")], className="card"),
        html.Div([html.H3("Attention patterns"), html.Div(id=f"{P}-patterns")], className="card"),
    ])


# ---- model work ----------------------------------------------------------------------------------------
def pick_example(run, idx: int):
    """(dataset, index clamped to the test split, its size, the example's tokens, its non-pad length)."""
    ds = run.load_dataset()
    n = len(ds.test_x)
    idx = int(max(0, min(n - 1, idx)))
    row = np.asarray(ds.test_x[idx])
    keep = int((row != 0).sum())
    return ds, idx, n, row, keep


def example_batch(model, row: np.ndarray, keep: int) -> torch.Tensor:
    """The example as a [1, pos] batch; trailing pads are cut when the readout ignores them (exact)."""
    x = row[:max(1, keep)] if model.cfg.pads_are_inert else row
    return torch.as_tensor(np.asarray(x, dtype=np.int64))[None].to(model.cfg.device)


def ablation_hooks(heads: list[tuple[int, int]]):
    """fwd_hooks that zero head h of layer l in `blocks.{l}.attn.hook_z`."""
    by_layer: dict[int, list[int]] = {}
    for l, h in heads:
        by_layer.setdefault(l, []).append(h)

    def make(hs):
        def zero(z, hook):
            z = z.clone()
            z[:, :, hs] = 0.0
            return z
        return zero

    return [(f"blocks.{l}.attn.hook_z", make(sorted(hs))) for l, hs in sorted(by_layer.items())]


def predict(model, tokens: torch.Tensor, heads: list[tuple[int, int]]) -> np.ndarray:
    with torch.no_grad():
        logits = model.run_with_hooks(tokens, fwd_hooks=ablation_hooks(heads)) if heads else model(tokens)
    return torch.softmax(logits.float(), -1)[0].cpu().numpy()


def patterns(model, tokens: torch.Tensor, layer: int, heads: list[tuple[int, int]] = ()) -> np.ndarray:
    """[head, q, k] attention pattern of one layer (through run_with_cache), with `heads` ablated."""
    name = f"blocks.{layer}.attn.hook_pattern"
    with torch.no_grad(), model.hooks(fwd_hooks=ablation_hooks(list(heads))):
        _, cache = model.run_with_cache(tokens, names_filter=lambda n: n == name)
    return cache[name][0].float().cpu().numpy()


def pattern_table(pat: np.ndarray, words: list[str], layer: int, ablated: set[int] = frozenset()) -> pd.DataFrame:
    """Tidy [layer, head, q_pos, k_pos, weight, q_token, k_token, ablated] table of one layer's patterns."""
    H, Q, K = pat.shape
    h, q, k = np.meshgrid(np.arange(H), np.arange(Q), np.arange(K), indexing="ij")
    w = list(words) + [""] * max(0, max(Q, K) - len(words))
    return pd.DataFrame({"layer": layer, "head": h.ravel(), "q_pos": q.ravel(), "k_pos": k.ravel(),
                         "weight": pat.ravel(), "q_token": np.asarray(w)[q.ravel()],
                         "k_token": np.asarray(w)[k.ravel()], "ablated": np.isin(h.ravel(), list(ablated))})


def pattern_figure(df: pd.DataFrame):
    """(figure, None) or (None, hint): the shared builder `workbench.figures.FIGURES["attention_patterns"]`."""
    return C.build_figure("attention_patterns", df)


def prediction_line(probs: np.ndarray, label: int | None, heads: list[tuple[int, int]], clean: np.ndarray):
    pred = int(probs.argmax())
    ok = label is not None and pred == int(label)
    who = "clean model" if not heads else "with " + ", ".join(f"L{l}.H{h}" for l, h in heads) + " ablated"
    parts = [html.B(f"{who}: "), f"predicts {pred} (p = {probs[pred]:.3f})"]
    if label is not None:
        parts += [f", label {int(label)} ", html.Span("✓ correct" if ok else "✗ wrong", className="ok" if ok else "bad"),
                  f"; p(label) = {probs[int(label)]:.3f}"]
        if heads:
            parts.append(f" (clean {clean[int(label)]:.3f})")
    return html.Div(parts, id=f"{P}-pred-{'ablated' if heads else 'clean'}")


def register_callbacks(app):
    register_recreate(app, P, f"{P}-run")

    @app.callback(Output(f"{P}-layer", "options"), Output(f"{P}-ablate", "options"), Output(f"{P}-example", "max"),
                  Output(f"{P}-layer", "value"), Output(f"{P}-ablate", "value"),
                  Input(f"{P}-run", "value"), State(f"{P}-layer", "value"), State(f"{P}-ablate", "value"))
    def on_run(run_id, layer, ablate):
        if not run_id:
            return [0], [], 0, 0, []
        run, err = C.get_run(C.stores(), run_id)
        if err is not None:
            return [0], [], 0, 0, []
        m = run.config["model"]
        L, H = int(m["n_layers"]), int(m["n_heads"])
        heads = [{"label": f"L{l}.H{h}", "value": f"{l}.{h}"} for l in range(L) for h in range(H)]
        try:
            n = len(run.load_dataset().test_x)
        except Exception:
            n = 1
        valid = {h["value"] for h in heads}
        # heads picked before (or in the URL) that exist here
        keep = [v for v in (ablate if isinstance(ablate, list) else []) if v in valid]
        return list(range(L)), heads, max(0, n - 1), (layer if isinstance(layer, int) and layer < L else 0), keep

    @app.callback(Output(f"{P}-hint", "children"), Output(f"{P}-tokens", "children"),
                  Output(f"{P}-prediction", "children"), Output(f"{P}-patterns", "children"),
                  Input(f"{P}-run", "value"), Input(f"{P}-example", "value"), Input(f"{P}-layer", "value"),
                  Input(f"{P}-ablate", "value"), Input(f"{P}-recreate-job-result", "data"))
    def show(run_id, example, layer, ablate, _recreated):
        store = C.stores()
        if not run_id:
            return C.no_runs_hint(store), None, None, None
        run, err = C.get_run(store, run_id)
        if err is not None:
            return err, None, None, None
        if C.needs_recreate(store, run_id):  # the Re-create panel above says why and how, once
            return None, None, None, C.hint("The patterns show once the run has weights (Re-create above).",
                                            kind="info")
        if not C.has_checkpoint(run):
            return C.no_weights_hint(run), None, None, None
        state_hint = C.run_state_hint(run)
        try:
            example, layer, heads = check_inputs(run, example, layer, ablate)
        except ValueError as e:
            return C.hint(str(e), kind="error"), None, None, None
        try:
            model = C.load_model_cached(run)
            ds, idx, n, row, keep = pick_example(run, example)
        except Exception as e:
            return C.hint(f"Cannot load {run.id}: {type(e).__name__}: {e}", kind="error"), None, None, None
        words = ds.decode(row).split()
        label = int(ds.test_y[idx])
        toks = [html.Span(f"#{idx}/{n - 1}  ", className="job-note")]
        for i, w in enumerate(words):
            trig = w.startswith("[T:")
            toks.append(html.Span(w[3:-1] if trig else w, className="tok tok-trigger" if trig else "tok",
                                  title=f"position {i}" + (" (trigger)" if trig else "")))
        tokens = example_batch(model, row, keep)
        with C.model_lock(model):
            clean = predict(model, tokens, [])
            ablated = predict(model, tokens, heads) if heads else None
            pat = patterns(model, tokens, layer, heads)[:, :keep, :keep]
        lines = [prediction_line(clean, label, [], clean)]
        if heads:
            lines.append(prediction_line(ablated, label, heads, clean))
        fig, ferr = pattern_figure(pattern_table(pat, [w.replace("[T:", "*").rstrip("]") for w in words], layer,
                                                 {h for l, h in heads if l == layer}))
        return state_hint, toks, lines, (ferr if fig is None else C.graph(fig, id=f"{P}-pattern-graph"))
