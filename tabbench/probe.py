"""The corruption probe (NPT paper, section 4 and Table 2): how much a fitted model's test predictions rely on
the other rows.

For each test row k, every column of all OTHER rows the model reads at predict time (the target included) is
permuted independently: what those rows say about each other and about row k is destroyed, each column's
values (its marginal) are kept. Row k is then predicted again; the report is the change in the test metric
(tabbench.metrics.PRIMARY: AUROC, accuracy or RMSE, as the leaderboards use).

    fitted model ──┬── predict the test rows as fitted ─────────────────────────> metric before
                   └── for each test row k: other rows ─ permute each column ─┐
                         predict_with_context(row k, corrupted other rows) <──┘ ─> metric after

Which rows are "the other rows" is the model's: a model declaring ``ModelSpec.uses_other_rows`` (NPT, k-NN,
ModernNCA, TabR) gets them through ``predict_with_context`` (tabbench/spec.py) in place of its training rows
(a model declaring it without the method is reported as not probed):
the training rows of an inductive fit; for a transductive fit (NPT's ``transductive: true``) also the
validation rows and the other test rows, whose targets stay unseen: their features are permuted with the
training rows', and the target column is permuted among the training rows only (an unseen target carries
no information to destroy). A model that declares nothing predicts from its parameters alone: it is
predicted unchanged, and its change is exactly zero (the control).

Cost: one corrupted copy of the other rows per test row (n_test x n_other rows, built ``batch_rows`` test
rows at a time), and the model's own per-row cost (each estimator's ``predict_with_context`` states it):
k-NN one neighbour-index fit per test row; ModernNCA one embedding pass over the other rows per test row;
TabR one pytabkit predict per test row, encoding the other rows as its candidates; NPT one forward pass over
the whole table per test row.

``tabbench probe corruption SUITE`` (``probe_suite``) fits each selected job as ``tabbench run`` would
(tabbench.execute), in this process, probes it and writes corruption.csv and corruption.md into
``RESULTS/<suite>/probe-corruption/``. docs/probe.md says how to read them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from tabbench.errors import TabbenchError
from tabbench.execute import _fit, outputs, score
from tabbench.metrics import PRIMARY

#: Test rows whose corrupted contexts are built and predicted together.
BATCH_ROWS = 32

COLUMNS = ["method", "model", "dataset", "fold", "repeat", "seed", "config", "uses_other_rows", "metric",
           "before", "after", "change", "relative_change", "rows_changed", "n_test", "n_other", "fit_seconds",
           "probe_seconds", "note"]


class ProbeError(TabbenchError):
    """The probe could not start (bad selection, data or plugin); nothing was computed."""


def permute_columns(X: pd.DataFrame, y: np.ndarray, rng: np.random.Generator, target_rows=None):
    """X and y with every column permuted independently across the rows (each column's values kept, the rows'
    pairing destroyed). ``target_rows`` (bool): only these rows' targets are permuted, among themselves."""
    X = X.reset_index(drop=True)
    out = pd.DataFrame({name: X[name].iloc[rng.permutation(len(X))].reset_index(drop=True) for name in X.columns})
    y = np.array(y, dtype=np.float64)
    rows = np.arange(len(y)) if target_rows is None else np.flatnonzero(target_rows)
    y[rows] = y[rows][rng.permutation(len(rows))]
    return out, y


@dataclass
class Context:
    """The rows a fitted model reads at predict time besides the row it predicts: features, and targets as
    float64 with NaN where the model does not see it (a transductive fit's validation and test rows)."""

    X: pd.DataFrame
    y: np.ndarray
    test_position: np.ndarray | None = None  # each test row's index in X, or None when the test rows are not in it

    def others(self, k: int):
        """The context without test row k."""
        if self.test_position is None:
            return self.X, self.y
        keep = np.ones(len(self.y), dtype=bool)
        keep[self.test_position[k]] = False
        return self.X[keep], self.y[keep]


def job_context(job, X, y, split) -> Context:
    """The training rows; a transductive job's table also holds the validation and test rows, unlabelled."""
    if not job.transductive:
        return Context(X.iloc[split.train], np.asarray(y[split.train], dtype=np.float64))
    rows = np.concatenate([split.train, split.val, split.test])
    targets = np.full(len(rows), np.nan)
    targets[:len(split.train)] = y[split.train]
    start = len(split.train) + len(split.val)
    return Context(X.iloc[rows], targets, np.arange(start, start + len(split.test)))


def corrupted_outputs(estimator, X_test: pd.DataFrame, context: Context, rng: np.random.Generator,
                      batch_rows: int = BATCH_ROWS):
    """Each test row predicted by ``predict_with_context`` from its own corrupted copy of the other rows."""
    out = []
    for start in range(0, len(X_test), batch_rows):
        blocks = []
        for k in range(start, min(start + batch_rows, len(X_test))):
            X_other, y_other = context.others(k)
            blocks.append(permute_columns(X_other, y_other, rng, target_rows=~np.isnan(y_other)))
        out.append(estimator.predict_with_context(X_test.iloc[start:start + len(blocks)],
                                                  pd.concat([b[0] for b in blocks], ignore_index=True),
                                                  np.concatenate([b[1] for b in blocks])))
    return np.concatenate(out)


def probe(estimator, spec, job, meta, X, y, split, batch_rows: int = BATCH_ROWS) -> dict:
    """The test metric before and after the corruption for one fitted job (one row of the table)."""
    X_test, y_test = X.iloc[split.test], y[split.test]
    t0 = time.perf_counter()
    before = outputs(estimator, meta, X_test)
    context = job_context(job, X, y, split)
    metric, _ = PRIMARY[meta.task]
    m_before = score(meta, y_test, before)[metric]
    n_other = len(context.y) - (context.test_position is not None)
    if spec.uses_other_rows and not hasattr(estimator, "predict_with_context"):
        return {"metric": metric, "before": m_before, "after": float("nan"), "change": float("nan"),
                "relative_change": float("nan"), "rows_changed": None, "n_test": len(X_test), "n_other": n_other,
                "probe_seconds": time.perf_counter() - t0,
                "note": "reads other rows but cannot be handed others (no predict_with_context): not probed"}
    if spec.uses_other_rows:
        rng = np.random.default_rng([job.seed, job.fold, job.repeat])
        after = corrupted_outputs(estimator, X_test, context, rng, batch_rows)
        note = ""
    else:  # predicts from its parameters alone: nothing to corrupt
        after = outputs(estimator, meta, X_test)
        note = "reads no other rows (control)"
    m_after = score(meta, y_test, after)[metric]
    before, after = np.asarray(before, dtype=np.float64), np.asarray(after, dtype=np.float64)
    changed = (before != after).reshape(len(X_test), -1).any(axis=1)
    return {"metric": metric, "before": m_before, "after": m_after, "change": m_after - m_before,
            "relative_change": (m_after - m_before) / m_before if m_before else float("nan"),
            "rows_changed": int(changed.sum()), "n_test": len(X_test), "n_other": n_other,
            "probe_seconds": time.perf_counter() - t0, "note": note}


def first_trials(jobs: list) -> list:
    """One job per (method, dataset, fold, repeat, seed): the lowest trial (the untuned configuration, or the
    first of a tuned method's; probe a tuned model's chosen configuration through a suite naming it)."""
    chosen = {}
    for job in jobs:
        group = (job.method, job.dataset, job.fold, job.repeat, job.seed)
        if group not in chosen or (job.trial or 0) < (chosen[group].trial or 0):
            chosen[group] = job
    return list(chosen.values())


def probe_suite(suite, selection, results_root, paths, plugin_files=(), batch_rows: int = BATCH_ROWS,
                log=print) -> tuple[pd.DataFrame, Path]:
    """Fit and probe the selected jobs of a suite; write corruption.csv and .md; return the table and folder."""
    from tabbench.executors import _cuda_in_a_subprocess
    from tabbench.expand import expand
    from tabbench.plugins import load_models
    from tabbench.runner import _device_auto, load_data, model_refusals
    from tabbench.suite import check_models

    registry = load_models(tuple(plugin_files) + tuple(suite.plugins))
    check_models(suite, registry)
    problems = selection.problems(suite)
    if problems:
        raise ProbeError("\n".join(problems))
    loaded = load_data(suite, paths, selection.datasets)
    refusals = model_refusals(suite, registry, loaded, selection.models)
    if refusals:
        raise ProbeError("\n".join(refusals))
    gpu = _device_auto(suite, registry) and _cuda_in_a_subprocess()
    jobs = first_trials(selection.select(expand(suite, registry, loaded, gpu)))
    splits = {name: {(s.fold, s.repeat): s for s in split_list} for name, (_, _, split_list) in loaded.items()}
    rows = []
    for job in jobs:
        _, dataset, _ = loaded[job.dataset]
        split = splits[job.dataset][(job.fold, job.repeat)]
        spec = registry[job.model].spec
        estimator = spec.factory(dataset.meta, job.seed, **job.params)
        estimator.time_budget_s = job.time_budget_s
        t0 = time.perf_counter()
        _fit(estimator, job, dataset.X, dataset.y, split)
        fit_seconds = time.perf_counter() - t0
        result = probe(estimator, spec, job, dataset.meta, dataset.X, dataset.y, split, batch_rows)
        rows.append({"method": job.method, "model": job.model, "dataset": job.dataset, "fold": job.fold,
                     "repeat": job.repeat, "seed": job.seed, "config": job.config,
                     "uses_other_rows": spec.uses_other_rows, "fit_seconds": fit_seconds, **result})
        after = "not probed" if result["rows_changed"] is None else \
            f"{result['after']:.4f} ({result['change']:+.4f})"
        log(f"{job.method} on {job.dataset} fold {job.fold}: {result['metric']} {result['before']:.4f} -> {after}")
    table = pd.DataFrame(rows, columns=COLUMNS)
    out = suite.results_dir(results_root) / "probe-corruption"
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "corruption.csv", index=False)
    (out / "corruption.md").write_text(markdown(table, suite.name))
    return table, out


def markdown(table: pd.DataFrame, suite_name: str) -> str:
    """The table as Markdown, a sentence on what it measures first."""
    from tabbench.report.format import MISSING, markdown_table

    shown = table.drop(columns=["uses_other_rows", "fit_seconds"]).copy()
    shown["config"] = shown["config"].map(lambda v: MISSING if v is None or v != v else v)
    for name in ("before", "after", "change"):
        shown[name] = shown[name].map(lambda v: MISSING if v != v else f"{v:.4f}")
    shown["relative_change"] = shown["relative_change"].map(lambda v: MISSING if v != v else f"{100 * v:+.1f}%")
    shown["rows_changed"] = shown["rows_changed"].map(lambda v: MISSING if v is None or v != v else int(v))
    shown["probe_seconds"] = shown["probe_seconds"].map(lambda v: f"{v:.1f}")
    intro = (f"# Corruption probe: {suite_name}\n\nThe test metric before and after every column of the other "
             "rows is permuted independently for each test row (NPT paper, Table 2); `rows_changed`: test rows "
             "whose prediction changed. A model that reads no other rows changes by exactly zero. "
             "See docs/probe.md.\n\n")
    return intro + markdown_table(list(shown.columns), shown.astype(object).values.tolist()) + "\n"
