"""leaderboard.tex: the leaderboard as booktabs tables for a paper.

Table 1 has the NPT paper's layout: one row per method, the mean rank ± standard error per metric
family (and the published rank beside ours when there is a published file), the best in bold. One
table per metric family then gives the test metric per dataset, mean ± standard error, the best in
bold. Subsets and stand-ins carry a mark explained under the table. The file is a fragment: a
document that says ``\\usepackage{booktabs}`` can ``\\input`` it.
"""

from __future__ import annotations

import math
import re
import string
from pathlib import Path

from tabbench.report.format import NOT_PUBLISHED_MARK, TRANSDUCTIVE_MARK

FAMILY = {"auroc": "AUROC", "accuracy": "Accuracy", "rmse": "RMSE"}
_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
            "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def escape(text) -> str:
    return "".join(_SPECIAL.get(c, c) for c in str(text))


def _number(mean, se, digits: int, bold: bool) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "--"
    body = f"{mean:.{digits}f}" + ("" if se is None or math.isnan(se) else f" \\pm {se:.{digits}f}")
    return f"$\\mathbf{{{body}}}$" if bold else f"${body}$"


def _cell(t: dict, method: str, dataset: str, bold: bool) -> str:
    """A per-dataset mean; one of fewer folds than the dataset has with its fold count (never bold)."""
    if (method, dataset) in t.get("partial", {}):
        value, value_se, ran, of = t["partial"][(method, dataset)]
        return _number(value, value_se, 3, False) + f" ({ran} of {of} folds)"
    return _number(t["mean"].loc[method, dataset], t["se"].loc[method, dataset], 3, bold)


def _tabular(spec: str, header: list, rows: list) -> list:
    """``header``: the lines above the midrule; ``rows``: lists of cells."""
    return [f"\\begin{{tabular}}{{{spec}}}", "\\toprule", *header, "\\midrule",
            *[" & ".join(row) + r" \\" for row in rows], "\\bottomrule", "\\end{tabular}"]


def _table(caption: str, label: str, body: list, notes: list) -> list:
    out = ["\\begin{table}[t]", "\\centering", f"\\caption{{{caption}}}", f"\\label{{{label}}}", "\\small", *body]
    if notes:
        out += ["", "\\smallskip", "\\footnotesize " + r" \\ ".join(notes)]
    return out + ["\\end{table}", ""]


def _marks(labels: dict) -> tuple[dict, list]:
    """A letter mark per subset or stand-in dataset, and the notes explaining each."""
    names, notes = {}, []
    for dataset, label in labels.items():
        if label == dataset:
            names[dataset] = escape(dataset)
            continue
        mark = string.ascii_lowercase[len(notes)]
        names[dataset] = f"{escape(dataset)}\\textsuperscript{{{mark}}}"
        notes.append(f"\\textsuperscript{{{mark}}}{escape(label[len(dataset):].strip(' []'))}")
    return names, notes


def latex(name: str, tables: dict, labels: dict, published=None, show=None, arena=None) -> str:
    """``tables``: leaderboard.summarise's output; ``labels``: dataset -> its label (subset named);
    ``show``: method -> its name in the Markdown tables, whose marks (leaderboard.display_names: transductive,
    not in the publication) become a dagger and a double dagger here;
    ``arena``: report.arena.aggregates' output, a table of its own after Table 1."""
    shown = show or {}
    symbols = {TRANSDUCTIVE_MARK: r"\dagger", NOT_PUBLISHED_MARK: r"\ddagger"}
    marks = {m: "".join(symbols[c] for c in name[len(m):] if c in symbols) for m, name in shown.items()}
    method_name = lambda m: escape(m) + (f"$^{{{marks[m]}}}$" if marks.get(m) else "")  # noqa: E731
    explained = {r"\dagger": r"$^\dagger$Transductive: the method's fit saw the validation and test rows' features "
                              "(never their targets); not the same comparison as an inductive method.",
                 r"\ddagger": r"$^\ddagger$Not in " + escape(published.name if published else "the publication")
                               + ": no published number or rank."}

    def mark_notes(methods) -> list:
        used = "".join(marks.get(m, "") for m in methods)
        return [text for symbol, text in explained.items() if symbol in used]

    key = re.sub(r"[^A-Za-z0-9-]+", "-", name)
    families = [(t["metric"], t) for t in tables.values()]
    # by summed mean rank, ties by name: a set's order changes with the interpreter's string hashing
    methods = sorted({m for _, t in families for m in t["ranks"].index},
                     key=lambda m: (sum(t["ranks"]["mean_rank"].get(m, len(t["ranks"])) for _, t in families), m))
    theirs = {metric: (published.ranks.get(metric, {}) if published else {}) for metric, _ in families}
    with_paper = [metric for metric, _ in families if theirs[metric]]
    header, spec, rules, column = ["Method"], "l", [], 2
    for metric, t in families:
        width = 2 if metric in with_paper else 1
        n = t["ranks"].shape[1] - 2
        title = f"{FAMILY[metric]} ({n} dataset{'s' if n != 1 else ''})"
        header.append(f"\\multicolumn{{{width}}}{{c}}{{{title}}}" if width > 1 else title)
        rules.append(f"\\cmidrule(lr){{{column}-{column + width - 1}}}")
        spec += "c" * width
        column += width
    sub = [""] + [cell for metric, _ in families for cell in (["ours", "paper"] if metric in with_paper else ["ours"])]
    rows = []
    for m in methods:
        row = [method_name(m)]
        for metric, t in families:
            ranks = t["ranks"]
            best = ranks["mean_rank"].min()
            r = ranks.loc[m] if m in ranks.index else None
            row.append(_number(r["mean_rank"], r["se"], 2, r["mean_rank"] == best) if r is not None else "--")
            if metric in with_paper:
                paper = theirs[metric]
                best_paper = min(v for v, _ in paper.values())
                value = paper.get(m)
                row.append(_number(value[0], value[1], 2, value[0] == best_paper) if value else "--")
        rows.append(row)
    names, notes = _marks(labels)
    header_rows = [" & ".join(header) + r" \\", " ".join(rules)]
    if with_paper:
        header_rows.append(" & ".join(sub) + r" \\")
    body = _tabular(spec, header_rows, rows)
    caption = ("Mean rank $\\pm$ standard error over datasets per metric family (lower is better; best in bold)"
               + (f"; paper: {escape(published.name)}, over its own datasets" if with_paper else "") + ".")
    out = [f"% {name}: generated by `tabbench leaderboard` (do not edit by hand); needs \\usepackage{{booktabs}}", ""]
    listed = "; ".join(f"{FAMILY[metric]}: " + ", ".join(names[d] for d in t["mean"].columns) for metric, t in families)
    out += _table(caption, f"tab:{key}-ranks", body, [f"Datasets. {listed}.", *notes, *mark_notes(methods)])
    if arena is not None and arena.table is not None:
        from tabbench.report.arena import latex_parts

        caption, header, rows, arena_notes = latex_parts(arena, method_name)
        body = _tabular("l" + "c" * (len(header) - 1), [" & ".join(header) + r" \\"], rows)
        out += _table(caption, f"tab:{key}-arena", body, [escape(n) for n in arena_notes] + mark_notes(methods))
    for metric, t in families:
        mean, se = t["mean"], t["se"]
        datasets = list(mean.columns)
        best = mean.max() if t["higher"] else mean.min()
        rows = [[method_name(m)] + [_cell(t, m, d, mean.loc[m, d] == best[d]) for d in datasets]
                for m in t["ranks"].index]
        body = _tabular("l" + "c" * len(datasets), [" & ".join(["Method"] + [names[d] for d in datasets]) + r" \\"], rows)
        marked = [note for d, note in zip([d for d in labels if labels[d] != d], notes) if d in datasets]
        caption = (f"Test {FAMILY[metric]} per dataset, mean $\\pm$ standard error over folds and seeds "
                   f"({'higher' if t['higher'] else 'lower'} is better; best in bold).")
        out += _table(caption, f"tab:{key}-{metric}", body, marked + mark_notes(t["ranks"].index))
    return "\n".join(out)


def write_latex(path: Path, name: str, tables: dict, labels: dict, published=None, show=None,
                arena=None) -> Path:
    path.write_text(latex(name, tables, labels, published, show, arena))
    return path
