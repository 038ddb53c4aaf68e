"""The data layer: sources and formats -> typed Dataset -> fixed, fingerprinted splits.

Its modules import in one direction only; read them bottom-up:

1. types     plain types (DatasetConfig, SplitConfig, RawTable, Dataset) and DataError
2. images, formats  parsers for the files datasets come in
3. cache     where files live: the cache, mirror folders, checked downloads
4. sources   sklearn, file, url and openml loaders, each returning a RawTable
5. mirror    offline copies and declared stand-ins; ``load_raw`` picks where to read from
6. splits, dataset  the split protocols; the Dataset builder (and ``describe`` / ``fetch``) on top

``python -m pytest tests/test_data_layer.py`` checks that the imports (function-level ones
included) form no cycle.
"""

from tabbench.data.dataset import Dataset, DataError, load_dataset
from tabbench.data.splits import Split, make_splits

__all__ = ["Dataset", "DataError", "Split", "load_dataset", "make_splits"]
