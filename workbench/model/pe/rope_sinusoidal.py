"""RoPE plus the sinusoidal input embedding (seed 003 section 5.2, first strategy).

`layout="concat"` adds `[sin(p w) ; cos(p w)]` (halves) instead of the interleaved sinusoid: what the core
paper's released transformer script runs under the name "rope" (docs/paper.md §7; `--fidelity authors` maps `rope`
to this)."""
from .base import FixedInputPE
from .registry import register
from .rope import RoPE
from .sinusoidal import LAYOUT_PARAM, check_layout, sinusoid_table


@register
class RoPESinusoidal(RoPE):
    name = "rope+sinusoidal"
    label = "RoPE+sinusoidal"
    translation_invariant = False
    acts_on = "input + q,k"
    formula = "x_p = e(t_p) + sinusoid(p) (interleaved, or [sin ; cos] halves), then RoPE on q, k"
    source = "seed 003 section 5.2 (the authors' main script also added the sinusoid, as [sin ; cos] halves)"
    extrapolation = "both parts are defined for any position; past training both are unseen phases"
    params = RoPE.params | {"layout": LAYOUT_PARAM}

    def check(self):
        super().check()
        check_layout(self)

    def input_pe(self):
        return FixedInputPE(lambda n, d: sinusoid_table(n, d, layout=self.kw["layout"]), self.cfg.d_model)
