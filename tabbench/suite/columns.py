"""The check of a suite's grouped and temporal splits (``split.group_on`` / ``split.time_on``) that
``tabbench validate`` runs: a column is only known once the data is read, so every such dataset that is here
already (bundled, local, cached or mirrored; nothing is downloaded) is loaded and split, and a missing,
constant or one-group column is a SuiteError naming the file, the dataset and the column."""

from __future__ import annotations

from tabbench.suite.types import Suite, SuiteError


def check_split_columns(suite: Suite, paths=None) -> list[str]:
    """Load and split every dataset of ``suite`` whose split has group_on or time_on and whose data is here;
    raise one SuiteError for all that fail. Returns the names of those not checked (their data is not here)."""
    from tabbench.data.cache import DataPaths
    from tabbench.data.dataset import load_dataset
    from tabbench.data.mirror import locate
    from tabbench.data.splits import make_splits, regime
    from tabbench.data.types import MISSING, REMOTE
    from tabbench.errors import TabbenchError

    paths = paths or DataPaths.from_env(base=suite.path.parent)
    errors, unchecked = [], []
    for i, cfg in enumerate(suite.datasets):
        if regime(cfg.split) is None:
            continue
        if locate(cfg, paths).kind in (REMOTE, MISSING):
            unchecked.append(cfg.name)
            continue
        try:
            dataset = load_dataset(cfg, paths)
            make_splits(dataset, dataset.split)
        except (TabbenchError, OSError, ValueError) as exc:
            field = "group_on" if cfg.split.group_on is not None else "time_on"
            where = f"datasets[{i}].split.{field}" if str(exc).startswith(f"split.{field}") else f"datasets[{i}]"
            errors.append(SuiteError(suite.path, where, f"dataset {cfg.name!r}: {exc}"))
    if errors:
        raise SuiteError(errors[0].file, errors[0].path, errors[0].message, tuple(errors[1:]))
    return unchecked
