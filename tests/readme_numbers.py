"""What the numbers in a results README's hand-written text rest on (tests/test_readme_numbers.py checks them).

A results README holds two kinds of text: blocks that `tabbench report` writes from the records (the answer atop
results/README.md, ``<!-- tabbench report: NAME -->`` blocks; tests/test_report_site.py checks they are current),
and hand-written prose around them. Every number in the prose must be one of:

- an **input**: what was asked, not what came out (a budget, a fold count, a configuration's size, a dataset's
  rows, a paper's table number), declared per README in tests/readme_inputs.py with the reason;
- a **cited measurement** whose source is not a record (a benchmark's figure): it must appear in the document
  named for it (tests/readme_inputs.py, CITED), so that the two cannot drift apart;
- a **result**, found among the facts the records give for the sentence it stands in: the folder's generated
  tables (leaderboard.md / .csv, budget-curves.csv, win-rate.csv, probe-corruption/corruption.csv: each checked
  against the records by tests/test_regeneration.py) and the records themselves (each job's test metric, best
  validation step, steps, budget curve, fit seconds in seconds, minutes and hours, peak memory; per method and
  dataset the mean, SE, median and range over folds; per method the jobs, failures and CPU-hours), of the
  README's own folder and of every results folder it names.

A fact counts for a number only where it is about what the number's clause, else its sentence, else its headings
name: a fact of a method backs it only where that method is named (or no method is), a fact of a dataset only
where that dataset is named (or, none being named, the fact's method is); facts about no method and no dataset (a
Friedman statistic, a folder's total) back any number. A number matches a fact
when the fact, rounded to the digits the README prints, is that number (12.5% and 0.125 alike). What this can
miss: a stale number that happens to equal another fact about the same method and dataset at the printed digits
(most likely for small integers: ranks and fold counts).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"

# --- the prose: what is hand-written, and the numbers in it --------------------------------------------------

_GENERATED = [re.compile(r"<!-- tabbench report: ([\w-]+) -->.*?<!-- end of tabbench report: \1 -->", re.S),
              re.compile(r"<!-- The answer: generated.*?<!-- End of the generated answer[^>]*-->", re.S)]
_NOT_PROSE = [re.compile(r"<!--.*?-->", re.S),  # comments
              re.compile(r"^Regenerate: `[^`]*`.*$", re.M),  # the command (tests/test_regeneration.py runs it)
              re.compile(r"^```.*?^```", re.S | re.M),  # fenced code
              re.compile(r"^(?: {4}|\t).*$", re.M),  # indented code: commands
              re.compile(r"`[^`\n]*`"),  # inline code: commands, file names, identifiers
              re.compile(r"\]\([^)]*\)"),  # link targets
              re.compile(r"\b\d{4}-\d{2}-\d{2}(?:T[\d:+]*)?"),  # dates
              re.compile(r"\b(?:[Tt]able|[Ff]igure|[Ii]ssues?|§|[Ss]ection|Zen|family|model|stepping|sm)\s+\d[\d.]*"
                         r"(?:(?:,| and| or|-)\s*\d+)*"),  # references and CPU/GPU model numbers, not quantities
              re.compile(r"\b[Ff]olds?\s+\d+(?:\s*(?:-|,|and|to)\s*\d+)*"),  # which folds (an index, not a count)
              re.compile(r"\b(?:[Ss]eeds?|[Tt]rial|[Ll]ease)\s+\d+(?:\s*(?:-|,|and)\s*\d+)*"),
              re.compile(r"\b\d+(?:st|nd|rd|th)\s+(?:lease|session)"),
              re.compile(r"\b(?:torch|CUDA|driver|Python|numpy|scipy|pandas|bencheval|matplotlib|scikit-learn)"
                         r"\s+\d[\w.+]*")]  # versions
_NUMBER = re.compile(r"(?<![\w.])[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[-+]?\d+)?(?![\w.]*[A-WYZa-wyz_\d])")


def prose(text: str) -> str:
    """The hand-written text of a README: without the generated blocks, code, commands and link targets."""
    for pattern in _GENERATED + _NOT_PROSE:
        text = pattern.sub(" ", text)
    return text


#: The units a number may carry in the prose (the word after it, or after the range it opens), by the kind of fact
#: that backs it; a number without one is backed only by facts without a unit (metrics, counts, steps, ranks).
UNITS = {"s": r"s|seconds?|CPU-seconds|s a", "min": r"min|minutes?", "h": r"h|hours?|CPU-hours|GPU-hours",
         "GB": r"GB", "GiB": r"GiB", "MiB": r"MiB", "MB": r"MB"}
_UNIT = re.compile(r"(?:\s*(?:-|–|to|and)\s*[-+−]?[\d,]*\.?\d+)?\s*(" + "|".join(
    f"(?P<{k}>{v})" for k, v in UNITS.items()) + r")(?![\w-])")


def _kind(after: str) -> str | None:
    m = _UNIT.match(after)
    return next((k for k, v in m.groupdict().items() if v), None) if m else None


@dataclass(frozen=True)
class Number:
    text: str  # as printed (commas, sign and exponent kept)
    value: float
    digits: int  # decimals printed (the mantissa's, with an exponent)
    percent: bool  # followed by %
    sentence: str  # the sentence or table row it stands in
    heading: str  # the headings above it, joined
    kind: str | None = None  # its unit (UNITS), None without one
    near: str = ""  # its clause (in a table: its row's and column's names)
    role: str | None = None  # "rank" or "elo" after those words, "mean" before a ±, "se" after one, else None


def _role(before: str, after: str) -> str | None:
    """What a number says it is: a mean rank or an Elo (after those words), else its place in "mean ± SE"."""
    if re.search(r"mean rank(?: is| of)?\s*$", before, re.I):
        return "rank"
    if re.search(r"\bElo\s*$", before):
        return "elo"
    if re.match(r"\s*±", after):
        return "mean"
    return "se" if re.search(r"±\s*$", before) else None


def _header_kind(header: str) -> str | None:
    """A table column's unit, from its header ("fit s", "peak RSS MiB", "fit minutes")."""
    found = [k for k, v in UNITS.items() if re.search(r"(?<![\w-])(?:" + v + r")(?![\w-])", header)]
    return found[-1] if found else None


def numbers(text: str) -> list[Number]:
    """Every number of the README's prose, with the sentence (or table row) and headings it stands under."""
    out, headings = [], {}
    for block in re.split(r"\n(?=#)|\n\s*\n", prose(text)):
        lines = block.strip("\n").split("\n")
        if lines and lines[0].startswith("#"):
            level = len(lines[0]) - len(lines[0].lstrip("#"))
            headings = {k: v for k, v in headings.items() if k < level} | {level: lines[0].lstrip("# ")}
            lines = lines[1:]
        heading = " / ".join(headings[k] for k in sorted(headings))
        body = "\n".join(lines)
        units = [row for row in lines if row.startswith("|")] if body.lstrip().startswith("|") else \
            re.split(r"(?<=[.])\s+(?=[A-Z(*])|\n(?=\s*[-*] )", body)
        table_header = lines[0] if body.lstrip().startswith("|") else ""
        for unit in units:
            unit = unit if table_header else " ".join(unit.split())  # a name wrapped over two lines is one name
            context = unit + (" " + table_header if table_header else "")
            heads = [c.strip() for c in table_header.strip().strip("|").split("|")] if table_header else []
            cells = [c.strip() for c in unit.strip().strip("|").split("|")] if table_header else []
            found = list(_NUMBER.finditer(unit))
            for i, m in enumerate(found):
                raw = m.group(0)
                before = unit[:m.start()]
                if (raw[0] in "-−" and before[-1:].isalpha()) or (before[-1:] == "-" and before[-2:-1].isalpha()):
                    continue  # a name: AVX-512
                if raw[0] in "-−" and before[-1:].isdigit():  # a range: 3-5
                    raw = raw[1:]
                mantissa = re.split(r"e", raw)[0]
                digits = len(mantissa.split(".")[1]) if "." in mantissa else 0
                value = float(raw.replace(",", "").replace("−", "-").replace("+", ""))
                kind = _kind(unit[m.end():])
                # its clause: back to the last comma, semicolon or bracket ("CatBoost 4.44 / 4.28") and on to the next
                # one or the next number ("8.3 CPU-hours for Concrete")
                start = max(before.rfind(c) for c in ",;()") + 1
                after = unit[m.end():found[i + 1].start() if i + 1 < len(found) else len(unit)]
                near = before[start:] + " " + re.split(r"[,;()]", after)[0]
                sentence = context
                if table_header:  # a table cell: its row's first cell and its column's header name it
                    column = before.count("|") - 1
                    header = heads[column] if 0 <= column < len(heads) else ""
                    kind = kind or _header_kind(header)
                    near = f"{cells[0] if cells else ''} {header}"
                    sentence = f"{unit} {header}"  # the row and its own column, not the other columns' headers
                out.append(Number(raw, value, digits, unit[m.end():m.end() + 1] == "%", sentence, heading, kind,
                                  near, _role(before, unit[m.end():])))
    return out


# --- the facts: what the records give ------------------------------------------------------------------------

@dataclass(frozen=True)
class Fact:
    value: float
    method: str | None = None  # None: a fact about no one method
    dataset: str | None = None
    kind: str | None = None  # its unit (UNITS), None without one
    role: str | None = None  # "rank" (a mean rank), "elo", "mean" or "se" of a spread; None: any other value


@dataclass
class Facts:
    """The facts of some results folders, indexed by their value at each number of decimals."""
    methods: set = field(default_factory=set)
    datasets: set = field(default_factory=set)
    models: dict = field(default_factory=dict)  # method -> model
    aliases: dict = field(default_factory=dict)  # method -> other names the prose uses (its named configurations)
    facts: list = field(default_factory=list)

    def add(self, value, method=None, dataset=None, kind=None, role=None):
        try:
            value = float(value)
        except (TypeError, ValueError):
            return
        if math.isfinite(value):
            self.facts.append(Fact(value, method if method else None, dataset if dataset else None, kind, role))

    def index(self, digits: set = frozenset(range(5))) -> dict:
        """(decimals, the absolute value's rounded text) -> the facts that print so, for the decimals asked."""
        out = {}
        for f in self.facts:
            v = abs(f.value)
            for d in digits:  # a tie (1.2475) prints either way
                for text in {f"{v:.{d}f}", f"{v + 1e-9:.{d}f}", f"{v - 1e-9:.{d}f}"}:
                    out.setdefault((d, text), []).append(f)
        return out


_MIB, _GIB = 1024**2, 1024**3


def _durations(facts, seconds, method=None, dataset=None):
    for kind, scale in (("s", 1), ("min", 60), ("h", 3600)):
        facts.add(seconds / scale, method, dataset, kind)


def _memory(facts, size, method=None, dataset=None):
    for kind, scale in (("MiB", _MIB), ("GiB", _GIB), ("MB", 1e6), ("GB", 1e9)):
        facts.add(size / scale, method, dataset, kind)


def _spread(facts, values, method, dataset, kinds=((None, 1),)):
    """A column's mean, SE, median and range over the rows (in each of ``kinds``: (unit, divisor))."""
    values = np.asarray(pd.to_numeric(pd.Series(values), errors="coerce"), dtype=float)
    values = values[~np.isnan(values)]
    if not len(values):
        return
    for kind, scale in kinds:
        v = values / scale
        facts.add(v.mean(), method, dataset, kind, "mean")
        for x in (np.median(v), v.min(), v.max(), v.sum()):
            facts.add(x, method, dataset, kind)
        if len(v) > 1:
            facts.add(v.std(ddof=1) / math.sqrt(len(v)), method, dataset, kind, "se")


_TIME = (("s", 1), ("min", 60), ("h", 3600))


def _trial_facts(facts: Facts, records: pd.DataFrame) -> None:
    """Every trial's test and validation metric and best step (a folder without tables reports its trials), each
    trial's named configuration a name of its method."""
    from tabbench.metrics import PRIMARY

    for _, r in records.iterrows():
        metric = PRIMARY[r["task"]][0]
        for column in (f"test_{metric}", f"val_{metric}", "val_mse" if metric == "rmse" else "val_log_loss"):
            facts.add(r.get(column), r["method"], r["dataset"])
        info = r.get("info") if isinstance(r.get("info"), dict) else {}
        facts.add(info.get("best_step"), r["method"], r["dataset"])
        if pd.notna(r.get("fit_seconds")):
            _durations(facts, r["fit_seconds"], r["method"], r["dataset"])
        if isinstance(r.get("config"), str) and not r["config"].isalpha():  # "label-mask-0.10", not "default"
            facts.aliases.setdefault(r["method"], set()).add(r["config"])
    if "config" in records:
        for (m, d, _), part in records.groupby(["method", "dataset", "config"]):
            _spread(facts, part[f"test_{PRIMARY[part['task'].iloc[0]][0]}"], m, d)


def _record_facts(facts: Facts, records: pd.DataFrame) -> None:
    """Per job (the selected trial of each run): its primary test and validation metric, its steps and best
    validation step, its budget curve's points, its fit seconds and peak memory; per method and dataset their
    spread over the runs; per method (and in all) the jobs, failures, hours and memory."""
    from tabbench.metrics import PRIMARY
    from tabbench.report.leaderboard import select_trials

    for m, model in records.groupby("method")["model"].first().items() if "model" in records else ():
        facts.models[m] = model if isinstance(model, str) else m
    chosen = select_trials(records)
    for _, r in chosen.iterrows():
        m, d = r["method"], r["dataset"]
        metric = PRIMARY[r["task"]][0]
        for column in (f"test_{metric}", f"val_{metric}", "val_log_loss" if metric != "rmse" else "val_mse"):
            facts.add(r.get(column), m, d)
        for column in ("fit_seconds", "wall_seconds"):
            if pd.notna(r.get(column)):
                _durations(facts, r[column], m, d)
        for column in ("peak_rss_bytes", "job_rss_bytes", "peak_gpu_allocated_bytes"):
            if pd.notna(r.get(column)):
                _memory(facts, r[column], m, d)
        info = r.get("info") if isinstance(r.get("info"), dict) else {}
        for key in ("steps", "steps_run", "best_step", "best_val_loss", "final_train_loss", "n_params",
                    "slowdown_vs_cost_model", "resumed_from_step", "epochs", "best_epoch", "best_iteration"):
            facts.add(info.get(key), m, d)
        if isinstance(info.get("n_params"), int):
            facts.add(info["n_params"] / 1e6, m, d)  # "2.7 M parameters"
        steps = info.get("steps_run", info.get("steps"))
        if isinstance(steps, int) and steps and pd.notna(r.get("fit_seconds")):
            facts.add(r["fit_seconds"] / steps, m, d, "s")  # seconds a step
            facts.add(steps / r["fit_seconds"], m, d)  # steps a second
        if isinstance(info.get("fit_seconds_before_resume"), (int, float)):
            _durations(facts, info["fit_seconds_before_resume"], m, d)
        for point in r.get("budget_curve") if isinstance(r.get("budget_curve"), list) else []:
            facts.add(point.get("best_step"), m, d)
            facts.add((point.get("test") or {}).get(metric), m, d)
    ok = chosen[chosen["status"] == "ok"]
    for (m, d), part in ok.groupby(["method", "dataset"]):
        metric = PRIMARY[part["task"].iloc[0]][0]
        _spread(facts, part[f"test_{metric}"], m, d)
        _spread(facts, part["fit_seconds"], m, d, _TIME)
        info = part["info"] if "info" in part else pd.Series(dtype=object)
        _spread(facts, info.map(lambda i: i.get("best_step") if isinstance(i, dict) else None), m, d)
    for key, part in [(m, p) for m, p in records.groupby("method")] + [(None, records)]:
        for d, rows in [(d, p) for d, p in part.groupby("dataset")] + [(None, part)]:
            facts.add(len(rows), key, d)
            facts.add((rows["status"] != "ok").sum(), key, d)
            if "wall_seconds" in rows:
                _durations(facts, rows["wall_seconds"].sum(), key, d)
                _spread(facts, rows["wall_seconds"], key, d, _TIME)
            _durations(facts, rows["fit_seconds"].fillna(0).sum(), key, d)
            for column in ("job_rss_bytes", "peak_rss_bytes"):
                if column in rows and rows[column].notna().any():
                    _memory(facts, rows[column].max(), key, d)
        for name in ("steps_run", "best_step"):
            values = part["info"].map(lambda i: i.get(name) if isinstance(i, dict) else None) \
                if "info" in part else pd.Series(dtype=float)
            _spread(facts, values, key, None)


def _table_facts(facts: Facts, text: str, methods: set, datasets: set) -> None:
    """Every number of a generated Markdown file: in a table row, about the row's method (its first cell) and the
    column's dataset (its header); elsewhere about no one."""
    header = []
    for line in text.split("\n"):
        if not line.startswith("|"):
            header = []
            for m in _NUMBER.finditer(line):
                facts.add(m.group(0).replace(",", "").replace("−", "-"), kind=_kind(line[m.end():]))
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not header:
            header = cells
            continue
        if set("".join(cells)) <= set("-: "):
            continue
        first = re.sub(r"[^\w\-]+$", "", cells[0].split(" ")[0]) if cells else ""
        method = first if first in methods else None
        row_dataset = cells[0].split(" ")[0] if cells and cells[0].split(" ")[0] in datasets else None
        for column, cell in zip(header, cells):
            dataset = column if column in datasets else row_dataset
            for m in _NUMBER.finditer(cell):
                facts.add(m.group(0).replace(",", "").replace("−", "-"), method, dataset,
                          _kind(cell[m.end():]) or _header_kind(column), _role(cell[:m.start()], cell[m.end():]))


def _derived_facts(facts: Facts, board: pd.DataFrame) -> None:
    """What prose works out from the tables: the gap between two methods' mean ranks (per family and over all) and
    between their means on a dataset (each fact about both methods), and ours against the paper's number (the
    difference, the combined standard error, its 2-SE band and the difference in combined SEs)."""
    from tabbench.published import load_published

    for name, part in board[board["table"].str.startswith(("rank_", "test_"))].groupby(["table", "dataset"],
                                                                                   dropna=False):
        values = part.set_index("method")["value"].dropna()
        for a in values.index:
            for b in values.index:
                if a < b:
                    gap = abs(values[a] - values[b])
                    dataset = name[1] if isinstance(name[1], str) else None
                    facts.add(gap, a, dataset)
                    facts.add(gap, b, dataset)
    paper = load_published(ROOT / "suites" / "published" / "npt-paper.yaml")
    for _, r in board[board["table"].str.startswith("test_")].iterrows():
        published = paper.metrics.get(r["dataset"], {}).get(facts.models.get(r["method"], r["method"]))
        if not published:
            continue
        gap = r["value"] - published[0]
        facts.add(gap, r["method"], r["dataset"])
        if published[1] and pd.notna(r["se"]):
            combined = math.hypot(r["se"], published[1])
            for value in (combined, 2 * combined, gap / combined):
                facts.add(value, r["method"], r["dataset"])


@lru_cache(maxsize=None)
def folder_facts(name: str) -> Facts:
    """The facts of one results folder: its generated files and its records (those its tables pool, where its
    command names other folders)."""
    from tabbench.pooling import pooled_records
    from tabbench.report.site import regenerate_command

    folder = RESULTS / name
    facts = Facts()
    args = regenerate_command(folder) or []
    sources = [a for a in args if a.startswith("results/") and (ROOT / a / "records").is_dir()]
    if (folder / "records").is_dir():
        sources = [f"results/{name}"]
    records = [pooled_records([ROOT / s]) for s in sources]
    records = pd.concat(records, ignore_index=True) if records else pd.DataFrame()
    if not records.empty:
        facts.methods |= set(records["method"])
        facts.datasets |= set(records["dataset"])
    board = folder / "leaderboard.csv"
    if board.exists():
        table = pd.read_csv(board)
        facts.methods |= set(table["method"].dropna())
        facts.datasets |= set(table["dataset"].dropna())
        for _, r in table.iterrows():
            kind = "rank" if r["table"].startswith("rank_") else "elo" if r["table"].startswith("elo") else None
            for column, role in (("value", kind or ("mean" if pd.notna(r["se"]) else None)), ("se", "se"),
                                 ("rank", None)):
                facts.add(r[column], r["method"], r["dataset"] if isinstance(r["dataset"], str) else None, role=role)
    if not records.empty:
        _record_facts(facts, records)
        if not args:  # no tables of its own: its README reports the trials themselves
            _trial_facts(facts, records)
    for csv in [folder / "budget-curves.csv", folder / "probe-corruption" / "corruption.csv"]:
        if csv.exists():
            for _, r in pd.read_csv(csv).iterrows():
                for column, value in r.items():
                    if column in ("fit_seconds", "probe_seconds"):
                        _durations(facts, value, r["method"], r["dataset"])
                    elif column not in ("method", "dataset", "model", "metric", "note"):
                        facts.add(value, r["method"], r["dataset"], role={"mean": "mean", "se": "se"}.get(column))
    budget_elo = folder / "elo-against-budget.csv"  # each method's Elo and mean rank at each budget point
    if budget_elo.exists():
        for _, r in pd.read_csv(budget_elo).iterrows():
            for column, role in (("elo", "elo"), ("elo_low", None), ("elo_high", None), ("mean_rank", "rank")):
                facts.add(r[column], r["method"], None, role=role)
    if board.exists():
        _derived_facts(facts, pd.read_csv(board))
    win = folder / "win-rate.csv"
    if win.exists():
        share = pd.read_csv(win, index_col=0)
        for a in share.index:
            for b in share.columns:
                facts.add(share.loc[a, b], a, None)
                facts.add(share.loc[a, b], b, None)
    for md in [folder / "leaderboard.md", folder / "probe-corruption" / "corruption.md"]:
        if md.exists():
            _table_facts(facts, md.read_text(), facts.methods, facts.datasets)
    return facts


# --- names: which methods and datasets a sentence is about ---------------------------------------------------

#: How the prose names a model's methods, besides their own names.
MODEL_NAMES = {"knn": ["k-NN"], "mlp": ["MLP"], "xgboost": ["XGBoost"], "lightgbm": ["LightGBM"],
               "catboost": ["CatBoost"], "random_forest": ["Random Forest"], "gradient_boosting": ["Gradient Boosting"],
               "tabnet": ["TabNet"], "realmlp": ["RealMLP"], "modernnca": ["ModernNCA"], "tabr": ["TabR"],
               "tabm": ["TabM"], "npt": ["NPT"]}
#: Other names of a method in the prose.
METHOD_NAMES = {"npt": ["reduced budget", "reduced NPT"]}
#: Other names of a dataset in the prose.
DATASET_NAMES = {"yacht_froude_numeric": ["Froude numeric", "Froude number numeric"], "income": ["Adult"],
                 "poker_hand": ["Poker"], "cifar10": ["CIFAR-10"]}


def _pattern(name: str) -> re.Pattern:
    return re.compile(r"(?<![\w-])" + re.escape(name).replace(r"\_", "[_ ]").replace("_", "[_ ]") + r"(?![\w-])",
                      re.I)


def named(text: str, facts: Facts) -> tuple[set, set]:
    """(methods, datasets) that ``text`` names."""
    methods = set()
    for m in facts.methods:
        model = facts.models.get(m, m)
        names = [m, *METHOD_NAMES.get(m, []), *MODEL_NAMES.get(m, []), *MODEL_NAMES.get(model, []),
                 *facts.aliases.get(m, ())]
        if any(_pattern(n).search(text) for n in names):
            methods.add(m)
    datasets = {d for d in facts.datasets if any(_pattern(n).search(text) for n in [d, *DATASET_NAMES.get(d, [])])}
    return methods, datasets


def backed(number: Number, facts: Facts, index: dict) -> bool:
    """Whether a fact about what the number's sentence (else its headings) names prints as the number."""
    value = abs(number.value)
    keys = [(number.digits, f"{value:.{number.digits}f}")]
    if number.percent:  # 12.5% of a share 0.125
        keys.append((number.digits + 2, f"{value / 100:.{number.digits + 2}f}"))
    candidates = [f for k in keys for f in index.get(k, ())]
    if not candidates:
        return False
    # the names nearest the number: its clause's, else its sentence's, else its headings'
    scopes = [named(text, facts) for text in (number.near, number.sentence, number.heading)]
    methods = next((m for m, _ in scopes if m), set())
    datasets = next((d for _, d in scopes if d), set())
    def about(f: Fact) -> bool:
        if f.method is not None and methods and f.method not in methods:
            return False
        if f.dataset is None or f.dataset in datasets:
            return True
        return not datasets and f.method is not None and f.method in methods  # the method's, on a dataset unnamed

    return any(f.kind == number.kind and (number.role is None or f.role == number.role) and about(f)
               for f in candidates)


def readme_facts(readme: Path) -> Facts:
    """The facts a README may cite: its folder's and those of every results folder its prose names."""
    text = prose(readme.read_text()) + " ".join(re.findall(r"`([^`]*)`", readme.read_text()))
    own = readme.parent.name if readme.parent != RESULTS else None
    names = {own} if own else set()
    names |= {d.name for d in RESULTS.iterdir() if (d / "README.md").exists()
              and re.search(r"(?<![\w-])" + re.escape(d.name) + r"(?![\w-])", text)}
    merged = Facts()
    for name in sorted(n for n in names if n):
        f = folder_facts(name)
        merged.methods |= f.methods
        merged.datasets |= f.datasets
        merged.models |= f.models
        merged.aliases |= f.aliases
        merged.facts += f.facts
    return merged
