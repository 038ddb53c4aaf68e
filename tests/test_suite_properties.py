"""Property: any document either parses into a Suite or raises the documented SuiteError."""

import copy

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabbench.suite import Suite, SuiteError, load_suite, parse_suite

VALID = {
    "name": "p",
    "seeds": [0, 1],
    "budget": {"time_s": 60},
    "datasets": [
        {"name": "wine", "source": "sklearn", "id": "wine", "split": {"protocol": "kfold", "k": 5, "folds": [0]}},
        {"name": "c", "source": "file", "path": "x.txt", "format": "whitespace", "target": -1,
         "categorical": [0], "split": {"protocol": "fixed", "test_rows": 10}},
        {"name": "o", "source": "openml", "task_id": 1882, "split": {"protocol": "openml_task"}},
    ],
    "models": {"knn": {"params": {"n_neighbors": 3}}, "v": {"model": "knn", "tuning": "random", "n_trials": 2}},
}

scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 12), st.floats(allow_nan=True), st.text(max_size=8),
                    st.sampled_from(["kfold", "sklearn", "file", "openml", "url", "auto", "grid", "wine", "k"]))
documents = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.one_of(st.text(max_size=8), st.integers()), inner, max_size=4)),
    max_leaves=20)


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, prefix + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _paths(value, prefix + (i,))


ALL_PATHS = [p for p in _paths(VALID) if p]


def _parse(raw):
    try:
        assert isinstance(parse_suite(raw, "s.yaml"), Suite)
    except SuiteError as err:
        assert str(err).startswith("s.yaml: ")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_arbitrary_documents_load_or_raise_suite_error(raw):
    _parse(raw)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(ALL_PATHS), documents)
def test_a_valid_suite_with_any_one_field_replaced_loads_or_raises_suite_error(path, value):
    raw = copy.deepcopy(VALID)
    node = raw
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    _parse(raw)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_files_load_or_raise_suite_error(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("s") / "s.yaml"
    path.write_text(text)
    try:
        load_suite(path)
    except SuiteError as err:
        assert str(err).startswith(str(path))


def test_the_valid_document_is_valid():
    suite = parse_suite(yaml.safe_load(yaml.safe_dump(VALID)), "s.yaml")
    assert [d.name for d in suite.datasets] == ["wine", "c", "o"]
