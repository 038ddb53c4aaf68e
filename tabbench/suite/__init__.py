"""Suites: YAML files naming datasets (with split protocols), models (with params, variants and tuning),
seeds and per-job budgets. One module per job:

- types.py: what the rest of tabbench reads (``Suite``, ``ModelEntry``, ``Budget``) and ``SuiteError``;
- declaration.py: the format, declared once as pydantic models, and its JSON Schema;
- errors.py: a validation error in the suite's own words (file, field path, expectation, did-you-mean);
- load.py: ``load_suite`` / ``parse_suite`` (YAML -> declaration -> types) and ``check_models`` (the registry);
- reference.py: the field reference of suites/README.md, generated from the declaration;
- columns.py: ``check_split_columns``, the data check of grouped and temporal splits (``tabbench validate``).
"""

from tabbench.suite.columns import check_split_columns
from tabbench.suite.declaration import json_schema, schema_text
from tabbench.suite.load import check_models, load_suite, parse_suite
from tabbench.suite.reference import reference_markdown
from tabbench.suite.types import (NAME_PATTERN, NAME_RULE, TUNING, Budget, ModelEntry, NamedConfig, Suite,
                                  SuiteError)

__all__ = ["NAME_PATTERN", "NAME_RULE", "TUNING", "Budget", "ModelEntry", "NamedConfig", "Suite", "SuiteError",
           "check_models", "check_split_columns", "json_schema", "load_suite", "parse_suite", "reference_markdown", "schema_text"]
