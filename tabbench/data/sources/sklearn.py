"""Source ``sklearn``: the datasets scikit-learn ships, read with no download."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tabbench.data.source import BUNDLED, DataSource, Location
from tabbench.data.types import RawTable

SETS = ("breast_cancer", "diabetes", "wine", "digits", "iris")


class Sklearn(DataSource):
    """A dataset scikit-learn ships (no download)."""

    name = "sklearn"

    id: Literal[SETS] = Field(description="sklearn: the bundled set")

    def load(self, cfg, paths) -> RawTable:
        import pandas as pd
        import sklearn.datasets

        bunch = getattr(sklearn.datasets, f"load_{self.id}")(as_frame=True)
        frame = bunch.frame.copy()
        if self.id in ("breast_cancer", "wine", "iris"):  # store class names, not codes, as the labels
            frame["target"] = pd.Categorical.from_codes(frame["target"], list(bunch.target_names)).astype(str)
        return RawTable(frame, default_target="target", origin=f"sklearn.datasets.load_{self.id}")

    def locate(self, cfg, paths) -> Location:
        return Location(BUNDLED, note=f"bundled with scikit-learn (load_{self.id})")

    def describe(self) -> str:
        return f"sklearn {self.id}"
