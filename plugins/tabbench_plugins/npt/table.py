"""NPT's table: the rows a fit encodes, on the device, and the forward pass that reads them as context.

NPT predicts a row by attending to the other rows of its input (docs/npt.md), so what it runs on is not a
batch of independent rows but a table: the training rows (and, transductive, the validation and test rows'
features, targets masked), to which rows to predict are appended. Everything that knows how that table is
laid out lives here, behind a public face that the training loop (training.py) and the estimator's
``fit``/``predict`` use, as nanoGPT's train.py uses its model only through ``model(X, Y)``:

    Encoder            a frame's rows as model input: standardised numbers, class codes, patches, the
                       target last (``encode``), and the model's outputs back as predictions (``decode``)
    Table              the encoded rows on the device, labelled rows first; the validation rows
      batching         the training batches of an epoch (``epoch``); the chunks of an evaluation pass
                       (``eval_chunks``, ``eval_batches``)
      forward          the target column's outputs with the table as context (``target_outputs``); the
                       validation loss (``validation_loss``); a frame's outputs (``outputs``) and a row's
                       with another table as its context (``context_outputs``)

The model is an argument of every forward pass, not part of the table: a budget curve's snapshot
(``NPT.at_budget``) is the same table read with other weights.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from tabbench.preprocess import TargetScaler
from tabbench.spec import CATEGORICAL
from tabbench_plugins.torch_training import bf16_autocast

from tabbench_plugins.npt.cost import eval_chunks, n_batches
from tabbench_plugins.npt.model import spread


# --- encoding ---------------------------------------------------------------------------------------


@dataclass(eq=False)
class Encoder:
    """How a frame's rows become the model's input, fitted on the rows of a fit.

    ``mean``/``scale``: each numeric column's (by position), over the training rows, or over all of the
    table's rows when transductive (as the authors' code does); ``y_scaler``: the regression target's, over
    the training rows; ``patch_order``: with patches, the (n_patches, patch_dim) pixel columns of each."""

    meta: object  # tabbench.spec.DatasetMeta
    mean: dict
    scale: dict
    y_scaler: TargetScaler | None
    patch_order: np.ndarray | None

    @classmethod
    def fit(cls, meta, frames, y, patch_order=None) -> "Encoder":
        """Standardisation over the rows of ``frames``; the target's scaler over ``y`` (regression)."""
        mean, scale = {}, {}
        for j, col in enumerate(meta.columns):
            if col.kind != CATEGORICAL:
                v = np.concatenate([f[col.name].to_numpy(dtype=np.float64) for f in frames])
                with np.errstate(all="ignore"):
                    finite = np.isfinite(v).any()
                    mu, sd = (np.nanmean(v), np.nanstd(v)) if finite else (0.0, 1.0)
                mean[j] = mu if np.isfinite(mu) else 0.0
                scale[j] = sd if np.isfinite(sd) and sd > 0 else 1.0
        y_scaler = None if meta.is_classification else TargetScaler().fit(np.asarray(y, dtype=np.float64))
        return cls(meta, mean, scale, y_scaler, patch_order)

    @property
    def n_patches(self) -> int:
        return 0 if self.patch_order is None else len(self.patch_order)

    @property
    def patch_dim(self) -> int:
        return 0 if self.patch_order is None else self.patch_order.shape[1]

    @property
    def cards(self) -> tuple:
        """Per column of the model's input, the target's last: classes of a categorical, 0 for a number."""
        meta = self.meta
        if self.n_patches:
            cards = (0,) * self.n_patches
        else:
            cards = tuple(max(len(c.categories), 1) if c.kind == CATEGORICAL else 0 for c in meta.columns)
        return cards + ((meta.n_classes,) if meta.is_classification else (0,))

    def encode(self, X, y=None):
        """(n, n_values) float32 values and an (n, d) bool missing mask; the target is the last column.
        With patches the pixel columns come first in patch order and a patch is missing when all its
        pixels are (a missing pixel of a patch otherwise reads as the column mean)."""
        cols, missing = [], []
        for j, col in enumerate(self.meta.columns):
            if col.kind == CATEGORICAL:
                codes = X[col.name].cat.codes.to_numpy().astype(np.float64)
                miss = codes < 0
            else:
                v = X[col.name].to_numpy(dtype=np.float64)
                miss = np.isnan(v)
                codes = (v - self.mean[j]) / self.scale[j]
            cols.append(np.where(miss, 0.0, codes))
            missing.append(miss)
        n = len(X)
        if y is None:
            cols.append(np.zeros(n))
            missing.append(np.zeros(n, dtype=bool))
        else:
            y = np.asarray(y)
            cols.append(y.astype(np.float64) if self.meta.is_classification else self.y_scaler.transform(y))
            missing.append(np.zeros(n, dtype=bool))
        x, miss = np.stack(cols, 1).astype(np.float32).reshape(n, len(cols)), np.stack(missing, 1).reshape(n, len(cols))
        if self.n_patches:
            order = self.patch_order
            x = np.concatenate([x[:, order.reshape(-1)], x[:, -1:]], 1)
            miss = np.concatenate([miss[:, order].all(-1), miss[:, -1:]], 1)
        return x, miss

    def decode(self, out) -> np.ndarray:
        """Target outputs (a device tensor) as predictions: class probabilities (softmax in float64, so that
        they sum to 1), or values in the target's units."""
        if self.meta.is_classification:
            return out.double().softmax(-1).cpu().numpy()
        return self.y_scaler.inverse_transform(out.double().cpu().numpy())

    @staticmethod
    def row_keys(x, m):
        """One key per encoded row, its features only (values and missing bits, not the target): equal
        keys = rows the model cannot tell apart. Bytes, so that a lookup is exact (no collisions)."""
        features = np.ascontiguousarray(x[:, :-1])
        missing = np.ascontiguousarray(m[:, :-1])
        return [a.tobytes() + b.tobytes() for a, b in zip(features, missing)]


# --- the order of rows in batches --------------------------------------------------------------------


def row_order(y, g, n_classes: int = 0):
    """A random order of rows with labels ``y`` (a device tensor), drawn from ``g``; with ``n_classes``
    class-stratified: every chunk of the order keeps the class proportions. Built on the device: nothing
    comes back to the host."""
    n = len(y)
    perm = torch.randperm(n, generator=g, device=y.device)
    if not n_classes:
        return perm
    yp = y[perm].long()
    onehot = torch.nn.functional.one_hot(yp, n_classes)
    rank = (onehot.cumsum(0) * onehot).sum(1) - 1  # position of each row within its class
    count = onehot.sum(0)[yp]
    key = (rank + torch.rand(n, generator=g, device=y.device)) / count
    return perm[torch.argsort(key)]


# --- the table --------------------------------------------------------------------------------------


@dataclass(eq=False)
class Table:
    """The encoded table on the device (``x``, ``m``: values and mask bits, labelled rows first, then the
    unlabelled ones, whose targets are masked), the validation rows, and how the table is batched and read.
    Made by ``Table.fit``; see the module docstring for its public face."""

    encoder: Encoder
    x: torch.Tensor  # (n, d) values, the target last
    m: torch.Tensor  # (n, d) mask bits: missing, or a target not to be seen
    n_labelled: int  # the first n_labelled rows carry their target
    device: torch.device
    amp: bool  # forward passes under bf16 autocast
    seed: int  # the fixed order of evaluation chunks is drawn from seed + 1
    batch_size: object  # the param: "auto", None (the whole table) or rows
    eval_batch_size: object  # the param: None (as batch_size) or rows
    stratified: bool  # class-stratified training batches
    context_labels: bool  # evaluation shows the labelled rows' targets as context
    transductive: bool = False
    x_val: torch.Tensor | None = None  # the validation rows, encoded with their targets (to score them)
    m_val: torch.Tensor | None = None
    val_rows: torch.Tensor | None = None  # transductive: where the validation rows are in the table
    unlabelled_rows: dict = dataclasses.field(default_factory=dict)  # row key -> index of an unlabelled row

    @classmethod
    def fit(cls, meta, X, y, X_val=None, y_val=None, X_unlabelled=None, *, transductive: bool, patch_order,
            device, amp: bool, seed: int, batch_size, eval_batch_size, stratified: bool,
            context_labels: bool) -> "Table":
        """The table of a fit: the training rows, then (transductive) the validation rows and
        ``X_unlabelled``, whose targets are missing (zero, mask bit set, never scored); the validation rows
        on their own, with their targets, to score them. The encoder is fitted on the table's rows
        (``Encoder.fit``); the keywords are the fields of the same names."""
        unlabelled = [f for f in (X_val, X_unlabelled) if f is not None and len(f)] if transductive else []
        encoder = Encoder.fit(meta, [X, *unlabelled], y, patch_order)
        blocks = [encoder.encode(X, y)]
        for frame in unlabelled:
            xu, mu = encoder.encode(frame)
            mu[:, -1] = True
            blocks.append((xu, mu))
        n_labelled = len(X)
        x = np.concatenate([b[0] for b in blocks])
        m = np.concatenate([b[1] for b in blocks])
        # the unlabelled rows by content, so that predict finds them in any order (see ``outputs``)
        rows = {}
        for i, key in enumerate(encoder.row_keys(x[n_labelled:], m[n_labelled:]), n_labelled):
            rows.setdefault(key, i)
        table = cls(encoder, torch.from_numpy(x).to(device), torch.from_numpy(m).to(device), n_labelled, device, amp,
                    seed, batch_size, eval_batch_size, stratified, context_labels, transductive, unlabelled_rows=rows)
        if X_val is not None and len(X_val) > 0:
            xv, mv = encoder.encode(X_val, y_val)
            table.x_val, table.m_val = torch.from_numpy(xv).to(device), torch.from_numpy(mv).to(device)
            table.val_rows = (torch.arange(len(xv), device=device) + n_labelled) if transductive else None
        return table

    def with_rows(self, x, m, n_labelled: int) -> "Table":
        """This table's settings over other encoded rows (labelled rows first): a row's context in place of
        the fitted table (``context_outputs``)."""
        return dataclasses.replace(self, x=x, m=m, n_labelled=n_labelled)

    def __len__(self) -> int:
        return len(self.x)

    @property
    def has_val(self) -> bool:
        return self.x_val is not None

    @property
    def n_val(self) -> int:
        return len(self.x_val) if self.has_val else 0

    @property
    def cards(self) -> tuple:
        return self.encoder.cards

    @property
    def n_patches(self) -> int:
        return self.encoder.n_patches

    @property
    def patch_dim(self) -> int:
        return self.encoder.patch_dim

    def autocast(self, cache: bool = True):
        """The autocast every forward pass over this table runs under (bf16 when ``amp``)."""
        return bf16_autocast(self.device.type, self.amp, cache=cache)

    # --- batches ------------------------------------------------------------------------------------

    @property
    def batches_per_epoch(self) -> int:
        """Training batches in one pass over the table (``cost.n_batches``); 1: the whole table."""
        return n_batches(len(self), self.batch_size)

    def _order(self, g):
        """A random order of the table's rows: the labelled rows (class-stratified when ``stratified``),
        then the unlabelled ones. Returns the two orders; chunks take a share of each. On the device."""
        n_lab = self.n_labelled
        lab = row_order(self.x[:n_lab, -1], g, self.encoder.meta.n_classes if self.stratified else 0)
        unl = n_lab + torch.randperm(len(self) - n_lab, generator=g, device=self.device)
        return lab, unl

    def _chunks(self, n_b, g, *extra):
        """n_b index batches over the table (every batch holds labelled and unlabelled rows in the
        proportion of their totals), zipped with ``extra`` tensors split the same way."""
        lab, unl = self._order(g)
        parts = [torch.tensor_split(t, n_b) for t in (lab, unl, *extra)]
        return [(torch.cat([a, b]), *rest) for a, b, *rest in zip(*parts)]

    def epoch(self, g):
        """The training batches of one epoch, drawn from ``g``: index tensors, or [None] for the whole table."""
        n_b = self.batches_per_epoch
        return [b[0] for b in self._chunks(n_b, g)] if n_b > 1 else [None]

    def eval_chunks(self, n_q: int) -> int:
        """How many chunks a forward pass over the table plus ``n_q`` query rows is split into."""
        return eval_chunks(len(self) + n_q, self.eval_batch_size, self.batch_size)

    def eval_batches(self, n_q: int):
        """(context rows, query rows) index batches of an evaluation pass; fixed, so predict is deterministic."""
        chunks = self.eval_chunks(n_q)
        q = torch.arange(n_q, device=self.device)
        if chunks == 1:
            return [(torch.arange(len(self), device=self.device), q)]
        g = torch.Generator(device=self.device).manual_seed(self.seed + 1)
        return self._chunks(chunks, g, q)

    # --- forward passes with the table as context -----------------------------------------------------

    def target_outputs(self, model, xq=None, mq=None, rows=None):
        """Target-column outputs of ``model``, the table as context: for query rows appended to it (xq, mq
        on the device), or for the table's own unlabelled rows ``rows`` (transductive)."""
        t = len(self.cards) - 1
        n_out = self.encoder.meta.n_classes or 1
        xq = self.x[:0] if xq is None else xq
        mq = self.m[:0] if mq is None else mq
        outs = []
        table_out = None if rows is None else torch.empty(len(self), n_out, device=self.device)
        for ci, qi in self.eval_batches(len(xq)):
            if table_out is None and not len(qi):  # a chunk holding no query row (one row probed): nothing to read
                continue
            x = torch.cat([self.x[ci], xq[qi]])
            m = torch.cat([self.m[ci], mq[qi]])
            m[len(ci):, t] = True  # query targets are never visible
            if not self.context_labels:
                m[:, t] = True
            x = torch.where(spread(m, self.n_patches, self.patch_dim), torch.zeros_like(x), x)
            with self.autocast():
                y = model(x, m, columns=[t])[t].float()
            y = y.reshape(len(x), -1)
            if table_out is None:
                outs.append(y[len(ci):])
            else:  # the table's own rows are asked for: keep the context rows' outputs
                table_out[ci] = y[:len(ci)]
        out = torch.cat(outs) if table_out is None else table_out[rows]
        return out if self.encoder.meta.is_classification else out[:, 0]

    def validation_loss(self, model):
        """Loss of the validation rows' targets, predicted with the training rows as context."""
        if self.transductive:
            pred = self.target_outputs(model, rows=self.val_rows)
        else:
            pred = self.target_outputs(model, self.x_val, self.m_val)
        if self.encoder.meta.is_classification:
            return torch.nn.functional.cross_entropy(pred, self.x_val[:, -1].long())
        return ((pred - self.x_val[:, -1]) ** 2).mean()

    def outputs(self, model, X):
        """Target outputs for the rows of X, the table as context.

        Inductive: X's rows are appended to the table, targets masked. Transductive: a row of X whose
        features equal one of the table's unlabelled rows (validation and ``X_unlabelled``, matched by
        content, in any order, duplicates included) is that row: its output is read from the table, so
        the prediction does not depend on X's order or on which other rows X holds. A row the table
        does not hold (or that matches a labelled training row) is appended as a new row, as inductive
        prediction does, with a warning that says how many.
        """
        xq, mq = self.encoder.encode(X)
        dev = self.device
        found = np.full(len(xq), -1)
        if self.transductive:
            found = np.array([self.unlabelled_rows.get(k, -1) for k in self.encoder.row_keys(xq, mq)],
                             dtype=np.int64)
        new = np.flatnonzero(found < 0)
        if self.transductive and len(new):
            warnings.warn(f"npt (transductive): {len(new)} of the {len(xq)} rows to predict are not among the "
                          f"table's unlabelled rows given to fit; they are predicted as new rows appended to the "
                          f"table (inductively), the other {len(xq) - len(new)} from the table", stacklevel=3)
        with torch.no_grad():
            if len(new) == len(xq):
                return self.target_outputs(model, torch.from_numpy(xq).to(dev), torch.from_numpy(mq).to(dev))
            out = self.target_outputs(model, rows=torch.from_numpy(found).to(dev).clamp(min=0))
            if len(new):
                out[torch.from_numpy(new).to(dev)] = self.target_outputs(
                    model, torch.from_numpy(xq[new]).to(dev), torch.from_numpy(mq[new]).to(dev))
            return out

    def context_outputs(self, model, X, context_X, context_y):
        """Target outputs for row i of X with block i of the context as the table in place of this one
        (``NPT.predict_with_context``): the block's labelled rows (finite ``context_y``) are the table's
        labelled rows, its NaN-target rows its unlabelled ones, and row i is appended as a query with its
        target masked, as ``outputs`` appends a row inductively."""
        n = len(context_X) // len(X)
        assert n * len(X) == len(context_X) == len(context_y), (
            f"npt: context of {len(context_X)} rows is not {len(X)} blocks of equal size")
        unlabelled = np.isnan(context_y)
        xc, mc = self.encoder.encode(context_X, np.where(unlabelled, 0.0, context_y))
        xc[unlabelled, -1] = 0.0
        mc[unlabelled, -1] = True
        xq, mq = self.encoder.encode(X)
        dev, out = self.device, []
        with torch.no_grad():
            for i in range(len(X)):
                block = slice(i * n, (i + 1) * n)
                order = np.argsort(unlabelled[block], kind="stable")  # labelled rows first, as in the table
                table = self.with_rows(torch.from_numpy(xc[block][order]).to(dev),
                                       torch.from_numpy(mc[block][order]).to(dev),
                                       int((~unlabelled[block]).sum()))
                out.append(table.target_outputs(model, torch.from_numpy(xq[i:i + 1]).to(dev),
                                                torch.from_numpy(mq[i:i + 1]).to(dev)))
        return torch.cat(out)

