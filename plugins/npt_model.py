"""Non-Parametric Transformers (NPT): the model, its masking and its loss.

Kossen, Band, Lyle, Gomez, Rainforth, Gal. "Self-Attention Between Datapoints: Going Beyond Individual
Input-Output Pairs in Deep Learning". NeurIPS 2021, arXiv 2106.02584. Authors' code:
github.com/OATML/Non-Parametric-Transformers (read for facts; nothing here is copied from it).

The model takes a whole table (n rows x d columns, the target being one of the columns) and a mask
bit per entry, and predicts every entry:

    embed      each column j: Linear(width_j -> e) of [standardised value | one-hot, mask bit],
               + learned column-index embedding + learned column-type embedding  -> H (n, d, e)
    8 layers   ABD, ABA, ABD, ... : ABD = self-attention ACROSS ROWS on (1, n, d*e);
               ABA = self-attention across the d columns of each row on (n, d, e)
    heads      each column j: Linear(e -> width_j - 1): class logits, or one standardised value

Each block is pre-LayerNorm (paper Eq. 4): H' = res(H) + MHSA(LN(H)); out = H' + rFF(LN(H')).

Code vs paper. Where the authors' code (which produced the published numbers) and the paper disagree,
the default follows the CODE, so that results and parameter counts match the published ones; each
choice is a config flag, and ``NPTConfig.paper()`` gives the paper's reading:

    ln_kv        False (code): only the query path is layer-normalised, K and V see the raw input.
                 True (paper): standard pre-LN, LN(H) feeds Q, K and V.
    temperature  "hidden" (code): softmax(QK^T / sqrt(h)) with h the FULL hidden size.
                 "head" (paper / standard): sqrt(h / n_heads).
    residual     "linear" (code): the residual branch is a learned Linear(h, h) of the raw input.
                 "identity" (paper): H' = H + MHSA(LN(H)).

(Two more deviations are training settings, see ``tabbench_plugins.npt``: gradient clipping is
element-wise clamping in the code and norm clipping in the paper; the code does not seed torch.)

Fast. Attention goes through ``F.scaled_dot_product_attention`` (flash / memory-efficient kernels on
the GPU: no n x n matrix is materialised), unless ``attention="explicit"`` asks for the textbook
softmax(QK^T)V, or attention maps are requested (``return_attention=True``), which need the matrix.
``checkpointing=True`` recomputes each block in the backward pass instead of storing its activations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


@dataclass(frozen=True)
class NPTConfig:
    cards: tuple  # per column: number of classes of a categorical column, 0 for a numeric one
    e: int = 32  # embedding size per column; the paper uses 32 (Breast Cancer), 64 or 128
    n_layers: int = 8  # alternating ABD / ABA, ABD first; the paper's depth
    n_heads: int = 8
    dropout: float = 0.1  # hidden dropout: embeddings, attention output, rFF (code and paper)
    att_dropout: float = 0.1  # dropout on the attention weights
    ln_kv: bool = False  # see "Code vs paper" above
    temperature: str = "hidden"  # "hidden" (code) or "head" (paper / standard)
    residual: str = "linear"  # "linear" (code) or "identity" (paper)
    attention: str = "fused"  # "fused" (scaled_dot_product_attention) or "explicit" softmax
    checkpointing: bool = False  # activation checkpointing per block (trades compute for memory)
    ln_eps: float = 1e-12  # the code's LayerNorm epsilon; LayerNorm runs in fp32 under autocast

    def __post_init__(self):
        d = len(self.cards)
        assert d >= 1, "the table needs at least one column"
        assert all(c >= 0 for c in self.cards), f"cards must be >= 0, got {self.cards}"
        assert self.n_layers >= 1, "n_layers must be >= 1"
        assert self.e % self.n_heads == 0, f"ABA: e={self.e} must be divisible by n_heads={self.n_heads}"
        assert (d * self.e) % self.n_heads == 0, f"ABD: d*e={d * self.e} must be divisible by n_heads"
        assert self.temperature in ("hidden", "head"), "temperature must be 'hidden' or 'head'"
        assert self.residual in ("linear", "identity"), "residual must be 'linear' or 'identity'"
        assert self.attention in ("fused", "explicit"), "attention must be 'fused' or 'explicit'"

    @property
    def d(self) -> int:
        return len(self.cards)

    def paper(self) -> "NPTConfig":
        """The same model with the paper's reading of every code-vs-paper deviation."""
        return replace(self, ln_kv=True, temperature="head", residual="identity")


# --- blocks ---------------------------------------------------------------------------------------


class SelfAttention(nn.Module):
    """Multi-head self-attention over the second-to-last axis of (batch, seq, dim)."""

    def __init__(self, dim: int, cfg: NPTConfig):
        super().__init__()
        self.n_heads, self.cfg = cfg.n_heads, cfg
        self.qkv = nn.Linear(dim, 3 * dim)
        self.mix = nn.Linear(dim, dim)  # mixes the concatenated heads (the code's fc_mix_heads)
        # the code divides by sqrt of the full hidden size, the paper (like everyone) per head
        self.scale = 1 / math.sqrt(dim if cfg.temperature == "hidden" else dim // cfg.n_heads)

    def forward(self, x_normed, x_raw, attn_store=None):
        B, T, C = x_normed.shape
        if self.cfg.ln_kv:
            q, k, v = self.qkv(x_normed).split(C, dim=-1)
        else:  # code: LN on the query path only
            q = F.linear(x_normed, self.qkv.weight[:C], self.qkv.bias[:C])
            k, v = F.linear(x_raw, self.qkv.weight[C:], self.qkv.bias[C:]).split(C, dim=-1)
        # (B, T, C) -> (B, heads, T, C / heads)
        q, k, v = (t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in (q, k, v))
        p = self.cfg.att_dropout if self.training else 0.0
        if self.cfg.attention == "fused" and attn_store is None:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, scale=self.scale)
        else:  # textbook attention: materialises the (B, heads, T, T) matrix
            att = torch.softmax((q @ k.transpose(-2, -1)) * self.scale, dim=-1)
            if attn_store is not None:
                attn_store.append(att.detach())
            y = F.dropout(att, p, self.training) @ v
        y = y.transpose(1, 2).reshape(B, T, C)  # (B, heads, T, C / heads) -> (B, T, C)
        return self.mix(y)


class Block(nn.Module):
    """Pre-LN transformer block (paper Eq. 4) on (batch, seq, dim); ABD and ABA differ only in shape."""

    def __init__(self, dim: int, cfg: NPTConfig):
        super().__init__()
        self.ln_att = nn.LayerNorm(dim, eps=cfg.ln_eps)
        self.att = SelfAttention(dim, cfg)
        self.res = nn.Linear(dim, dim) if cfg.residual == "linear" else nn.Identity()
        self.ln_rff = nn.LayerNorm(dim, eps=cfg.ln_eps)
        self.rff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Dropout(cfg.dropout),
                                 nn.Linear(4 * dim, dim), nn.Dropout(cfg.dropout))
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x, attn_store=None):
        h = self.res(x) + self.drop(self.att(self.ln_att(x), x, attn_store))
        return h + self.rff(self.ln_rff(h))


class ABD(Block):
    """Attention Between Datapoints: every row attends to every row, hidden size d*e."""

    def forward(self, x, attn_store=None):
        n, d, e = x.shape
        return super().forward(x.reshape(1, n, d * e), attn_store).reshape(n, d, e)  # (n,d,e) <-> (1,n,d*e)


class ABA(Block):
    """Attention Between Attributes: within each row the d columns attend to each other, size e."""


# --- embedding and output -------------------------------------------------------------------------


class ColumnEmbedding(nn.Module):
    """Per-column Linear(width_j -> e) on [value or one-hot, mask bit], computed without the one-hots.

    Numeric column: value * w_value + mask * w_mask + b. Categorical: W[:, class] + mask * w_mask + b,
    where the one-hot of a masked entry is all zeros. This is exactly a Linear on the paper's encoding
    (same parameters, same initialisation), minus a (n, sum of widths) input tensor.
    """

    def __init__(self, cfg: NPTConfig):
        super().__init__()
        cards = torch.tensor(cfg.cards)
        num, cat = (cards == 0).nonzero().flatten(), (cards > 0).nonzero().flatten()
        offsets = torch.cumsum(cards[cat], 0) - cards[cat]
        self.register_buffer("num_cols", num, persistent=False)
        self.register_buffer("cat_cols", cat, persistent=False)
        self.register_buffer("cat_offsets", offsets, persistent=False)
        self.register_buffer("order", torch.argsort(torch.cat([num, cat])), persistent=False)
        d, e = cfg.d, cfg.e
        width = torch.where(cards == 0, 2, cards + 1).float()  # the paper's width_j, mask bit included
        bound = (1 / width.sqrt())[:, None]  # nn.Linear's default init, per column
        self.value = nn.Parameter((torch.rand(len(num), e) * 2 - 1) * bound[num])
        self.classes = nn.Parameter((torch.rand(int(cards.sum()), e) * 2 - 1)
                                    * bound[cat].repeat_interleave(cards[cat], dim=0))
        self.mask = nn.Parameter((torch.rand(d, e) * 2 - 1) * bound)
        self.bias = nn.Parameter((torch.rand(d, e) * 2 - 1) * bound)
        self.index = nn.Embedding(d, e)  # learned column-index embedding
        # learned column-type embedding; with a single type it would only duplicate the bias (code)
        self.col_type = nn.Embedding(2, e) if len(num) and len(cat) else None
        self.register_buffer("types", (cards > 0).long(), persistent=False)

    def forward(self, x, m):
        # x: (n, d) float, standardised values / class indices, 0 where masked; m: (n, d) bool mask bit
        keep = (~m).unsqueeze(-1).to(self.bias.dtype)
        parts = []
        if len(self.num_cols):
            parts.append(x[:, self.num_cols, None] * self.value)  # (n, d_num, e)
        if len(self.cat_cols):
            idx = x[:, self.cat_cols].long().clamp(min=0) + self.cat_offsets  # (n, d_cat)
            parts.append(F.embedding(idx, self.classes))  # (n, d_cat, e)
        h = torch.cat(parts, 1)[:, self.order] * keep  # back to table order; masked entries -> zeros
        h = h + m.unsqueeze(-1) * self.mask + self.bias + self.index.weight
        if self.col_type is not None:
            h = h + self.col_type.weight[self.types]
        return h  # (n, d, e)


class ColumnHeads(nn.Module):
    """Per-column Linear(e -> width_j - 1): class logits for categorical columns, a value for numeric."""

    def __init__(self, cfg: NPTConfig):
        super().__init__()
        self.cards = cfg.cards
        self.heads = nn.ModuleList(nn.Linear(cfg.e, max(c, 1)) for c in cfg.cards)

    def forward(self, h, columns=None):
        # h: (n, d, e) -> {column: (n, classes) logits or (n,) value}
        columns = range(len(self.cards)) if columns is None else columns
        out = {}
        for j in columns:
            y = self.heads[j](h[:, j])
            out[j] = y if self.cards[j] else y.squeeze(-1)
        return out


class NPT(nn.Module):
    def __init__(self, cfg: NPTConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = ColumnEmbedding(cfg)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(
            ABD(cfg.d * cfg.e, cfg) if i % 2 == 0 else ABA(cfg.e, cfg) for i in range(cfg.n_layers))
        self.heads = ColumnHeads(cfg)

    def forward(self, x, m, columns=None, return_attention=False):
        """x: (n, d) values, m: (n, d) bool mask bits -> {column: prediction} for ``columns`` (all)."""
        maps = [] if return_attention else None
        h = self.drop(self.embed(x, m))
        for block in self.blocks:
            if self.cfg.checkpointing and self.training and torch.is_grad_enabled():
                h = checkpoint(block, h, use_reentrant=False)
            else:
                h = block(h, maps)
        out = self.heads(self.drop(h), columns)
        return (out, maps) if return_attention else out

    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


# --- masking and loss -----------------------------------------------------------------------------


@dataclass
class Corrupted:
    x: torch.Tensor  # (n, d) model input values
    m: torch.Tensor  # (n, d) bool mask bits
    scored: torch.Tensor  # (n, d) bool entries the loss is computed on


def corrupt(x, missing, candidates, p, cards, generator, p_random=0.1):
    """BERT-style stochastic masking of a (n, d) table.

    ``p`` and ``cards`` are (d,) tensors on x's device (built once, so masking copies nothing from the
    host). Each candidate entry of column j is selected with probability ``p[j]``. Where ``p[j] < 1`` a
    ``p_random`` share of the selected entries is replaced by a random value (a uniform class, or
    N(0, 1)) with NO mask bit; the rest are zeroed with the mask bit set. ``p[j] == 1`` masks every
    candidate and replaces none (as the authors' code does for the targets). Missing entries are
    always zero with the mask bit and never scored.
    """
    dev = x.device
    sel = candidates & (torch.rand(x.shape, generator=generator, device=dev) < p)
    zero = sel
    if p_random > 0:
        rnd = sel & (p < 1) & (torch.rand(x.shape, generator=generator, device=dev) < p_random)
        u = torch.rand(x.shape, generator=generator, device=dev)
        g = torch.randn(x.shape, generator=generator, device=dev)
        random_value = torch.where(cards > 0, torch.minimum(torch.floor(u * cards), cards - 1), g)
        x = torch.where(rnd, random_value, x)
        zero = sel & ~rnd
    m = zero | missing
    return Corrupted(torch.where(m, torch.zeros_like(x), x), m, sel & ~missing)


def entry_losses(out, x_true, cards):
    """(n, d) per-entry loss: cross-entropy for categorical, squared error (standardised) numeric."""
    cols = []
    for j in range(len(cards)):
        if cards[j]:
            target = x_true[:, j].long().clamp(min=0)  # missing entries (-1 codes) are never scored
            cols.append(F.cross_entropy(out[j].float(), target, reduction="none"))
        else:
            cols.append((out[j].float() - x_true[:, j]) ** 2)
    return torch.stack(cols, 1)


def masked_mean(losses, scored):
    """Mean over the scored entries (0 when none), without a host sync."""
    s = scored.to(losses.dtype)
    return (losses * s).sum() / s.sum().clamp(min=1)
