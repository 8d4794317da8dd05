"""`PEClassifier`: the one hooked transformer classifier every experiment trains (docs/paper.md §2).

paper arch (the authors' scripts):   M = E[t] + PE;  x_0 = M
    x += Dropout(W_O Attn(q = LN1(x_l), k = v = M))        keys/values always from M, never normalised
    x += Dropout(FFN_relu(LN2(x)))
    logits = W_U LN_f(masked-mean_p x_L)
encoder arch (standard pre-LN bidirectional encoder):  x_0 = E[t] + PE
    x += Dropout(Attn(q = k = v = LN1 x));  x += Dropout(FFN_gelu(LN2 x));  logits = W_U LN_f(masked-mean_p x_L)
decoder arch (pre-LN causal decoder):  x_0 = E[t] + PE
    x += Dropout(Attn(LN1 x) causal);  x += Dropout(FFN_gelu(LN2 x));  logits = W_U LN_f(x_L[last non-pad])

The authors' released code differs in ways each selected by a config field (docs/fidelity.md): no attention pad
mask (`attn_pad_mask`), a trained PAD embedding (`pad_trained`), the mean over all positions
(`readout_include_pad`), no final LayerNorm or one before the pooling (`final_ln`), vocab_size outputs (`unembed_vocab`),
dropout sites (`dropout_sites`), no attention biases (`attn_bias`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from .attention import MASK_VALUE, Attention, Dropout, compute_dtype
from .config import ModelConfig
from .pe import get_scheme
from .tl import HookedRootModule, HookPoint

if TYPE_CHECKING:
    from transformer_lens import ActivationCache


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.fc_in, self.fc_out = nn.Linear(cfg.d_model, cfg.d_ff), nn.Linear(cfg.d_ff, cfg.d_model)
        self.act = nn.ReLU() if cfg.ffn_activation == "relu" else nn.GELU()
        self.drop_hidden = Dropout(cfg.dropout_at("mlp_hidden"))
        self.hook_pre, self.hook_post = HookPoint(), HookPoint()

    def forward(self, x):
        return self.fc_out(self.drop_hidden(self.hook_post(self.act(self.hook_pre(self.fc_in(x))))))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, layer: int, scheme):
        super().__init__()
        self.cfg = cfg
        self.ln1, self.ln2 = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.attn = scheme.attention(layer)
        self.mlp = MLP(cfg)
        self.drop_attn, self.drop_mlp = Dropout(cfg.dropout_at("attn_out")), Dropout(cfg.dropout_at("mlp_out"))
        for name in ("resid_pre", "resid_mid", "resid_post", "attn_out", "mlp_out"):
            setattr(self, f"hook_{name}", HookPoint())

    def forward(self, x, memory, mask, kv=None):
        """kv: this layer's keys and values, already projected from `memory` (paper arch), or None."""
        x = self.hook_resid_pre(x)
        h = self.ln1(x)
        x_kv = memory if self.cfg.arch == "paper" else h
        x = self.hook_resid_mid(x + self.drop_attn(self.hook_attn_out(self.attn(h, x_kv, mask, kv))))
        x = x + self.drop_mlp(self.hook_mlp_out(self.mlp(self.ln2(x))))
        return self.hook_resid_post(x)


class PEClassifier(HookedRootModule):
    """Sequence classifier; `forward(tokens [batch, pos]) -> logits [batch, n_classes]`, PAD = 0."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.scheme = get_scheme(cfg.scheme)(cfg)
        gen_state = torch.random.get_rng_state()
        torch.manual_seed(cfg.seed)
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model, padding_idx=None if cfg.pad_trained else 0)
        self.pos_embed = self.scheme.input_pe()
        self.blocks = nn.ModuleList(Block(cfg, layer, self.scheme) for layer in range(cfg.n_layers))
        self.ln_final = nn.Identity() if cfg.final_ln == "none" else nn.LayerNorm(cfg.d_model)
        self.unembed = nn.Linear(cfg.d_model, cfg.n_outputs)
        torch.random.set_rng_state(gen_state)
        self.hook_embed, self.hook_pos_embed, self.hook_readout = HookPoint(), HookPoint(), HookPoint()
        # the paper arch's keys / values of all layers from M in one matmul (`memory_kv`), where every layer
        # projects them as plain attention does; `fused_kv`: None = on CUDA only (same values, other rounding)
        self.kv_fusable = cfg.arch == "paper" and all(type(b.attn).project is Attention.project for b in self.blocks)
        self.fused_kv: bool | None = None
        self.setup()

    def remove_all_hook_fns(self, direction="both", including_permanent=False, level=None):
        """TransformerLens' `remove_all_hook_fns` (what `hooks` and `run_with_hooks` call on exit), visiting only
        the hook points that hold a hook: TL's re-assigns both hook lists of every hook point (an nn.Module
        `__setattr__` each), 15 % of a CPU ablation sweep at the `cpu` preset, which enters a `hooks` context
        per layer and batch (benchmarks/bench_ablation.py). The same hooks are removed."""
        for hp in self.hook_points():
            if hp.fwd_hooks or hp.bwd_hooks:
                hp.remove_hooks(direction, including_permanent=including_permanent, level=level)

    def mask(self, tokens: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Additive [batch, 1, q, k] in `dtype`: PAD keys masked (unless `attn_pad_mask` is False); plus the causal
        mask in the decoder."""
        n = tokens.shape[1]
        keys = tokens != 0 if self.cfg.attn_pad_mask else torch.ones_like(tokens, dtype=torch.bool)
        allowed = keys[:, None, None, :].expand(-1, 1, n, n)
        if self.cfg.arch == "decoder":
            allowed = allowed & torch.ones(n, n, dtype=torch.bool, device=tokens.device).tril()
        zero = torch.zeros((), device=tokens.device, dtype=dtype)
        return torch.where(allowed, zero, torch.full((), MASK_VALUE, device=tokens.device, dtype=dtype))

    def attn_mask(self, tokens: torch.Tensor, dtype: torch.dtype) -> torch.Tensor | None:
        """The forward's mask: None when nothing is masked (no pad mask, not causal), else `mask` in `dtype`."""
        if not self.cfg.attn_pad_mask and self.cfg.arch != "decoder":
            return None
        return self.mask(tokens, dtype)

    def memory_kv(self, memory: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Every layer's (k, v) from M as one matmul: M @ [W_K^0 | W_V^0 | ... | W_V^(L-1)] + [b_K^0 | ...],
        split into [batch, pos, head, d_head] per layer (what each layer's `project` computes from M).

        The split is `split` along the last dim, whose gradient is one `cat` (each slice's gradient written once).
        Indexing a [..., layer, k|v, head, d_head] view instead gives a sum of 2L `select_backward`s, which inductor
        fused into one kernel that loads all 2L gradients for every element: 1.5 ms of a 15.9-ms RoPE step on an
        H100 (2026-11-27 profile, at about a sixth of the memory bandwidth). Same views, same values."""
        heads = (self.cfg.n_heads, self.cfg.d_head)
        parts = [p.unflatten(-1, heads) for p in self.kv_projection(memory).split(heads[0] * heads[1], dim=-1)]
        return list(zip(parts[0::2], parts[1::2]))

    def kv_projection(self, memory: torch.Tensor) -> torch.Tensor:
        """[..., 2 n_layers n_heads d_head]: M @ [W_K^0 | W_V^0 | ... | W_V^(L-1)] + [b_K^0 | ...], one GEMM with the
        bias in its epilogue (`memory_kv` splits it per layer)."""
        attns = [b.attn for b in self.blocks]
        W = torch.cat([w.transpose(0, 1).flatten(1) for a in attns for w in (a.W_K, a.W_V)], 1)
        b = torch.cat([t.flatten() for a in attns for t in (a.b_K, a.b_V)])
        return torch.addmm(b, memory.flatten(0, -2), W).unflatten(0, memory.shape[:-1])

    def embed_input(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.hook_embed(self.embed(tokens))
        if self.pos_embed is not None:
            pe = self.pos_embed(tokens.shape[1]).to(x.device, x.dtype)
            x = x + self.hook_pos_embed(pe.expand(tokens.shape[0], -1, -1))
        return x

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        tokens = tokens.to(self.embed.weight.device)
        memory = self.embed_input(tokens)
        mask = self.attn_mask(tokens, compute_dtype(memory))
        fuse = self.kv_fusable and (tokens.is_cuda if self.fused_kv is None else self.fused_kv)
        kvs = self.memory_kv(memory) if fuse else [None] * len(self.blocks)
        x = memory
        for block, kv in zip(self.blocks, kvs):
            x = block(x, memory, mask, kv)
        return self.head(x, tokens)

    def head(self, x: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """Final stream [batch, pos, d_model] -> logits: readout, final LayerNorm (after the pooling by default,
        before it with final_ln="before_pool", none with "none"), output layer."""
        if self.cfg.final_ln == "before_pool":
            return self.unembed(self.hook_readout(self.readout(self.ln_final(x), tokens)))
        return self.unembed(self.ln_final(self.hook_readout(self.readout(x, tokens))))

    def readout(self, x: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """Masked mean over non-pad positions (paper, encoder; all positions with `readout_include_pad`) or the
        last non-pad position (decoder)."""
        keep = tokens != 0
        if self.cfg.arch == "decoder":
            last = keep.long().cumsum(1).argmax(1)
            return x[torch.arange(x.shape[0], device=x.device), last]
        if self.cfg.readout_include_pad:
            return x.mean(1)
        w = keep.to(x.dtype).unsqueeze(-1)
        return (x * w).sum(1) / w.sum(1).clamp(min=1.0)

    def run_with_cache(self, *args, **kwargs) -> tuple[torch.Tensor, ActivationCache]:
        """As TransformerLens: returns (logits, ActivationCache); TransformerLens' package imported here (model.tl)."""
        from transformer_lens import ActivationCache

        out, cache = super().run_with_cache(*args, **kwargs)
        return out, ActivationCache(cache, self, has_batch_dim=not kwargs.get("remove_batch_dim", False))

    def loss(self, tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self(tokens), labels.to(self.unembed.weight.device))

    def to(self, *args, **kwargs):  # keep cfg.device truthful for TransformerLens utilities
        out = super().to(*args, **kwargs)
        self.cfg.device = str(self.embed.weight.device)
        return out
