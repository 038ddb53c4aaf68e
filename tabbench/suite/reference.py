"""The field reference table of suites/README.md (``tabbench schema --markdown``), generated from the
declaration's JSON Schema: one table per registered data source, as the schema's dataset entries are."""

from __future__ import annotations

import json

from tabbench.suite.declaration import _Dataset, suite_model
from tabbench.suite.errors import dataset_entries, deref, describe, schema_of


def reference_markdown(plugin_files=()) -> str:
    """The field reference table of suites/README.md, generated from the declaration."""
    schema = schema_of(suite_model(plugin_files))
    defs = schema["$defs"]
    entries = dataset_entries(schema["properties"]["datasets"]["items"], schema)  # the data sources, then catalogue
    order = list(entries)
    common = set(_Dataset.model_fields)
    sections = [("suite (top level)", schema, None), ("`budget`", defs["BudgetSection"], None),
                ("`published[]`, an entry that is not a plain file", defs["PublishedEntry"], None),
                ("`datasets[]`, every source", entries[order[0]], common)]
    sections += [(f"`datasets[]` with `source: {source}`", entries[source], set(entries[source]["properties"]) - common)
                 for source in order]
    sections += [("`datasets[].split`", defs["Split"], None), ("`models.<method>`", defs["Model"], None),
                 ("`models.<method>.configs.<name>`", defs["Config"], None)]
    lines = []
    for title, node, only in sections:
        lines += [f"{title}:", "", "| field | expects | default | meaning |", "|---|---|---|---|"]
        required = set(node.get("required", ()))
        for key, prop in node["properties"].items():
            if only is not None and key not in only:
                continue
            what = describe(prop, schema)
            default = "required" if key in required else f"`{json.dumps(prop.get('default'))}`"
            lines.append(f"| `{key}` | {what} | {default} | {prop.get('description') or deref(prop, schema).get('description', '')} |")
        lines.append("")
    return "\n".join(lines)
