"""Non-Parametric Transformers (NPT): the model, its masking and its loss.

Kossen, Band, Lyle, Gomez, Rainforth, Gal. "Self-Attention Between Datapoints: Going Beyond Individual
Input-Output Pairs in Deep Learning". NeurIPS 2021, arXiv 2106.02584. Authors' code:
github.com/OATML/Non-Parametric-Transformers (read for facts; nothing here is copied from it).

The model takes a whole table (n rows x d columns, the target being one of the columns) and a mask
bit per entry, and predicts every entry:

    embed      each column j: Linear(width_j -> e) of [standardised value | one-hot, mask bit],
               + learned column-index embedding + learned column-type embedding  -> H (n, d, e)
               images: a patch of pixels is one column, Linear(patch pixels -> e) shared by all
               patches (the paper's linear patch encoder), its index embedding marks its position
    8 layers   ABD, ABA, ABD, ... : ABD = self-attention ACROSS ROWS on (1, n, d*e);
               ABA = self-attention across the d columns of each row on (n, d, e)
    heads      each column j: Linear(e -> width_j - 1): class logits, or one standardised value
               (a patch: its pixels, through one Linear shared by all patches)

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

(Two more deviations are training settings, see docs/npt.md: gradient clipping is
element-wise clamping in the code and norm clipping in the paper; the code does not seed torch.)

Fast. Attention goes through ``F.scaled_dot_product_attention`` (flash / memory-efficient kernels on
the GPU: no n x n matrix is materialised), unless ``attention="explicit"`` asks for the textbook
softmax(QK^T)V, or attention maps are requested (``return_attention=True``), which need the matrix.
One exception, measured (benchmarks/README.md): training on the CPU with attention dropout, where
PyTorch's fused attention falls back to its own textbook path with a slow dropout, the textbook
softmax(QK^T)V with :func:`dropout` (a faster CPU mask) runs 1.4-2x faster; it materialises the same
matrix that fallback does.
On the CPU under bf16 autocast, where autocast's choices are slow at NPT's shapes (measured, benchmarks/README.md,
"NPT at the budget ladder's sizes"): LayerNorm gets fp32 input (autocast would run it in bf16, several times
slower, and with the code's eps of 1e-12 less exact); a block narrower than NARROW_BLOCK (ABA at a small e) runs
in fp32 throughout, and heads narrower than NARROW_HEAD attend in fp32; the softmax over fewer than SHORT_ROWS
keys runs along the other axis of the transposed scores; the column heads of one output width run as one
batched product (``ColumnHeads``).
``checkpointing=True`` recomputes each block in the backward pass instead of storing its activations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
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
    ln_eps: float = 1e-12  # the code's LayerNorm epsilon; LayerNorm gets fp32 input under autocast (Block)
    # linear patch encoder (images): the first n_patches columns are patches of patch_dim pixels each,
    # embedded and decoded by one Linear shared by all patches (their index embedding tells them apart)
    n_patches: int = 0
    patch_dim: int = 0

    def __post_init__(self):
        d = len(self.cards)
        assert d >= 1, "the table needs at least one column"
        assert all(c >= 0 for c in self.cards), f"cards must be >= 0, got {self.cards}"
        assert (self.n_patches == 0) == (self.patch_dim == 0), "n_patches and patch_dim go together"
        assert self.n_patches < d and not any(self.cards[:self.n_patches]), "patch columns are numeric"
        assert self.n_layers >= 1, "n_layers must be >= 1"
        assert self.e % self.n_heads == 0, f"ABA: e={self.e} must be divisible by n_heads={self.n_heads}"
        assert (d * self.e) % self.n_heads == 0, f"ABD: d*e={d * self.e} must be divisible by n_heads"
        assert self.temperature in ("hidden", "head"), "temperature must be 'hidden' or 'head'"
        assert self.residual in ("linear", "identity"), "residual must be 'linear' or 'identity'"
        assert self.attention in ("fused", "explicit"), "attention must be 'fused' or 'explicit'"

    @property
    def d(self) -> int:
        """Columns the model attends over (a patch is one column)."""
        return len(self.cards)

    @property
    def n_values(self) -> int:
        """Width of the input table x: a patch column holds patch_dim values, any other column one."""
        return self.n_patches * self.patch_dim + self.d - self.n_patches

    def paper(self) -> "NPTConfig":
        """The same model with the paper's reading of every code-vs-paper deviation."""
        return replace(self, ln_kv=True, temperature="head", residual="identity")


# --- blocks ---------------------------------------------------------------------------------------


_INT = {2: torch.int16, 4: torch.int32, 8: torch.int64}  # a float dtype's bits, by its size in bytes
_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def dropout(x, p: float, training: bool):
    """Inverted dropout: zero each entry with probability p, scale the rest by 1 / (1 - p).

    Off the CPU (CUDA, MPS) this is ``F.dropout``. On the CPU, torch's generator (mt19937, one thread) made
    dropout's random draws 16% of a training step, so the keep-mask is ``keep_mask``'s: 16 random bits per entry
    from numpy's PCG64. Inside a compiled forward pass (``FED``, compiled.py) the masks were drawn by
    ``keep_mask`` before it, in the order the calls here need them, and are taken from there.
    """
    if not training or p == 0:
        return x
    if x.device.type != "cpu":
        return F.dropout(x, p, True)
    if FED.masks is not None:
        return x * FED.take()
    if FED.plan is not None:  # recording what a step draws (compiled.py); the step itself runs as below
        FED.plan.append((tuple(x.shape), p, x.dtype))
    return x * keep_mask(x.shape, p, x.dtype)


def keep_mask(shape, p: float, dtype):
    """:func:`dropout`'s CPU mask for a tensor of ``shape`` and ``dtype``: 0 or 1 / (1 - p) per entry.

    16 random bits per entry from numpy's PCG64 (four entries per 64-bit draw, 5x faster than torch's
    generator), seeded from torch's generator so that ``torch.manual_seed`` and a checkpoint's RNG state govern
    it: p is kept to 1 / 65,536, and the scale uses that p, so the expectation is exact. A different random
    stream from ``F.dropout``. The mask is built in numpy as bit patterns (keep x the scale's bits in the dtype):
    the same values as ``keep.to(dtype) * scale``, without torch's bool -> float conversion, the slowest part.
    """
    n, cut = math.prod(shape), round(p * 65536)
    raw = np.random.PCG64(int(torch.randint(0, 2**62, (1,)))).random_raw(-(-n // 4))
    keep = (raw.view(np.int16)[:n] >= cut - 32768).view(np.uint8)  # uniform bits; P(keep) = 1 - cut / 65536
    scale = torch.tensor(65536 / (65536 - cut), dtype=dtype)
    size = scale.element_size()
    mask = keep * _UINT[size](scale.view(_INT[size]).item())  # the scale is positive: no sign bit
    return torch.from_numpy(mask).view(dtype).view(shape)


class FedMasks:
    """The CPU dropout masks of one training step, drawn ahead of a compiled forward pass (compiled.py), where
    numpy cannot run: ``plan`` (a list while a step's draws are recorded: (shape, p, dtype) in call order, else
    None) and ``masks`` (the step's masks while its compiled pass runs, else None), taken in order by
    :func:`dropout`. Drawn in the order the eager pass draws them, from the same generator, they are the masks
    the eager pass would have used."""

    def __init__(self):
        self.plan, self.masks, self.at = None, None, 0

    def take(self):
        mask = self.masks[self.at]
        self.at += 1
        return mask


FED = FedMasks()


class Dropout(nn.Module):
    """``nn.Dropout`` with :func:`dropout`'s faster CPU mask (no parameters, so the same state_dict)."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x):
        return dropout(x, self.p, self.training)


#: Below this many keys (ABA's columns) the CPU's softmax along the last axis is several times slower per entry
#: than along another axis (torch 2.13, AVX-512: 2.7 ms against 0.75 ms forward for (455, 2, 14, 14) scores;
#: at 31 keys the last axis is the faster one), so short rows are normalised as the columns of the transpose.
SHORT_ROWS = 16

#: Heads narrower than this (ABA's: e / n_heads, 4 on every rung of the budget ladder) attend in fp32 on the CPU
#: even under autocast: their products are bound by memory, not arithmetic, and the (batch, heads, T, T) matrix
#: is then never cast (bf16 scores would be cast to fp32 for the softmax and back, a pass over it each way, in
#: both directions).
NARROW_HEAD = 16


#: A block narrower than this (ABA at a small e) runs in fp32 on the CPU even under autocast: its matrix products
#: are too narrow for bf16's kernels to gain (one core, AVX-512 + AMX: (6370 x 8) @ (8 x 32) takes 24 us in fp32,
#: 41 in bf16), and it then casts neither its weights nor its activations.
NARROW_BLOCK = 16


#: Fewer keys than this (ABA's columns, on a table of at most 10 columns) and a narrow head: a compiled CPU step
#: (compiled.py) computes the head's two products as broadcast products summed over the short axis, which inductor
#: fuses with the softmax and the dropout between them into a few loops, where torch's batched matrix product runs
#: one tiny (T x T) @ (T x 4) product per row and head. Forward and backward, 1,024 rows x heads, T keys, compiled,
#: one Zen 4 core: T = 5 to 9 1.5 to 1.8x faster, T = 11 1.03-1.06x, T = 12 and 13 0.85-0.87x (so not there), and
#: eager 0.74x at T = 9 (so never eager). The same sums in another order: the last bits differ from the eager step.
#: Concrete's 9 columns, the whole compiled step: 1.25x at e8-l2-b512, 1.12x at e8-l2, 1.05x at e16-l4
#: (benchmarks/README.md, "ABA's products over few columns").
FEW_KEYS = 11


def softmax_rows(scores):
    """softmax over the last axis of CPU scores, along the faster axis of the two for the number of keys."""
    if scores.shape[-1] < SHORT_ROWS:
        return torch.softmax(scores.transpose(-2, -1), dim=-2).transpose(-2, -1)
    return torch.softmax(scores, dim=-1)


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
            # split, not sliced: the backward writes the weight's gradient once (a concatenation), where two
            # slices' backward would zero-fill a whole-weight gradient each and add the two
            (w_q, w_kv), (b_q, b_kv) = (t.split((C, 2 * C)) for t in (self.qkv.weight, self.qkv.bias))
            q = F.linear(x_normed, w_q, b_q)
            k, v = F.linear(x_raw, w_kv, b_kv).split(C, dim=-1)
        # (B, T, C) -> (B, heads, T, C / heads)
        q, k, v = (t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in (q, k, v))
        p = self.cfg.att_dropout if self.training else 0.0
        cpu_dropout = p > 0 and q.device.type == "cpu"  # fused attention's CPU fallback is slower here (docstring)
        if self.cfg.attention == "fused" and attn_store is None and not cpu_dropout:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, scale=self.scale)
        elif (q.device.type == "cpu" and C // self.n_heads < NARROW_HEAD and T < FEW_KEYS and attn_store is None
              and torch.compiler.is_compiling()):
            with torch.autocast("cpu", enabled=False):  # see FEW_KEYS
                q, k, v = q.float() * self.scale, k.float(), v.float()
                att = torch.softmax((q.unsqueeze(-2) * k.unsqueeze(-3)).sum(-1), dim=-1)
                y = (dropout(att, p, self.training).unsqueeze(-1) * v.unsqueeze(-3)).sum(-2)
        else:  # textbook attention: materialises the (B, heads, T, T) matrix
            if q.device.type == "cpu" and C // self.n_heads < NARROW_HEAD:
                with torch.autocast("cpu", enabled=False):
                    att = softmax_rows((q.float() * self.scale) @ k.float().transpose(-2, -1))
                    v = v.float()
            else:
                att = torch.softmax((q * self.scale) @ k.transpose(-2, -1), dim=-1)
            if attn_store is not None:
                attn_store.append(att.detach())
            y = dropout(att, p, self.training) @ v
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
        self.rff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), Dropout(cfg.dropout),
                                 nn.Linear(4 * dim, dim), Dropout(cfg.dropout))
        self.drop = Dropout(cfg.dropout)

        self.fp32 = dim < NARROW_BLOCK  # on the CPU: see NARROW_BLOCK

    def forward(self, x, attn_store=None):
        if self.fp32 and x.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
            with torch.autocast("cpu", enabled=False):
                return self._forward(x.float(), attn_store)
        return self._forward(x, attn_store)

    def _forward(self, x, attn_store):
        # LayerNorm on fp32 input: CPU autocast would run it in bf16 (its kernel several times slower there)
        h = self.res(x) + self.drop(self.att(self.ln_att(x.float()), x, attn_store))
        return h + self.rff(self.ln_rff(h.float()))


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
    (same parameters, same initialisation), minus a (n, sum of widths) input tensor. Patch columns
    (images): pixels @ W_patch + mask * w_mask + b, with W_patch shared by all patches.
    """

    def __init__(self, cfg: NPTConfig):
        super().__init__()
        P, k = cfg.n_patches, cfg.patch_dim
        cards = torch.tensor(cfg.cards)
        tail = cards[P:]  # the columns after the patches, one value each
        num, cat = (tail == 0).nonzero().flatten(), (tail > 0).nonzero().flatten()
        offsets = torch.cumsum(tail[cat], 0) - tail[cat]
        self.register_buffer("num_cols", num, persistent=False)
        self.register_buffer("cat_cols", cat, persistent=False)
        self.register_buffer("cat_offsets", offsets, persistent=False)
        self.register_buffer("order", torch.argsort(torch.cat([num, cat])), persistent=False)
        self.n_patches, self.patch_dim = P, k
        d, e = cfg.d, cfg.e
        width = torch.where(cards == 0, 2, cards + 1).float()  # the paper's width_j, mask bit included
        width[:P] = k + 1
        bound = (1 / width.sqrt())[:, None]  # nn.Linear's default init, per column
        self.value = nn.Parameter((torch.rand(len(num), e) * 2 - 1) * bound[P:][num])
        self.classes = nn.Parameter((torch.rand(int(tail.sum()), e) * 2 - 1)
                                    * bound[P:][cat].repeat_interleave(tail[cat], dim=0))
        self.patch = nn.Linear(k, e, bias=False) if P else None  # the per-column bias is self.bias
        self.mask = nn.Parameter((torch.rand(d, e) * 2 - 1) * bound)
        self.bias = nn.Parameter((torch.rand(d, e) * 2 - 1) * bound)
        self.index = nn.Embedding(d, e)  # learned column-index embedding (the patch position for images)
        # learned column-type embedding; with a single type it would only duplicate the bias (code)
        self.col_type = nn.Embedding(2, e) if (len(num) or P) and len(cat) else None
        self.register_buffer("types", (cards > 0).long(), persistent=False)

    def forward(self, x, m):
        # x: (n, n_values) float, standardised values / class indices, 0 where masked;
        # m: (n, d) bool mask bit per column
        P, k = self.n_patches, self.patch_dim
        xt = x[:, P * k:]
        keep = (~m).unsqueeze(-1).to(self.bias.dtype)
        parts = []
        if len(self.num_cols):
            parts.append(xt[:, self.num_cols, None] * self.value)  # (n, d_num, e)
        if len(self.cat_cols):
            idx = xt[:, self.cat_cols].long().clamp(min=0) + self.cat_offsets  # (n, d_cat)
            parts.append(F.embedding(idx, self.classes))  # (n, d_cat, e)
        h = torch.cat(parts, 1)[:, self.order]  # back to table order
        if P:
            h = torch.cat([self.patch(x[:, :P * k].reshape(len(x), P, k)), h], 1)  # (n, P, e) first
        h = h * keep + m.unsqueeze(-1) * self.mask + self.bias + self.index.weight  # masked -> zeros
        if self.col_type is not None:
            h = h + self.col_type.weight[self.types]
        return h  # (n, d, e)


class HeadOutputs(dict):
    """{column: prediction}, as ``ColumnHeads`` gives it, plus ``groups``: the same predictions as few tensors,
    [(columns, tensor, values)] with (n, k) values of k numeric columns or (n, k, classes) logits of k categorical
    columns with as many classes, and ``values``, where those columns' values lie in the table (a device tensor),
    so that ``entry_losses`` scores a group in one operation; ``unsort``: the permutation that puts losses in the
    groups' order back in the table's (a device tensor), None when they are in it already. Both are made once,
    with the model: an index made from Python data during a step is a copy from the host, which a CUDA graph's
    capture refuses."""

    groups: list
    unsort: object = None


class ColumnHeads(nn.Module):
    """Per-column Linear(e -> width_j - 1): class logits for categorical columns, a value for numeric,
    the patch_dim pixels of a patch column (one Linear shared by all patches).

    Over all columns (training, validation) the heads of the columns with the same output width (every numeric
    column; the categorical ones with as many classes) run as one batched product of their stacked weights: a
    small table's step otherwise spends more time calling d small Linear layers (and their backward) than in
    them. The same parameters as d separate Linear layers, and the same products."""

    def __init__(self, cfg: NPTConfig):
        super().__init__()
        self.cards, self.n_patches = cfg.cards, cfg.n_patches
        self.patch = nn.Linear(cfg.e, cfg.patch_dim) if cfg.n_patches else None
        self.heads = nn.ModuleList(nn.Linear(cfg.e, max(c, 1)) for c in cfg.cards[cfg.n_patches:])
        by_width = {}
        for j in range(cfg.n_patches, len(cfg.cards)):
            by_width.setdefault(cfg.cards[j], []).append(j)
        self.groups = sorted(by_width.items())  # [(classes or 0, [columns])]
        offset = cfg.n_patches * (cfg.patch_dim - 1)  # column j >= n_patches holds the table's value j + offset
        for width, cols in self.groups:
            self.register_buffer(f"cols_{width}", torch.tensor(cols), persistent=False)
            self.register_buffer(f"values_{width}", torch.tensor(cols) + offset, persistent=False)
        order = list(range(cfg.n_patches)) + [j for _, cols in self.groups for j in cols]
        self.in_order = order == sorted(order)
        self.register_buffer("unsort", torch.argsort(torch.tensor(order)), persistent=False)

    def forward(self, h, columns=None):
        # h: (n, d, e) -> {column: (n, classes) logits, (n,) value or (n, patch_dim) pixels}
        P = self.n_patches
        out = HeadOutputs()
        out.groups = []
        every = columns is None
        columns = range(len(self.cards)) if every else columns
        patches = [j for j in columns if j < P]
        if patches:
            y = self.patch(h[:, :P])  # (n, P, patch_dim), one matmul for all patches
            out.update((j, y[:, j]) for j in patches)
        if not every:  # a few columns (prediction): their own Linear layers
            for j in columns:
                if j >= P:
                    y = self.heads[j - P](h[:, j])
                    out[j] = y if self.cards[j] else y.squeeze(-1)
            return out
        for width, cols in self.groups:
            heads = [self.heads[j - P] for j in cols]
            w = torch.stack([head.weight for head in heads])  # (k, classes or 1, e)
            b = torch.stack([head.bias for head in heads])  # (k, classes or 1)
            y = torch.einsum("nke,kce->nkc", h[:, getattr(self, f"cols_{width}")], w) + b
            if not width:
                y = y.squeeze(-1)  # (n, k) values
            out.groups.append((cols, y, getattr(self, f"values_{width}")))
            out.update((j, y[:, i]) for i, j in enumerate(cols))
        out.unsort = None if self.in_order else self.unsort
        return out


class NPT(nn.Module):
    def __init__(self, cfg: NPTConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = ColumnEmbedding(cfg)
        self.drop = Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(
            ABD(cfg.d * cfg.e, cfg) if i % 2 == 0 else ABA(cfg.e, cfg) for i in range(cfg.n_layers))
        self.heads = ColumnHeads(cfg)

    def forward(self, x, m, columns=None, return_attention=False):
        """x: (n, n_values) values, m: (n, d) bool mask bits -> {column: prediction} for ``columns``."""
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
    x: torch.Tensor  # (n, n_values) model input values
    m: torch.Tensor  # (n, d) bool mask bits
    scored: torch.Tensor  # (n, d) bool entries the loss is computed on


def spread(t, n_patches=0, patch_dim=0):
    """A per-column (n, d) tensor -> per-value (n, n_values): a patch column's entry repeated per pixel."""
    if not n_patches:
        return t
    return torch.cat([t[:, :n_patches].repeat_interleave(patch_dim, 1), t[:, n_patches:]], 1)


def corrupt(x, missing, candidates, p, cards, generator, p_random=0.1, n_patches=0, patch_dim=0):
    """BERT-style stochastic masking of a table: x (n, n_values), the masks (n, d) per column.

    ``p`` and ``cards`` are (d,) tensors on x's device (built once, so masking copies nothing from the
    host). Each candidate entry of column j is selected with probability ``p[j]``. Where ``p[j] < 1`` a
    ``p_random`` share of the selected entries is replaced by a random value (a uniform class, or
    N(0, 1) for each value) with NO mask bit; the rest are zeroed with the mask bit set. ``p[j] == 1``
    masks every candidate and replaces none (as the authors' code does for the targets). Missing
    entries are always zero with the mask bit and never scored. A patch column is one entry.
    """
    dev, shape = x.device, candidates.shape
    sel = candidates & (torch.rand(shape, generator=generator, device=dev) < p)
    zero = sel
    if p_random > 0:
        rnd = sel & (p < 1) & (torch.rand(shape, generator=generator, device=dev) < p_random)
        u = torch.rand(shape, generator=generator, device=dev)
        g = torch.randn(x.shape, generator=generator, device=dev)
        cls = torch.minimum(torch.floor(u * cards), cards - 1)
        random_value = torch.where(spread((cards > 0).expand(shape), n_patches, patch_dim),
                                   spread(cls, n_patches, patch_dim), g)
        x = torch.where(spread(rnd, n_patches, patch_dim), random_value, x)
        zero = sel & ~rnd
    m = zero | missing
    return Corrupted(torch.where(spread(m, n_patches, patch_dim), torch.zeros_like(x), x), m, sel & ~missing)


def entry_losses(out, x_true, cards, n_patches=0, patch_dim=0):
    """(n, d) per-entry loss: cross-entropy for categorical, squared error (standardised) numeric,
    mean squared error over the pixels of a patch. Columns the heads gave as groups (``HeadOutputs``) are
    scored a group at a time, the others one by one."""
    parts = []  # (n, k) losses of the patches, then of each group's columns
    if n_patches:
        pred = torch.stack([out[j] for j in range(n_patches)], 1).float()  # (n, P, patch_dim)
        pixels = x_true[:, :n_patches * patch_dim].reshape(len(x_true), n_patches, patch_dim)
        parts.append(((pred - pixels) ** 2).mean(-1))
    offset = n_patches * (patch_dim - 1)  # value index of column j >= n_patches is j + offset
    groups = getattr(out, "groups", None) or [  # one column at a time, in table order
        ([j], out[j].unsqueeze(1), slice(j + offset, j + offset + 1)) for j in range(n_patches, len(cards))]
    for group, y, where in groups:  # y: (n, k) values or (n, k, classes) logits of the columns ``group``
        values = x_true[:, where]
        if cards[group[0]]:  # missing entries (-1 codes) are never scored
            parts.append(F.cross_entropy(y.float().transpose(1, 2), values.long().clamp(min=0), reduction="none"))
        else:
            parts.append((y.float() - values) ** 2)
    losses = torch.cat(parts, 1)
    unsort = getattr(out, "unsort", None)
    return losses if unsort is None else losses.index_select(1, unsort)  # back to table order


def step_loss(out, x_true, scored, cards, n_patches, patch_dim, w_target, w_feature):
    """A training step's loss: ``w_target`` times the mean loss of the scored target entries plus ``w_feature``
    times that of the scored feature entries; the feature term is left out when ``w_feature`` is the number 0 (a
    tensor weight, graphed or compiled, keeps it: its value may go to 0 later)."""
    import torch

    t = len(cards) - 1
    losses = entry_losses(out, x_true, cards, n_patches, patch_dim)
    loss = w_target * masked_mean(losses[:, t], scored[:, t])
    if torch.is_tensor(w_feature) or w_feature > 0:
        loss = loss + w_feature * masked_mean(losses[:, :t], scored[:, :t])
    return loss


def masked_mean(losses, scored):
    """Mean over the scored entries (0 when none), without a host sync."""
    s = scored.to(losses.dtype)
    return (losses * s).sum() / s.sum().clamp(min=1)
