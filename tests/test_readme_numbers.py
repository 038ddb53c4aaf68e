"""No results README states a number that its records contradict.

Every number in the hand-written text of results/README.md and results/*/README.md must be an input of its
protocol (declared in tests/readme_inputs.py with the reason), a measurement cited from the document that holds it
(found there), or a result found among the facts the records give for what its sentence names
(tests/readme_numbers.py says how). The generated blocks are checked by tests/test_report_site.py.
"""

import re
from pathlib import Path

import pytest

from tests import readme_inputs
from tests.readme_numbers import RESULTS, ROOT, backed, numbers, readme_facts
from tests.conftest import require_report_extra

READMES = [RESULTS / "README.md"] + sorted(RESULTS.glob("*/README.md"))


def name_of(readme: Path) -> str:
    return "results" if readme.parent == RESULTS else readme.parent.name


def claimed(name: str, text: str) -> tuple[list, set]:
    """(the claims of CLAIMS whose numbers differ from what the records give, the numbers the claims checked)."""
    wrong, checked = [], set()
    folder = readme_inputs.folder(name)
    for pattern, compute in readme_inputs.CLAIMS.get(name, []):
        found = re.search(pattern, text)
        if found is None:
            wrong.append(f"the claim {pattern!r} is no longer in the README: change or remove it in "
                         "tests/readme_inputs.py")
            continue
        for printed, value in zip(found.groups(), compute(folder)):
            digits = len(printed.split(".")[1]) if "." in printed else 0
            if abs(float(printed.replace(",", "")) - value) > 0.5 * 10 ** -digits + 1e-9:  # not what it rounds to
                wrong.append(f"{printed!r} where the records give {value:.{digits}f}: {found.group(0)!r}")
            checked.add(printed)
    return wrong, checked


def unbacked(readme: Path, text: str | None = None) -> list:
    """The numbers of ``text`` (the README's own by default) that are neither declared, nor claimed and right, nor
    backed by a fact."""
    name = name_of(readme)
    text = readme.read_text() if text is None else text
    declared = readme_inputs.declared(name)
    cited = readme_inputs.cited(name)
    out, checked = claimed(name, " ".join(text.split()))
    facts = readme_facts(readme)
    found = numbers(text)
    index = facts.index({n.digits for n in found} | {n.digits + 2 for n in found if n.percent})
    for number in found:
        if {number.text, number.text.lstrip("+-−")} & (declared | cited | checked):
            continue
        if not backed(number, facts, index):
            out.append(f"{number.text!r} in: {' '.join(number.sentence.split())[:160]}")
    return out


@pytest.fixture(scope="module", autouse=True)
def records_needed():
    require_report_extra()


@pytest.mark.parametrize("readme", READMES, ids=name_of)
def test_every_number_in_a_results_readme_is_an_input_a_citation_or_what_the_records_give(readme):
    missing = unbacked(readme)
    assert not missing, (f"{readme.relative_to(ROOT)}: numbers that no record backs (fix them from the tables, or "
                         "declare an input in tests/readme_inputs.py):\n  " + "\n  ".join(missing))


@pytest.mark.parametrize("name", sorted(readme_inputs.CITED))
def test_a_cited_number_is_in_the_document_it_is_cited_from(name):
    for source, values in readme_inputs.CITED[name].items():
        text = (ROOT / source).read_text()
        for value in values.split():
            assert value in text, f"results/{name}/README.md cites {value} from {source}, which does not hold it"


@pytest.mark.parametrize("name", sorted(readme_inputs.EXTERNAL))
def test_a_number_measured_outside_tabbench_stands_beside_its_source(name):
    text = " ".join((RESULTS / name / "README.md").read_text().split())
    for source, values in readme_inputs.EXTERNAL[name].items():
        for value in values.split():
            at = [m.start() for m in re.finditer(re.escape(value), text)]
            assert at, f"results/{name}/README.md no longer states {value}: remove it from EXTERNAL"
        assert source in text, f"results/{name}/README.md states numbers from {source} without naming it"


def test_a_number_that_drifts_from_its_records_fails():
    """The check fails on a stale number: uci-large-cpu's prose with NPT's Protein RMSE changed as a rerun would
    change it, or with an Elo no record gives."""
    readme = RESULTS / "uci-large-cpu" / "README.md"
    text = readme.read_text()
    stated = re.search(r"far from its published results everywhere\*\*: Protein RMSE (\d\.\d\d)", text)
    assert stated and not unbacked(readme)
    stale = stated[0][:-4] + f"{float(stated[1]) + 0.03:.2f}"
    assert unbacked(readme, text.replace(stated[0], stale))
    assert unbacked(readme, text.replace(stated[0], stated[0] + " (Elo 1290)"))


def test_an_input_is_declared_with_a_reason():
    for name, entries in readme_inputs.INPUTS.items():
        assert (RESULTS / name / "README.md").exists() or name == "results", name
        for values, reason in entries:
            assert values.split() and len(reason) > 10, (name, values)


def test_the_readme_opening_points_to_the_generated_answer_before_its_first_command():
    """A newcomer's first screen says where the answer is (issue 63): the links before the first indented command
    lead to the answer atop results/README.md and to results/index.html, both generated by `tabbench report`."""
    text = (ROOT / "README.md").read_text()
    opening = text[:text.index("\n    pip install")]
    assert "[results/README.md](results/README.md)" in opening and "[results/index.html](results/index.html)" in opening
    assert (RESULTS / "index.html").is_file()
    assert "<!-- The answer: generated by `tabbench report`" in (RESULTS / "README.md").read_text()
