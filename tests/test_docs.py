"""The documentation's promises: docs/semantics.md's example error messages are fastgru's own, every
public name is in the API reference, every chart is drawn from its committed JSON, and the release
is the CHANGELOG's newest version (docs/contributing.md, "Documentation")."""

import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

import fastgru
import fastgru.benchmark

DOC = (Path(__file__).resolve().parent.parent / "docs" / "semantics.md").read_text()
MESSAGES = re.search(r"## Errors\n.*?```\n(.*?)```", DOC, flags=re.S).group(1).strip().splitlines()


def _call(case):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2, 3, 32)).astype(np.float32)
    H0 = np.zeros((2, 1, 32), np.float32)
    W = np.zeros((1, 96, 32), np.float32)
    R = np.zeros((1, 96, 32), np.float32)
    B = np.zeros((1, 96), np.float32)
    lengths = [3, 3]
    if case == "W":
        W = np.zeros((1, 96, 16), np.float32)
    elif case == "X":
        X = X.astype(np.int64)
    else:
        lengths = [4, 3]
    fastgru.gru_sequence(X, H0, lengths, W, R, B)


@pytest.mark.parametrize(
    "case, error", [("W", fastgru.FastGRUError), ("X", TypeError), ("sequence_lengths", fastgru.FastGRUError)]
)
def test_the_example_messages_are_fastgrus(case, error):
    expected = [m.strip() for m in MESSAGES if re.match(rf"gru_sequence: {case}[ \[]", m.strip())]
    assert len(expected) == 1, MESSAGES
    with pytest.raises(error) as raised:
        _call(case)
    assert str(raised.value) == expected[0]


# ----------------------------------------------------------------------------------- the site's checks

ROOT = Path(__file__).resolve().parent.parent


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PUBLIC_API = _load("fastgru_docs_public_api", ROOT / "docs" / "_ext" / "public_api.py")
CHARTS = _load("fastgru_bench_charts", ROOT / "benchmarks" / "charts.py")


def documented_names():
    """The names the API reference's autodoc directives document (docs/api/*.rst)."""
    names = set()
    for page in (ROOT / "docs" / "api").glob("*.rst"):
        names |= set(re.findall(r"^\.\. auto\w+:: ([\w.]+)", page.read_text(), flags=re.M))
    return names


def test_every_public_name_is_in_the_api_reference():
    """What the docs build checks too (docs/_ext/public_api.py, with -W): read from the pages here."""
    pytest.importorskip("torch")  # fastgru.torch and fastgru.dask are public submodules
    pytest.importorskip("dask")
    assert PUBLIC_API.missing(documented_names()) == []


def test_a_public_name_missing_from_the_reference_is_found():
    pytest.importorskip("torch")
    pytest.importorskip("dask")
    documented = documented_names() - {"fastgru.warmup", "fastgru.dask.CACHE_SIZE", "fastgru.benchmark.SUITES"}
    assert PUBLIC_API.missing(documented) == ["fastgru.warmup", "fastgru.benchmark.SUITES", "fastgru.dask.CACHE_SIZE"]
    names = PUBLIC_API.public_names(fastgru.benchmark)  # no __all__: what it defines, not what it imports
    assert {"compare", "Shape", "SUITES", "TOLERANCES", "CandidateMismatch"} <= set(names)
    assert not {"np", "Path", "gru_sequence", "FastGRUError", "DTypeLike", "_FUNCTIONS"} & set(names)
    assert PUBLIC_API.public_names(fastgru) == fastgru.__all__


def test_every_chart_is_drawn_from_its_json_as_committed():
    """Each chart of the performance pages names its JSON and the JSON's SHA-256 (benchmarks/charts.py):
    a JSON rerun or edited without its chart redrawn fails here."""
    charts = CHARTS.charts()
    assert len(charts) >= 9  # stacks, small calls and weight dtypes on the CPUs that ran them
    assert CHARTS.stale() == [], "run python benchmarks/charts.py"
    for source, png in charts:
        assert CHARTS.png_text(png)["Source"] == str(source.relative_to(ROOT))


def test_a_stale_chart_is_found(tmp_path):
    source, png = CHARTS.charts()[0]
    changed = tmp_path / source.name
    changed.write_bytes(source.read_bytes() + b"\n")
    assert CHARTS.stale([(source, png)]) == [] and CHARTS.stale([(changed, png)]) == [png]
    assert CHARTS.stale([(source, tmp_path / "missing.png")]) == [tmp_path / "missing.png"]


def test_the_release_is_the_changelogs_newest_version():
    import tomllib

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    released = re.findall(r"^## (\d+\.\d+\.\d+) — (\d{4}-\d{2}-\d{2})$", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert version == fastgru.__version__ == released[0][0]
    assert [v for v, _ in released] == sorted((v for v, _ in released), key=lambda v: tuple(map(int, v.split("."))))[
        ::-1
    ]
    sections = re.findall(
        r"^### (\w+)", (ROOT / "CHANGELOG.md").read_text().split(f"## {version} ")[1].split("\n## ")[0], re.M
    )
    assert sections == ["Added", "Changed", "Fixed", "Performance"]
