"""Every path to a benchmark file or a documentation page that the project's text names exists.

Results moved into benchmarks/results/<cpu>/ and benchmarks/ab/<cpu>/ (benchmarks/README.md), and
the tuning record into docs/: a ``benchmarks/...`` or ``docs/...`` path in the README, the CHANGELOG,
the documentation, the benchmark scripts and results, fastgru's code, the tests or CI must still
name a file or folder of the repository. A path that a benchmark run writes and .gitignore keeps out
of the repository (``benchmarks/results.json``, ``docs/_build/html``, under ``docs/_build/``) is a
scratch output; a path followed by ``*``, ``{``
or ``<`` is a pattern (``benchmarks/results/<cpu>/``), and one after a colon names a file of a
commit (``git show 257d996:benchmarks/torch_chains.py``): neither is checked.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Where the project's text lives, and the suffixes of its text files.
PLACES = ["README.md", "CHANGELOG.md", "pyproject.toml", "tox.ini", "conftest.py", ".ci", "docs", "benchmarks"]
PLACES += ["fastgru", "tests"]
SUFFIXES = {".md", ".py", ".toml", ".ini", ".sh", ".json", ".txt", ""}
SKIP = {"__pycache__", "_build", ".pytest_cache", "test_references.py"}  # this file's examples name made-up paths
PATH = re.compile(r"(?<![\w/.:-])((?:benchmarks|docs)/[\w./-]*[\w/])(?=(\.?[*{<])?)")


def text_files():
    for place in PLACES:
        path = ROOT / place
        paths = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for p in paths:
            if p.suffix in SUFFIXES and not SKIP & set(p.relative_to(ROOT).parts):
                yield p


def scratch_outputs():
    """The benchmarks/ and docs/ paths .gitignore names: outputs of a run that the repository does not keep."""
    lines = (ROOT / ".gitignore").read_text().splitlines()
    return {line.strip().rstrip("/") for line in lines if line.strip().startswith(("benchmarks/", "docs/"))}


def is_scratch(path, scratch):
    """Whether ``path`` is a scratch output or lies under one (``docs/_build/html`` under ``docs/_build``)."""
    return any(path == s or path.startswith(s + "/") for s in scratch)


def named_paths(text):
    """The paths ``text`` names, patterns left out: ``benchmarks/x.md.`` is ``benchmarks/x.md``."""
    return [m.group(1).rstrip(".") for m in PATH.finditer(text) if not m.group(2)]


def texts():
    """(the file's path from the root, its text) for every text file of the project."""
    for path in text_files():
        try:
            yield str(path.relative_to(ROOT)), path.read_text()
        except UnicodeDecodeError:
            continue


def missing(documents):
    """``file: path`` for each path that ``documents`` ((name, text) pairs) name and the repository lacks."""
    scratch = scratch_outputs()
    return [
        f"{name}: {path}"
        for name, text in documents
        for path in named_paths(text)
        if not is_scratch(path, scratch) and not (ROOT / path).exists()
    ]


def test_every_named_path_exists():
    found = missing(texts())
    assert not found, "paths that name no file or folder of the repository:\n" + "\n".join(found)


def test_the_paths_are_found_and_checked():
    assert named_paths("see `benchmarks/results/zen4-avx512/stacks_results.md`.") == [
        "benchmarks/results/zen4-avx512/stacks_results.md"
    ]
    assert named_paths("benchmarks/results/<cpu>/x.md and benchmarks/*_ab* and benchmarks/results.{json,md}") == []
    assert named_paths('(docs/tuning.md, "Tuning: geometries")') == ["docs/tuning.md"]
    text = "`benchmarks/stacks_results.md` moved; docs/semantics.md stays; benchmarks/results.json is scratch"
    text += "; so is what a build writes, docs/_build/html, and docs/_buildx is not"
    assert missing([("doc.md", text)]) == ["doc.md: benchmarks/stacks_results.md", "doc.md: docs/_buildx"]
    assert {"README.md", "docs/tuning.md", "fastgru/_tuning.py", ".ci/run"} <= {name for name, _ in texts()}
