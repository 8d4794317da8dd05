"""Length extrapolation: accuracy against test length, several runs overlaid."""
from apps.pages._diagnostic import Diagnostic, make_layout, register

PATH, NAME, ORDER = "/extrapolation", "Extrapolation", 7
SPEC = Diagnostic(
    prefix="extr", title="Length extrapolation", analysis="extrapolation", figures=[("extrapolation", {})],
    multi=True,
    blurb="Test accuracy and loss on the length-extrapolation splits (longer sequences than in training) against "
          "the longest sequence of each split, for every selected run; the dashed line is the training length. "
          "Learned position embeddings cannot extrapolate and say so.",
    prefer=("rope", "nope", "alibi", "sinusoidal", "learned", "mla"),
    applies="schemes that extrapolate; pick several runs to overlay them",
    summary_columns=["run_id", "scheme", "task", "split", "max_len", "n", "accuracy", "acc_lo", "acc_hi", "loss"],
)
layout = make_layout(SPEC)


def register_callbacks(app):
    register(app, SPEC)
