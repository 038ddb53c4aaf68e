"""The corruption probe (NPT paper, section 4 and Table 2): how much a fitted model's test predictions rely on
the other rows.

For each test row k, every column of all OTHER rows the model reads at predict time (the target included) is
permuted independently: what those rows say about each other and about row k is destroyed, each column's
values (its marginal) are kept. Row k is then predicted again; the report is the change in the paper's test
metric (``METRIC``: accuracy for every classification task, binary included, and RMSE), and for a binary
task also the AUROC before and after (the leaderboards rank binary tasks by it).

    fitted model ──┬── predict the test rows as fitted ─────────────────────────> metric before
                   └── for each test row k: other rows ─ permute each column ─┐
                         predict_with_context(row k, corrupted other rows) <──┘ ─> metric after

Which rows are "the other rows" is the model's: a model whose estimator implements ``predict_with_context``
(tabbench.estimator.Estimator; ``ModelSpec.uses_other_rows`` reads it: NPT, k-NN, ModernNCA, TabR) gets them
through it in place of its training rows: the training rows of an inductive fit; for a transductive fit (NPT's
``transductive: true``) also the validation rows and the other test rows, whose targets stay unseen: their
features are permuted with the training rows', and the target column is permuted among the training rows only
(an unseen target carries no information to destroy). A model without the method predicts from its parameters
alone: it is predicted unchanged, and its change is exactly zero (the control).

Cost: one corrupted copy of the other rows per test row (n_test x n_other rows, built ``batch_rows`` test
rows at a time), and the model's own per-row cost (each estimator's ``predict_with_context`` states it):
k-NN one neighbour-index fit per test row; ModernNCA one embedding pass over the other rows per test row;
TabR one pytabkit predict per test row, encoding the other rows as its candidates; NPT one forward pass over
the whole table per test row.

``test_rows``: a large test part is probed on a fixed random sample of its rows (``sample_test_rows``), the same
rows before and after.

``tabbench probe corruption SUITE`` (``probe_suite``) fits each selected job as ``tabbench run`` would
(tabbench.run.execute), in this process, probes it and merges its rows into ``RESULTS/<suite>/probe-corruption/``
corruption.csv (a row replaces the one with the same ``KEY``), then writes corruption.md from the whole CSV
(tabbench/report/probe_tables.py), after each job: an interrupted probe keeps the jobs it finished.
docs/probe.md says how to read them.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from tabbench.errors import TabbenchError
from tabbench.estimator import optional
from tabbench.run.execute import _fit, fit_context, outputs, score
from tabbench.spec import BINARY, MULTICLASS, REGRESSION

#: Test rows whose corrupted contexts are built and predicted together.
BATCH_ROWS = 32

#: The paper's Table 2 metric per task: accuracy for every classification task, binary included; RMSE.
METRIC = {BINARY: "accuracy", MULTICLASS: "accuracy", REGRESSION: "rmse"}

#: Keeps the test sample's random numbers apart from the permutations' (both seeded from the job).
SAMPLE_STREAM = 1

#: A probed job in corruption.csv: a new row replaces the stored one with the same key.
KEY = ["method", "dataset", "fold", "repeat", "seed"]

COLUMNS = ["method", "model", "dataset", "fold", "repeat", "seed", "config", "uses_other_rows", "metric",
           "before", "after", "change", "relative_change", "auroc_before", "auroc_after", "rows_changed", "n_test",
           "n_test_total", "n_other", "fit_seconds", "probe_seconds", "note"]


class ProbeError(TabbenchError):
    """The probe cannot go on: a bad --test-rows, or a corruption.csv it cannot merge into. (A suite that cannot
    be prepared, as for a run, is a ``tabbench.run.runner.RunError``.)"""


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

    def of_test_rows(self, positions: np.ndarray) -> "Context":
        """The context for the test rows at ``positions`` (into the test part) only; the rows it holds are kept."""
        if self.test_position is None:
            return self
        return Context(self.X, self.y, self.test_position[positions])


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


def sample_test_rows(n_test: int, test_rows: int | None, job) -> np.ndarray:
    """Positions (into the test part, in order) of the test rows probed: all of them, or where ``test_rows`` is
    fewer, that many drawn at random from the job's seed, fold and repeat (every model of a split gets the same
    rows, and a run again gets them again)."""
    if test_rows is None or test_rows >= n_test:
        return np.arange(n_test)
    rng = np.random.default_rng([job.seed, job.fold, job.repeat, SAMPLE_STREAM])
    return np.sort(rng.choice(n_test, size=test_rows, replace=False))


def probe(estimator, spec, job, meta, X, y, split, batch_rows: int = BATCH_ROWS, test_rows: int | None = None) -> dict:
    """The test metric before and after the corruption for one fitted job (one row of the table), on all test
    rows or a sample of ``test_rows`` of them (``sample_test_rows``)."""
    sample = sample_test_rows(len(split.test), test_rows, job)
    X_test, y_test = X.iloc[split.test[sample]], y[split.test[sample]]
    t0 = time.perf_counter()
    before = outputs(estimator, meta, X_test)
    context = job_context(job, X, y, split).of_test_rows(sample)
    metric = METRIC[meta.task]
    s_before = score(meta, y_test, before)
    n_other = len(context.y) - (context.test_position is not None)
    sizes = {"n_test": len(X_test), "n_test_total": len(split.test), "n_other": n_other}
    nan = float("nan")
    if spec.uses_other_rows:
        rng = np.random.default_rng([job.seed, job.fold, job.repeat])
        after = corrupted_outputs(estimator, X_test, context, rng, batch_rows)
        note = ""
    else:  # predicts from its parameters alone: nothing to corrupt
        after = outputs(estimator, meta, X_test)
        note = "reads no other rows (control)"
    s_after = score(meta, y_test, after)
    m_before, m_after = s_before[metric], s_after[metric]
    before, after = np.asarray(before, dtype=np.float64), np.asarray(after, dtype=np.float64)
    changed = (before != after).reshape(len(X_test), -1).any(axis=1)
    return {"metric": metric, "before": m_before, "after": m_after, "change": m_after - m_before,
            "relative_change": (m_after - m_before) / m_before if m_before else nan,
            "auroc_before": s_before.get("auroc", nan), "auroc_after": s_after.get("auroc", nan),
            "rows_changed": int(changed.sum()), **sizes, "probe_seconds": time.perf_counter() - t0, "note": note}


def first_trials(jobs: list) -> list:
    """One job per (method, dataset, fold, repeat, seed): the lowest trial (the untuned configuration, or the
    first of a tuned method's; probe a tuned model's chosen configuration through a suite naming it)."""
    chosen = {}
    for job in jobs:
        group = tuple(getattr(job, name) for name in KEY)
        if group not in chosen or (job.trial or 0) < (chosen[group].trial or 0):
            chosen[group] = job
    return list(chosen.values())


def read_stored(path: Path) -> pd.DataFrame | None:
    """The rows corruption.csv at ``path`` holds (None where there is none yet), read before anything is fitted
    so that a file the probe cannot merge into stops it before the work."""
    if not path.exists():
        return None
    stored = pd.read_csv(path)
    missing = [c for c in COLUMNS if c not in stored.columns]
    if missing:
        raise ProbeError(f"{path}: no column(s) {', '.join(missing)} (written by an earlier tabbench): move it "
                         "aside and probe its jobs again")
    return stored[COLUMNS]


def merge(stored: pd.DataFrame | None, table: pd.DataFrame) -> pd.DataFrame:
    """The ``stored`` rows and ``table``'s, a row of ``table`` replacing the stored one with the same ``KEY``;
    sorted by the key."""
    if stored is not None:
        table = pd.concat([stored, table], ignore_index=True).drop_duplicates(KEY, keep="last")
    table = table.sort_values(KEY, kind="stable").reset_index(drop=True)
    return table.astype({"rows_changed": "Int64"})  # empty where not probed, a whole number elsewhere


def probe_suite(suite, selection, results_root, paths, plugin_files=(), batch_rows: int = BATCH_ROWS,
                test_rows: int | None = None, log=print, checkpoints: Path | None = None) -> tuple[pd.DataFrame, Path]:
    """Fit and probe the selected jobs of a suite; merge their rows into corruption.csv, write corruption.md from
    it; return this invocation's rows and the folder. A model that checkpoints keeps its training state where
    ``tabbench run`` keeps the job's (the suite folder's checkpoints/, or ``checkpoints``/<suite>), so an
    interrupted probe continues its fit; the state is removed once the fit is done."""
    from tabbench.published import load_published
    from tabbench.run.executors.base import cuda_in_a_subprocess
    from tabbench.run.runner import prepare_suite
    from tabbench.store import Store

    if test_rows is not None and test_rows < 1:
        raise ProbeError(f"--test-rows: expected a positive number of test rows, got {test_rows}")
    paper = next((use.path for use in suite.published if not use.declaration), None)
    published = load_published(paper) if paper else None  # the publication's own numbers: its corruption changes
    prepared = prepare_suite(suite, selection, paths, plugin_files)
    prepared.raise_unless_ready()
    registry = prepared.registry
    out = suite.results_dir(results_root) / "probe-corruption"
    store = Store(suite.results_dir(results_root), checkpoints)
    read_stored(out / "corruption.csv")  # a file the probe cannot merge into stops it here, before any fit
    gpu = prepared.device_auto and cuda_in_a_subprocess()
    jobs = first_trials(prepared.jobs(gpu))
    rows = []
    for job in jobs:
        dataset = prepared.dataset_of(job)
        split = prepared.split_of(job)
        spec = registry[job.model].spec
        estimator = spec.factory(dataset.meta, job.seed, **job.params)
        t0 = time.perf_counter()
        context = fit_context(job, store.checkpoint_dir(job.key), split=split)
        _fit(estimator, job, dataset.X, dataset.y, split, context)
        fit_seconds = time.perf_counter() - t0 + optional(estimator, "resumed_fit_seconds_")
        store.remove_checkpoint(job.key)
        resumed = optional(estimator, "info_").get("resumed_from_step")
        if resumed is not None:
            log(f"{job.method} on {job.dataset} fold {job.fold}: fit resumed from its checkpoint at step {resumed}")
        result = probe(estimator, spec, job, dataset.meta, dataset.X, dataset.y, split, batch_rows, test_rows)
        rows.append({"method": job.method, "model": job.model, "dataset": job.dataset, "fold": job.fold,
                     "repeat": job.repeat, "seed": job.seed, "config": job.config,
                     "uses_other_rows": spec.uses_other_rows, "fit_seconds": fit_seconds, **result})
        after = "not probed" if result["rows_changed"] is None else \
            f"{result['after']:.4f} ({result['change']:+.4f})"
        log(f"{job.method} on {job.dataset} fold {job.fold} ({result['n_test']} of {result['n_test_total']} test "
            f"rows): {result['metric']} {result['before']:.4f} -> {after}")
        # after every job, so an interrupted probe keeps the jobs it finished
        save(out, pd.DataFrame(rows, columns=COLUMNS), suite.name, published)
    return pd.DataFrame(rows, columns=COLUMNS), out


def save(out: Path, table: pd.DataFrame, suite_name: str, published) -> None:
    """Merge ``table`` into ``out``'s corruption.csv as it is now and rewrite the tables, under an exclusive
    ``flock`` on the folder: two probes of one suite (say, disjoint ``--folds`` on two cores) each keep the
    other's rows, where merging into the rows read at the start would drop those stored since."""
    from tabbench.report import folder_locked

    with folder_locked(out):
        write_tables(out, merge(read_stored(out / "corruption.csv"), table), suite_name, published)


def write_tables(out: Path, merged: pd.DataFrame, suite_name: str, published) -> None:
    """corruption.csv and, from it, corruption.md, each replacing its file whole: a probe killed mid-write leaves
    the previous version."""
    from tabbench.report.probe_tables import markdown

    out.mkdir(parents=True, exist_ok=True)
    for name, text in (("corruption.csv", merged.to_csv(index=False)),
                       ("corruption.md", markdown(merged, suite_name, published))):
        partial = out / f"{name}.partial"
        partial.write_text(text)
        os.replace(partial, out / name)
