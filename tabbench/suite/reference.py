"""The field reference table of suites/README.md (``tabbench schema --markdown``), generated from the
declaration's JSON Schema."""

from __future__ import annotations

import json

from tabbench.suite.declaration import (CatalogueDataset, FileDataset, OpenMLDataset, RdatasetsDataset, SklearnDataset,
                                        UrlDataset, _Dataset)
from tabbench.suite.errors import cached_schema, deref, describe


def reference_markdown() -> str:
    """The field reference table of suites/README.md, generated from the declaration."""
    defs = cached_schema()["$defs"]
    common = set(_Dataset.model_fields)
    sections = [("suite (top level)", cached_schema(), None), ("`budget`", defs["BudgetSection"], None),
                ("`datasets[]`, every source", defs["SklearnDataset"], common)]
    sections += [(f"`datasets[]` with `source: {cls.model_fields['source'].annotation.__args__[0]}`",
                  defs[cls.__name__], set(cls.model_fields) - common)
                 for cls in (SklearnDataset, RdatasetsDataset, FileDataset, UrlDataset, OpenMLDataset, CatalogueDataset)]
    sections += [("`datasets[].split`", defs["Split"], None), ("`models.<method>`", defs["Model"], None),
                 ("`models.<method>.configs.<name>`", defs["Config"], None)]
    lines = []
    for title, node, only in sections:
        lines += [f"{title}:", "", "| field | expects | default | meaning |", "|---|---|---|---|"]
        required = set(node.get("required", ()))
        for key, prop in node["properties"].items():
            if only is not None and key not in only:
                continue
            what = describe(prop)
            default = "required" if key in required else f"`{json.dumps(prop.get('default'))}`"
            lines.append(f"| `{key}` | {what} | {default} | {prop.get('description') or deref(prop).get('description', '')} |")
        lines.append("")
    return "\n".join(lines)
