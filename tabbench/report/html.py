"""report.html: one self-contained page per results folder, made from the same Context and sections as
leaderboard.md (tabbench.report.section), opened from file:// with nothing fetched.

The page: a headline (TabArena's Elo with its 95% interval drawn as whiskers, mean rank, improvability, win rate,
the datasets it rests on and the budget every job had), every table of leaderboard.md made sortable, a per-dataset
drill-down (each method's metric ± SE and rank, the published number and whether ours lies within 2 combined SE
of it), the figures the sections drew (critical-difference diagrams, win-rate heatmap, cost against quality with
its Pareto front, NPT's budget curves), the machines the records name, and downloads: the per-split CSV embedded
in the page, leaderboard.csv beside it.

Plotting: matplotlib's SVG, inlined. It is the report extra's figure library already, so the page shows the very
drawings leaderboard.md links, and nothing is drawn twice; its SVG is static text (``svg.fonttype: none`` keeps the
labels as searchable text) that needs no script, font or CDN, opens from file:// in any browser, and lifts
straight into a paper. Vega-Lite or Plotly would bring a JavaScript runtime into every page (Plotly's alone is
about 3.5 MB, beyond the 1 MB a committed page may weigh) for an interactivity that the tables' sorting and the
drill-down below give with a few lines of script.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

import pandas as pd

from tabbench.report.format import Cell, count

#: The page's own style and script: inline, so that the page is one file and fetches nothing.
STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1200px;padding:1em 2em;
color:#222}
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.8em}
table{border-collapse:collapse;margin:.6em 0;font-size:13px}th,td{border:1px solid #ddd;padding:3px 7px;
text-align:left}th{background:#f3f3f3;cursor:pointer;user-select:none}th.asc::after{content:" \\25B2"}
th.desc::after{content:" \\25BC"}tr:nth-child(even) td{background:#fafafa}.best{font-weight:bold}
.partial{color:#a15c00}.within{color:#1a7f37}.outside{color:#b42318}svg{max-width:100%;height:auto}
.note{color:#555;font-size:12.5px}nav a{margin-right:1em}.facts td:first-child{font-weight:bold}
code{background:#f3f3f3;padding:0 3px}table{display:block;max-width:100%;overflow-x:auto}select{max-width:100%}
p,li,h1,h2,h3{overflow-wrap:anywhere}nav{display:flex;flex-wrap:wrap}@media (max-width:600px){body{padding:.5em .8em}figure{margin:.5em 0}}
"""
SCRIPT = """
function cellValue(td){var s=td.querySelector('[data-v]');var t=s?s.getAttribute('data-v'):td.textContent;
var n=parseFloat(t.replace(/[^0-9eE+.\\-]+.*$/,''));return isNaN(n)?t.trim().toLowerCase():n;}
document.querySelectorAll('table.sortable th').forEach(function(th,i){th.addEventListener('click',function(){
var table=th.closest('table'),body=table.tBodies[0],rows=Array.from(body.rows),asc=!th.classList.contains('asc');
table.querySelectorAll('th').forEach(function(h){h.classList.remove('asc','desc');});
th.classList.add(asc?'asc':'desc');rows.sort(function(a,b){var x=cellValue(a.cells[i]),y=cellValue(b.cells[i]);
if(typeof x!==typeof y){return (typeof x==='number'?-1:1)*(asc?1:-1);}return (x<y?-1:x>y?1:0)*(asc?1:-1);});
rows.forEach(function(r){body.appendChild(r);});});});
var pick=document.getElementById('dataset');if(pick){var show=function(){
document.querySelectorAll('.drill').forEach(function(d){d.hidden=d.id!=='drill-'+pick.value;});};
pick.addEventListener('change',show);show();}
"""


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


#: An inline part of a Markdown line: a backslash escape, code, bold, or a link (its label may hold escapes).
_INLINE = re.compile(r"\\([!-/:-@\[-`{-~])|`([^`]+)`|\*\*((?:\\.|[^*\\])+)\*\*"
                     r"|\[((?:\\.|[^\]\\])+)\]\(([^)\s]+)\)")


#: The link targets a page may hold: an ``#anchor``, an http(s) address, or a relative path (no scheme, host or
#: leading slash); anything else (``javascript:``, ``data:``, a control character before a scheme) is not a link.
SAFE_TARGET = re.compile(r"#[\w.~%-]*|https?://[^\s\x00-\x1f\\]+|[\w.~%-][\w./~%#?=&+-]*", re.I)


def safe_target(target: str) -> bool:
    """Whether a link may point at ``target`` (SAFE_TARGET)."""
    return SAFE_TARGET.fullmatch(target) is not None


def _inline(text: str) -> str:
    """A Markdown line's inline parts as HTML: backslash escapes (tabbench.report.format.markdown_text), code,
    bold and links; a link whose target is not safe (safe_target) stays text, as written."""
    out, pos = [], 0
    for match in _INLINE.finditer(text):
        out.append(html.escape(text[pos:match.start()], quote=False))
        escaped, code, bold, label, target = match.groups()
        if escaped is not None:
            out.append(html.escape(escaped, quote=False))
        elif code is not None:
            out.append(f"<code>{html.escape(code, quote=False)}</code>")
        elif bold is not None:
            out.append(f"<strong>{_inline(bold)}</strong>")
        elif safe_target(target):
            out.append(f'<a href="{html.escape(target)}">{_inline(label)}</a>')
        else:
            out.append(f"{_inline(f'[{label}]')}({html.escape(target, quote=False)})")
        pos = match.end()
    return "".join(out) + html.escape(text[pos:], quote=False)


def svg(path: Path) -> str:
    """A figure's SVG file as inline markup (no XML prolog or doctype); '' where the file is absent. Slimmed for
    the page, which holds every figure: no indentation between tags, coordinates (matplotlib writes six
    decimals) to 0.1 px, which a page shows no finer, and one font family where matplotlib names its whole
    fallback list in every text's style."""
    if not path.exists():
        return ""
    text = path.read_text()
    text = re.sub(r">\s+<", "><", text[text.index("<svg"):])
    text = re.sub(r"<[^>]+>", lambda tag: re.sub(r"(\.\d)\d{4,}", r"\1", tag[0]), text)  # not a label's digits
    return re.sub(r"font-family: [^;\"]*", "font-family: 'DejaVu Sans', sans-serif", text)


def table(header: list, rows: list, sortable: bool = True) -> str:
    """An HTML table; a cell is text (escaped) or a format.Cell (its own HTML)."""
    def cell(value):
        return value.html() if isinstance(value, Cell) else html.escape(str(value), quote=False)

    head = "".join(f"<th>{cell(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table{" class=sortable" if sortable else ""}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def from_markdown(lines: list, out_dir: Path) -> str:
    """The Markdown the sections write (headings, paragraphs, lists, tables, images of figures beside it) as HTML;
    an image of an SVG figure is inlined, so that the page stays one file."""
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
        elif line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            title = line[level:].strip()
            out.append(f'<h{level} id="{_slug(title)}">{_inline(title)}</h{level}>')
            i += 1
        elif line.startswith("|"):
            block = []
            while i < len(lines) and lines[i].startswith("|"):
                block += lines[i].split("\n")
                i += 1
            cells = [[c.strip() for c in row.strip().strip("|").split(" | ")] for row in block]
            head = "".join(f"<th>{_inline(c)}</th>" for c in cells[0])
            body = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>" for row in cells[2:])
            out.append(f"<table class=sortable><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        elif (image := re.fullmatch(r"!\[([^\]]*)\]\(([\w.-]+\.svg)\)", line.strip())):  # a figure beside it
            out.append(f'<figure role="img" aria-label="{html.escape(image[1])}">{svg(out_dir / image[2])}</figure>')
            i += 1
        elif line.startswith("- "):
            items = []
            while i < len(lines) and lines[i].startswith("- "):
                items.append(f"<li>{_inline(lines[i][2:])}</li>")
                i += 1
            out.append("<ul>" + "".join(items) + "</ul>")
        elif line.startswith("Files: "):
            i += 1  # the figure is on the page; its files are beside it
        else:
            out.append(f"<p>{_inline(line)}</p>")
            i += 1
    return "\n".join(out)


def _budget_facts(ctx) -> list:
    """(what, value) rows: the datasets, the per-job budget, the devices and the compute the records spent."""
    runs = ctx.all_runs
    families = ", ".join(f"{len(t.datasets)} {t.metric}" for t in ctx.tables.values())
    n = sum(len(t.datasets) for t in ctx.tables.values())
    budgets = sorted(runs["time_budget_s"].dropna().unique()) if "time_budget_s" in runs else []
    from tabbench.pooling import record_devices
    from tabbench.clock import WALL
    from tabbench.report.cost import spent, spent_label

    devices = record_devices(runs)
    seconds = spent(runs).fillna(0).groupby(devices).sum()
    used = ", ".join(f"{seconds[d] / 3600:,.2f} {d.upper()}-hours ({(devices == d).sum():,} jobs)"
                     for d in sorted(seconds.index)) + f": {spent_label(runs)}"
    budgeted = runs[runs["time_budget_s"].notna()] if budgets else runs.iloc[:0]
    clocks = (budgeted["clock"] if "clock" in budgeted else pd.Series(index=budgeted.index, dtype=object))
    clocks = clocks.where(clocks.notna(), WALL).value_counts()
    on = " and ".join(f"{c} clock" + (f" ({n:,} jobs)" if len(clocks) > 1 else "") for c, n in clocks.items())
    return [("datasets", f"{n} ({families})"),
            ("methods", f"{runs['method'].nunique()}"),
            ("budget every job had", ", ".join(f"{b:g} s" for b in budgets) + f" a job, on the {on}" if budgets
             else "none recorded"),
            ("devices and compute", used),
            ("records", f"{len(ctx.records):,} from " + ", ".join(f"{Path(s).name}" for s in ctx.sources))]


def _elo_figure(agg, show) -> str:
    """TabArena's Elo per method with its 95% bootstrap interval as whiskers, best at the top (matplotlib SVG)."""
    from io import StringIO

    from tabbench.report.plots import _pyplot

    plt = _pyplot()
    t = agg.table.iloc[::-1]
    fig, ax = plt.subplots(figsize=(7, 0.28 * len(t) + 1.1))
    below, above = t["elo"] < ELO_AXIS[0], t["elo"] > ELO_AXIS[1]
    y = pd.Series(range(len(t)), index=t.index)
    near = t[~(below | above)]
    low = (near["elo"] - near["elo_low"]).fillna(0).clip(lower=0)
    high = (near["elo_high"] - near["elo"]).fillna(0).clip(lower=0)
    ax.errorbar(near["elo"], y[near.index], xerr=[low, high], fmt="o", color="tab:blue", ecolor="tab:gray", capsize=3)
    ax.set_yticks(range(len(t)), [show.get(m, m) for m in t.index])
    ax.axvline(1000, color="k", lw=0.6, ls=":")
    what = ("Elo (95% bootstrap interval)" if t["elo_low"].notna().any() else
            f"Elo (no interval on {agg.n_datasets} dataset{'s' if agg.n_datasets != 1 else ''}: see the notes)")
    what += f"; {agg.anchor} = 1000" if agg.anchor else ", mean 1000"
    left, right = ax.get_xlim() if len(near) else ELO_AXIS
    margin = 0.06 * (ELO_AXIS[1] - ELO_AXIS[0])
    for beyond, edge, marker, shift in ((below, ELO_AXIS[0] - margin, "<", 6), (above, ELO_AXIS[1] + margin, ">", -6)):
        if beyond.any():  # at the edge, its Elo written
            left, right = min(left, edge - margin / 2), max(right, edge + margin / 2)
            ax.plot([edge] * int(beyond.sum()), y[beyond], marker, color="tab:red")
            for m in t.index[beyond]:
                ax.annotate(f"{t.loc[m, 'elo']:.0f}", (edge, y[m]), xytext=(shift, 0), textcoords="offset points",
                            va="center", ha="left" if shift > 0 else "right", color="tab:red", fontsize=8)
    if (below | above).any():
        left, right = max(left, ELO_AXIS[0] - 1.5 * margin), min(right, ELO_AXIS[1] + 1.5 * margin)
        ax.set_xlim(left, right)
        what += (f"\naxis cut at {ELO_AXIS[0]:.0f} to {ELO_AXIS[1]:.0f}: "
                 f"{count(int((below | above).sum()), 'method')} beyond drawn at its edge, Elo written")
    ax.set_xlabel(what)
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    buffer = StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    plt.close(fig)
    text = buffer.getvalue()
    return text[text.index("<svg"):]


#: The Elo figure's axis at most: 1000 ± 1000 (odds of 1 in 316 against the anchor at either end). A method beyond
#: is drawn at the axis' edge with its Elo written (the tables give every number), so that one collapse such as
#: an Elo of -1963 does not squash the others into a few pixels.
ELO_AXIS = (0.0, 2000.0)


def headline(ctx) -> str:
    agg = ctx.aggregates
    facts = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in _budget_facts(ctx))
    out = [f"<table class=facts>{facts}</table>"]
    if agg is None or agg.table is None:
        return "\n".join(out + [f"<p>{html.escape(agg.reason if agg else 'No aggregates.')}</p>"])
    rows = [[ctx.show.get(m, m), f"{r['elo']:.0f}",
             "–" if pd.isna(r["elo_low"]) else f"{r['elo_low']:.0f} to {r['elo_high']:.0f}",
             f"{r['mean_rank']:.2f}", f"{r['improvability']:.3f}", f"{r['win_rate']:.3f}"]
            for m, r in agg.table.iterrows()]
    out += [f"<figure>{_elo_figure(agg, ctx.show)}</figure>",
            table(["method", "Elo", "95% interval", "mean rank", "improvability", "win rate"], rows),
            f'<p class="note">Over all {agg.n_datasets} datasets together (bencheval, TabArena\'s evaluation engine); '
            'the notes under "TabArena\'s aggregates" below say how each is computed.</p>']
    return "\n".join(out)


def drilldown(ctx) -> str:
    """Pick a dataset: every method's test metric ± SE over folds and its rank there, the published number beside
    it and whether ours lies within 2 combined standard errors of it (tabbench.report.agreement)."""
    from tabbench.report.agreement import within

    options, panels = [], []
    for t in ctx.tables.values():
        ranks, best = t.ranks, t.best()
        for d in t.datasets:
            options.append(f'<option value="{_slug(d)}">{html.escape(ctx.labels[d])} ({t.metric})</option>')
            rows = []
            for m in ranks.index:
                cell = t.cell(m, d, bold=t.mean.loc[m, d] == best[d])
                paper = ctx.published.metrics.get(d, {}).get(ctx.model_of(m)) if ctx.published else None
                verdict = ""
                if paper and not pd.isna(cell.mean):
                    agree = within(cell.mean - paper[0], cell.se, paper[1])
                    verdict = {None: "no SE to judge", True: "within 2 SE", False: "outside 2 SE"}[agree]
                rows.append([ctx.show.get(m, m), cell, f"{ranks.loc[m, d]:g}",
                             Cell(*paper, digits=3) if paper else "–", verdict or "–"])
            panels.append(f'<div class="drill" id="drill-{_slug(d)}">' + table(
                ["method", f"test {t.metric} (mean ± SE)", "rank", "published", "ours against it"], rows) + "</div>")
    return ('<p><label for="dataset">Dataset: </label><select id="dataset">' + "".join(options) + "</select></p>"
            + "".join(panels) + '<p class="note">Published: the number the publication prints for the method\'s '
            "model (its own digits); \"within 2 SE\": |ours − published| ≤ 2 √(SE ours² + SE published²) "
            "(results/README.md). A mean of fewer folds than the dataset has shows its fold count.</p>")


def machines(ctx) -> str:
    from tabbench.measure import machines as found

    runs = ctx.all_runs
    if "environment" not in runs:
        return "<p>The records name no machine.</p>"
    listed = found(runs["environment"], list(runs["source"]) if "source" in runs else None, list(runs["method"]))
    rows = [[m["label"], f"{m['records']:,}", ", ".join(f"{k} {n:,}" for k, n in m["methods"].items()),
             ", ".join(Path(s).name for s in m["sources"])] for m in listed]
    return table(["machine (hardware fingerprint)", "records", "methods (records)", "folders"], rows) + (
        '<p class="note">Fit times and memory compare only between methods run on the same machine.</p>')


def _download(name: str, text: str, what: str) -> str:
    data = base64.b64encode(text.encode()).decode()
    return f'<li><a download="{name}" href="data:text/csv;base64,{data}">{name}</a>: {what}</li>'


def downloads(ctx) -> str:
    from tabbench.metrics import PRIMARY

    selected = ctx.selected
    metric = selected["task"].map(lambda task: PRIMARY[task][0])
    value = [r.get(f"test_{m}") for (_, r), m in zip(selected.iterrows(), metric)]
    splits = selected.assign(metric=metric, test=value)[
        ["method", "dataset", "fold", "repeat", "seed", "trial", "status", "metric", "test", "fit_seconds",
         "predict_seconds"]].sort_values(["dataset", "method", "repeat", "fold", "seed"])
    # leaderboard.csv lies beside the page, so a link to it keeps the page small; the per-split table is the page's own
    return "<ul>" + _download("splits.csv", splits.to_csv(index=False, float_format="%.6g"),
                              "one row per split: the selected trial's test metric and its fit and predict seconds") \
        + '<li><a download href="leaderboard.csv">leaderboard.csv</a>: every table of this page as data, beside it</li>' \
        + "</ul>"


def page(ctx, sections) -> str:
    """The page over ``sections``, in their order on the page (leaderboard.sections)."""
    name = ctx.out_dir.name
    # a published folder has a README (`tabbench report` lists it in ../index.html); a run's folder has neither
    published = (ctx.out_dir / "README.md").exists()
    nav = (['<a href="../index.html">all results</a>'] if published else []) + [
        '<a href="#tables">tables</a><a href="#drill-down">per dataset</a><a href="#machines">machines</a>'
        '<a href="#downloads">downloads</a><a href="leaderboard.md">leaderboard.md</a>'] + (
        ['<a href="README.md">README</a>'] if published else [])
    body = [f"<h1>{html.escape(name)}</h1>", f"<nav>{''.join(nav)}</nav>",
            '<p class="note">Generated by <code>tabbench leaderboard</code> from the records (do not edit by hand); '
            'click a column\'s header to sort a table.</p>',
            "<h2 id=headline>Headline</h2>", headline(ctx), '<div id="tables"></div>']
    body += [section.html(ctx) for section in sections]
    body += ["<h2 id=drill-down>Per dataset</h2>", drilldown(ctx), "<h2 id=machines>Machines</h2>", machines(ctx),
             "<h2 id=downloads>Downloads</h2>", downloads(ctx)]
    return ("<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
            f"<meta name=viewport content='width=device-width'><title>tabbench: {html.escape(name)}</title>"
            f"<link rel=icon href='data:,'><style>{STYLE}</style></head><body>\n" + "\n".join(b for b in body if b)
            + f"\n<script>{SCRIPT}</script></body></html>\n")


def write_page(ctx, sections) -> Path:
    path = ctx.out_dir / "report.html"
    path.write_text(page(ctx, sections))
    return path
