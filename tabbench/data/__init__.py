"""The data layer: sources and formats -> typed Dataset -> fixed, fingerprinted splits."""

from tabbench.data.dataset import Dataset, DataError, load_dataset
from tabbench.data.splits import Split, make_splits

__all__ = ["Dataset", "DataError", "Split", "load_dataset", "make_splits"]
