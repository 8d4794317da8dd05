"""RoPE plus the sinusoidal input embedding (seed 003 section 5.2, first strategy)."""
from .base import FixedInputPE
from .registry import register
from .rope import RoPE
from .sinusoidal import sinusoid_table


@register
class RoPESinusoidal(RoPE):
    name = "rope+sinusoidal"
    acts_on = "input + q,k"
    formula = "x_p = e(t_p) + sinusoid(p), then RoPE on q, k"
    source = "seed 003 section 5.2 (the authors' main script also added the sinusoid)"
    extrapolation = "both parts are defined for any position; past training both are unseen phases"

    def input_pe(self):
        return FixedInputPE(sinusoid_table, self.cfg.d_model)
