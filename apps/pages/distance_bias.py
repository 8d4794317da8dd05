"""Distance bias: near-vs-far attention-score differences (TAPA App. 15) and expected RoPE score (FoPE Fig. 8)."""
from apps.pages._diagnostic import Diagnostic, make_layout, register

PATH, NAME, ORDER = "/distance-bias", "Distance bias", 6
SPEC = Diagnostic(
    prefix="dist", title="Distance bias", analysis="distance_bias", figures=[("distance_bias", {}), ("distance_bias_share", {})],
    blurb="Histogram of attention-score differences between a short-range and a long-range key of the same query, "
          "one histogram per layer (TAPA App. 15): mass right of 0 means nearer keys score higher; and, per head, the "
          "share of pairs whose nearer key scores higher (0.5: no preference), which reads whatever the logits' "
          "scale. Below: the "
          "expected RoPE score against distance for q, k with mean 0, 0.1 and 1 (FoPE Fig. 8), which needs no run.",
    prefer=("rope", "alibi"),
    applies="any run",
    standalone=[("rope_expected_score", {}, "Expected RoPE score vs. distance (no run needed)")],
)
layout = make_layout(SPEC)


def register_callbacks(app):
    register(app, SPEC)
