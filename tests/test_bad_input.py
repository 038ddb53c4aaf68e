"""Bad data gets a clear error naming the dataset, file or column and what would fix it, before any job runs."""

import gzip

import pytest

from tabbench.data.cache import DataPaths
from tabbench.data.dataset import DataError, DatasetConfig, load_dataset
from tabbench.data.formats import FormatError
from tabbench.data.source import SourceError
from tabbench.data.sources.file import File
from tabbench.run.runner import RunError, RunOptions, run_suite
from tabbench.store import Store
from tabbench.suite import parse_suite


@pytest.fixture
def concrete_lines(shared):
    return [line for line in (shared / "uci/concrete/concrete.txt").read_text().splitlines() if line.strip()]


def _write(tmp_path, lines, name="concrete.txt"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def _load(path, paths, **kw):
    return load_dataset(DatasetConfig("concrete", File(path=str(path)), format="whitespace", **kw), paths)


def test_missing_file_names_the_path_and_where_it_looked(paths):
    with pytest.raises(SourceError, match=r"path: file 'uci/nowhere.txt' not found \(looked in: .*\); fix the path"):
        load_dataset(DatasetConfig("x", File(path="uci/nowhere.txt")), paths)


def test_empty_file(tmp_path, paths):
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(FormatError, match=r"empty.csv: the file is empty"):
        load_dataset(DatasetConfig("x", File(path=str(tmp_path / "empty.csv"))), paths)


def test_corrupt_gzip_names_the_file(tmp_path, paths, shared):
    bad = tmp_path / "concrete.txt.gz"
    bad.write_bytes(gzip.compress((shared / "uci/concrete/concrete.txt").read_bytes())[:300])  # cut short
    with pytest.raises(FormatError, match=r"concrete.txt.gz: cannot be read as whitespace .*replace a corrupt file"):
        _load(bad, paths)


def test_wrong_column_count(paths, shared):
    with pytest.raises(FormatError, match=r"the suite names 3 columns but the file has 9"):
        _load(shared / "uci/concrete/concrete.txt", paths, columns=("a", "b", "c"))


def test_ragged_rows(tmp_path, paths, concrete_lines):
    lines = concrete_lines[:50] + [concrete_lines[50] + " 1.0 2.0"] + concrete_lines[51:]
    with pytest.raises(FormatError, match=r"concrete.txt: cannot be read as csv \(ParserError: .*Expected 9 fields in line 51, saw 11\)"):
        load_dataset(DatasetConfig("c", File(path=str(_write(tmp_path, lines))), format="csv", sep=r"\s+"), paths)


def test_missing_target_column_lists_the_columns(paths, shared):
    with pytest.raises(DataError, match=r"target column 'strength' not found; columns are: col0, col1"):
        _load(shared / "uci/concrete/concrete.txt", paths, target="strength")


def test_single_class_target(tmp_path, paths, concrete_lines):
    lines = [line.rsplit(None, 1)[0] + " 1" for line in concrete_lines]
    with pytest.raises(DataError, match=r"target 'col8' has a single class \('1'\)"):
        _load(_write(tmp_path, lines), paths, task="binary")


def test_constant_regression_target(tmp_path, paths, concrete_lines):
    lines = [line.rsplit(None, 1)[0] + " 42.0" for line in concrete_lines]
    with pytest.raises(DataError, match=r"regression target 'col8' is constant \(42\)"):
        _load(_write(tmp_path, lines), paths, task="regression")


def test_all_missing_column(tmp_path, paths, concrete_lines):
    lines = [" ".join(["?"] + line.split()[1:]) for line in concrete_lines]
    with pytest.raises(DataError, match=r"column\(s\) \['col0'\] hold no value at all; add them to the dataset's 'drop' list"):
        _load(_write(tmp_path, lines), paths, na_values=("?",))


@pytest.mark.parametrize("n_rows", [99, 100, 1030])
def test_one_stray_string_in_a_numeric_column_is_an_error_whatever_the_file_size(tmp_path, paths, concrete_lines,
                                                                                    n_rows):
    # 1% of 99 rows is under one row: a share alone let a small file's typo make a categorical column silently
    lines = concrete_lines[:n_rows]
    lines[3] = " ".join(["x"] + lines[3].split()[1:])
    with pytest.raises(DataError, match=r"column 'col0' is numeric but row 3 holds 'x'; add that marker to na_values"):
        _load(_write(tmp_path, lines), paths)


def test_a_mostly_numeric_column_read_as_categorical_warns_naming_it_and_its_strings(tmp_path, paths, concrete_lines):
    lines = concrete_lines[:99]
    for row, typo in ((3, "x"), (10, "unknown"), (40, "x")):
        lines[row] = " ".join([typo] + lines[row].split()[1:])
    with pytest.warns(UserWarning, match=r"column 'col0' is read as categorical \(\d+ levels\) though 96 of its 99 "
                                         r"values are numbers; the others are 'unknown', 'x'\. If it is numeric, add"):
        dataset = _load(_write(tmp_path, lines), paths)
    assert dict((c.name, c.kind) for c in dataset.meta.columns)["col0"] == "categorical"


def test_infinite_value(tmp_path, paths, concrete_lines):
    lines = list(concrete_lines)
    lines[7] = " ".join(["inf"] + lines[7].split()[1:])
    with pytest.raises(DataError, match=r"column 'col0' holds an infinite value at row 7"):
        _load(_write(tmp_path, lines), paths)


def test_bad_data_fails_the_run_before_any_job_and_keeps_earlier_records(tmp_path, shared, concrete_lines):
    lines = list(concrete_lines)
    lines[3] = " ".join(["oops"] + lines[3].split()[1:])
    bad = _write(tmp_path, lines)
    raw = {"name": "bad", "datasets": [
        {"name": "diabetes", "source": "sklearn", "id": "diabetes", "split": {"protocol": "holdout"}},
        {"name": "concrete", "source": "file", "path": str(bad), "format": "whitespace", "split": {"protocol": "holdout"}}],
        "models": {"knn": {}}}
    store = Store(tmp_path / "results" / "bad")
    store.append({"key": "earlier", "status": "ok"})
    with pytest.raises(RunError, match=r"bad.yaml: dataset 'concrete': .*column 'col0' is numeric but row 3 holds 'oops'"):
        run_suite(parse_suite(raw, tmp_path / "bad.yaml"), RunOptions(results=tmp_path / "results", progress=False))
    assert [r["key"] for r in store.records()] == ["earlier"]  # nothing ran, nothing lost


def test_a_failed_download_stops_the_run_before_any_job_naming_the_url(tmp_path):
    missing = (tmp_path / "gone" / "housing.data").as_uri()
    raw = {"name": "dl", "models": {"knn": {}}, "datasets": [
        {"name": "boston", "source": "url", "url": missing, "format": "whitespace", "split": {"protocol": "holdout"}}]}
    with pytest.raises(RunError, match=r"dataset 'boston': could not download file://.*housing.data.*Put the file as "
                                       r"DIR/housing.data in a mirror folder"):
        run_suite(parse_suite(raw, tmp_path / "dl.yaml"),
                  RunOptions(results=tmp_path / "results", progress=False,
                             data_paths=DataPaths(cache=tmp_path / "cache")))
