"""q/k dimension means (FoPE, Fig. 7 / App. A.1)."""
from apps.pages._diagnostic import Diagnostic, make_layout, register

PATH, NAME, ORDER = "/qk-means", "q/k means", 3
SPEC = Diagnostic(
    prefix="qk", title="q/k dimension means", analysis="qk_means", figures=[("qk_means", {})],
    blurb="Mean of the pre-rotation query and key per dimension over sampled test tokens, averaged over heads, one "
          "line per layer; shaded: dimensions whose RoPE frequency does not complete a full cycle within the "
          "training length (theta_i L / 2 pi < 1), FoPE's under-trained band.",
    applies="any run; the shaded band exists for rotary schemes",
)
layout = make_layout(SPEC)


def register_callbacks(app):
    register(app, SPEC)
