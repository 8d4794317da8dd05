"""Spectral / Toeplitz structure of the attention logits (core paper, section 3 and App. B)."""
from apps.pages._diagnostic import Diagnostic, make_layout, register

PATH, NAME, ORDER = "/spectral", "Spectral", 5
SPEC = Diagnostic(
    prefix="spec", title="Spectral / Toeplitz", analysis="spectral",
    figures=[("spectral", {}), ("spectral_eigen", {})],
    blurb="Per head, the relative-offset profile of the logits (mean along each diagonal k - q), the share of logit "
          "variance that Toeplitz part explains, and the eigenvalue range / condition number of the Toeplitz "
          "matrix it defines. Below: the numerical check of the Hadamard-product contraction (Lemma B.1) on "
          "random positive-definite Toeplitz matrices, which needs no run.",
    applies="any run",
    standalone=[("hadamard_check", {"sizes": (8, 32, 64), "n_trials": 8}, "Lemma B.1: T ∘ E against T (no run needed)")],
)
layout = make_layout(SPEC)


def register_callbacks(app):
    register(app, SPEC)
