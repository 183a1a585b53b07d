"""Every figure of the documents comes from a committed results file (docs/contributing.md, "Figures").

``benchmarks/figures.py`` lists the claims: each ``figure(...)`` names a document, a quote of it, the
committed file the quote's figures come from, and those figures; each ``table(...)`` a table of a
document that a benchmark script generated between markers. The tests check that each quote is
still in its document, that each figure is in its source, that each generated table is its source's
markdown, and that every figure with a unit (µs, ms, s, GFLOP/s, x, ulp, ...) in the documents and
in fastgru's docstrings stands inside a claim's quote. Nothing is measured here.
"""

import ast
import importlib.util
import json
import math
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_SPEC = importlib.util.spec_from_file_location("fastgru_figures", ROOT / "benchmarks" / "figures.py")
CLAIMS = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(CLAIMS)
FIGURES, TABLES = CLAIMS.FIGURES, CLAIMS.TABLES
#: The record of the tuning measurements, itself a source of figures (docs/contributing.md, "Figures").
TUNING = "docs/tuning.md"
#: The documents whose figures must all be claimed (every page of docs/ but the tuning record); fastgru's
#: docstrings are checked as well.
DOCUMENTS = [
    "README.md",
    "CHANGELOG.md",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md") if str(p.relative_to(ROOT)) != TUNING),
]

#: A number as the documents and the results files write it: 2,451 or 1_000 or 0.46 or 3.6e-7 or 1.5·10⁸.
_NUMBER = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:_\d{3})+|\d+(?:\.\d+)?(?:[eE][-+]?\d+|·10[⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+)?"
_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")
#: A figure with a unit, which must stand in a claim's quote.
_MEASURED = re.compile(
    rf"(?<![\w.,·*-])(?:{_NUMBER})(?:-(?:{_NUMBER}))?\s?"
    r"(?:µs|ms|s|GFLOP/s|MFLOP|x|times|ulp|steps per second|streams\s+per\s+second)(?!\w)"
)


def value(text):
    """(the number ``text`` writes, its decimals): ``"2,451"`` is (2451.0, 0), ``"0.46"`` (0.46, 2),
    ``"3.6e-7"`` (3.6e-7, 8), ``"1.5·10⁸"`` (1.5e8, -7): the place of its last written digit."""
    text = text.replace(",", "").replace("_", "").replace("·10", "e").translate(_SUPERSCRIPTS)
    mantissa, _, exponent = text.lower().partition("e")
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    return float(f"{mantissa}e{exponent or 0}"), decimals - int(exponent or 0)  # a hash like 3e5541a: inf


def rounds_to(number, figure):
    """Whether ``number`` rounded as ``figure`` is written (its decimals) gives ``figure``."""
    target, decimals = value(figure)
    return math.isclose(target, number, rel_tol=1e-12) or abs(number - target) <= 0.5 * 10**-decimals * (1 + 1e-9)


def numbers(text):
    return [value(m)[0] for m in re.findall(_NUMBER, text)]


def normal(text):
    """Markdown and docstring text with its line breaks and indents as single spaces."""
    return " ".join(text.split())


def docstrings():
    """{"fastgru/x.py": the module's docstrings, joined} for every module of fastgru."""
    texts = {}
    for path in sorted((ROOT / "fastgru").rglob("*.py")):
        tree = ast.parse(path.read_text())
        nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef)))]
        texts[str(path.relative_to(ROOT))] = "\n\n".join(filter(None, (ast.get_docstring(n) for n in nodes)))
    return texts


def text_of(doc):
    """A document's text, its generated tables left out (their figures are the tables' sources')."""
    text = docstrings()[doc] if doc.endswith(".py") else (ROOT / doc).read_text()
    return re.sub(r"<!-- ([\w-]+):start -->.*?<!-- \1:end -->", "", text, flags=re.S)


def _id(claim):
    return f"{claim['doc']}:{claim['quote'][:40]}"


def sources(claim):
    names = claim["source"] if isinstance(claim["source"], list) else [claim["source"]]
    return [(ROOT / name).read_text() for name in names]


@pytest.mark.parametrize("claim", FIGURES, ids=_id)
def test_each_quote_is_in_its_document(claim):
    assert normal(claim["quote"]) in normal(text_of(claim["doc"])), f"{claim['doc']} no longer says {claim['quote']!r}"


def problems(claim, texts):
    """What is wrong with the figures of ``claim`` given its sources' ``texts``: a figure ``A`` is some
    number of the source rounded as A is written; ``A = B`` says that the source writes it as B (a
    constant, another unit): B is in the source verbatim, and one of its numbers, scaled by a power
    of ten, rounds to A's last number (of a range 2-20, its end)."""
    found = [] if claim["figures"] else ["a claim quotes at least one figure"]
    for figure in claim["figures"]:
        quoted, _, written = (part.strip() for part in figure.partition(" = "))
        if quoted not in normal(claim["quote"]):
            found.append(f"{quoted!r} is not in the quote {claim['quote']!r}")
            continue
        number = re.findall(_NUMBER, quoted)[-1]
        if written and not any(written in text for text in texts):
            found.append(f"{written!r} is not in {claim['source']}")
        elif written and not any(rounds_to(n * 10.0**k, number) for n in numbers(written) for k in range(-9, 10)):
            found.append(f"{quoted} is not {written}")
        elif not written and not any(rounds_to(n, number) for text in texts for n in numbers(text)):
            found.append(f"{claim['doc']} quotes {quoted} ({claim['quote']!r}); {claim['source']} has no such number")
    return found


@pytest.mark.parametrize("claim", FIGURES, ids=_id)
def test_each_figure_is_in_its_source(claim):
    assert not problems(claim, sources(claim))


def test_a_figure_that_its_results_file_lacks_fails():
    source = ["| b1 | 2,451.3 µs | 1.23 |", "SPIN_US = 1000"]
    claim = {"doc": "README.md", "quote": "took 2,451 µs, 1.23x, spinning 1 ms", "source": "x.md"}
    assert not problems({**claim, "figures": ["2,451", "1.23", "1 = SPIN_US = 1000"]}, source)
    claim["quote"] = "took 2,452 µs, 1.24x, spinning 2 ms"
    assert len(problems({**claim, "figures": ["2,452", "1.24", "2 = SPIN_US = 1000"]}, source)) == 3


@pytest.mark.parametrize("table", TABLES, ids=lambda t: f"{t['doc']}:{t['marker']}")
def test_each_generated_table_is_its_source(table):
    """The text between ``<!-- marker:start -->`` and ``<!-- marker:end -->`` is the markdown the
    benchmark script wrote (``table["command"]`` writes both)."""
    text = (ROOT / table["doc"]).read_text()
    start, end = f"<!-- {table['marker']}:start -->\n", f"<!-- {table['marker']}:end -->"
    assert text.count(start) == 1 and text.count(end) == 1, f"{table['doc']} has no {table['marker']} markers"
    block = text.split(start, 1)[1].split(end, 1)[0]
    assert block == (ROOT / table["source"]).read_text(), f"run {table['command']}"


@pytest.mark.parametrize("doc", [*DOCUMENTS, "fastgru (docstrings)"])
def test_every_measured_figure_is_claimed(doc):
    """A figure with a unit that no claim quotes has no known source: claim it or remove it."""
    texts = docstrings() if doc.startswith("fastgru") else {doc: text_of(doc)}
    unclaimed = []
    for name, text in texts.items():
        flat = normal(text)
        covered = [False] * len(flat)
        quotes = [c["quote"] for c in FIGURES if c["doc"] == name] + [q for d, q in CLAIMS.PENDING if d == name]
        for quote in map(normal, quotes):
            for match in re.finditer(re.escape(quote), flat):
                covered[match.start() : match.end()] = [True] * len(quote)
        unclaimed += [
            f"{name}: {m.group(0)!r}" for m in _MEASURED.finditer(flat) if not all(covered[m.start() : m.end()])
        ]
    assert not unclaimed, "figures without a claim in benchmarks/figures.py:\n" + "\n".join(unclaimed)


def test_the_checks_catch_a_figure_that_the_source_lacks():
    assert rounds_to(2451.0, "2,451") and rounds_to(25990.7 / 1000, "26.0") and rounds_to(1.5e8, "1.5·10⁸")
    assert not rounds_to(2451.0, "2,452") and not rounds_to(0.47, "0.46") and not rounds_to(2e-5, "1e-5")
    assert value("3.6e-7") == (3.6e-7, 8) and value("1.5·10⁸") == (1.5e8, -7) and value("26,263") == (26263.0, 0)
    assert [m.group(0) for m in _MEASURED.finditer("took 2,451 µs, 1.23x, 10-20 ms and 2 ulp in h256")] == [
        "2,451 µs",
        "1.23x",
        "10-20 ms",
        "2 ulp",
    ]


def test_pending_figures_are_few_and_still_there():
    """Figures of modules other work is changing, not yet sourced (benchmarks/figures.py, PENDING):
    each is still in its docstring (else drop it from the list), and the list does not grow."""
    assert len(CLAIMS.PENDING) <= 3
    for doc, quote in CLAIMS.PENDING:
        assert normal(quote) in normal(text_of(doc)), f"{doc} no longer says {quote!r}: remove it from PENDING"


@pytest.mark.parametrize(
    "path", sorted((ROOT / "benchmarks" / "results").glob("*/cold_start_results.json")), ids=lambda p: p.parent.name
)
def test_the_cold_start_table_is_its_json(path):
    """Each benchmarks/results/<cpu>/cold_start_results.md starts with what ``cold_start.py --report`` makes
    of the JSON beside it (a note on how the run was made may follow)."""
    spec = importlib.util.spec_from_file_location("fastgru_cold_start", ROOT / "benchmarks" / "cold_start.py")
    cold_start = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cold_start)
    results = json.loads(path.read_text())
    assert {"date", "machine"} <= set(results) and {"isa", "geometry", "cpu"} <= set(results["machine"])
    assert path.with_suffix(".md").read_text().startswith(cold_start.table(results))


def test_the_cold_start_tables_are_found():
    assert len(sorted((ROOT / "benchmarks" / "results").glob("*/cold_start_results.json"))) >= 2
