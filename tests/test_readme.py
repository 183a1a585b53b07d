"""The README and the documentation are a promise: their Python examples run, and CI runs the
README's test command.

Each Python block of README.md and of every page of docs/ is one test. A document's blocks run in
order in one namespace of their own, in a folder of their own, as a reader of that page would run
them. A block that imports one of the optional packages (onnx, onnxruntime, openvino, torch, dask,
matplotlib) skips, naming the package, when that package is not installed, and runs in a copy of
the namespace, so that no later block can depend on it. A block whose first line is
``# fragment of <file>`` shows part of another file and is only compiled. The examples of
docs/guide/dask.md start a cluster of worker processes and need the dask extra:
tests/test_dask.py runs them (test_the_dask_examples_run_on_a_local_cluster).
"""

import ast
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README_PATH = ROOT / "README.md"
README = README_PATH.read_text()
CI_RUN = (ROOT / ".ci" / "run").read_text()
#: The commands of "Run the tests".
TEST_COMMANDS = re.findall(r"## Run the tests\s+```bash\n(.*?)\n```", README, flags=re.S)
#: The documents whose Python blocks run here (the Dask page's run in tests/test_dask.py).
DASK_PAGE = "docs/guide/dask.md"
DOCUMENTS = ["README.md"] + sorted(
    str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md") if "_build" not in p.parts
)
DOCUMENTS.remove(DASK_PAGE)

#: Packages that fastgru does not install and that some examples import.
OPTIONAL = ("onnx", "onnxruntime", "openvino", "torch", "dask", "distributed", "matplotlib")
FRAGMENT = "# fragment of "


@dataclass(frozen=True)
class Block:
    doc: str  # the document, from the repository's root
    line: int  # the document's line of the block's first line of code
    heading: str  # the section it stands in
    code: str

    @property
    def packages(self):
        """The top-level packages the block imports, in order."""
        names = []
        for node in ast.walk(ast.parse(self.code)):
            if isinstance(node, ast.Import):
                names += [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names.append(node.module.split(".")[0])
        return list(dict.fromkeys(names))

    @property
    def optional(self):
        return [name for name in self.packages if name in OPTIONAL]

    @property
    def fragment(self):
        return self.code.startswith(FRAGMENT)


def python_blocks(doc):
    """The Python blocks of ``doc`` (a path from the root), in order."""
    text = (ROOT / doc).read_text()
    blocks = []
    for match in re.finditer(r"^```python\n(.*?)^```", text, flags=re.S | re.M):
        headings = re.findall(r"^#+ (.+)$", text[: match.start()], flags=re.M)
        blocks.append(Block(doc, text.count("\n", 0, match.start(1)) + 1, headings[-1], match.group(1)))
    return blocks


BLOCKS = [block for doc in DOCUMENTS for block in python_blocks(doc)]


@pytest.fixture(scope="module")
def namespaces():
    """One namespace per document, which its blocks share."""
    return {}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """One working folder per document, for the files its examples write."""
    return {doc: tmp_path_factory.mktemp(Path(doc).stem) for doc in DOCUMENTS}


def run(block, namespace):
    """Run ``block`` in ``namespace`` with the document's line numbers in tracebacks."""
    code = compile("\n" * (block.line - 1) + block.code, str(ROOT / block.doc), "exec")
    if not block.fragment:
        exec(code, dict(namespace) if block.optional else namespace)  # noqa: S102 - the documents' own examples


@pytest.mark.parametrize("block", BLOCKS, ids=[f"{b.doc}:{b.line}" for b in BLOCKS])
def test_python_example_runs(block, namespaces, folders, monkeypatch):
    for name in block.optional:
        if importlib.util.find_spec(name) is None:
            pytest.skip(f"{block.doc} line {block.line} ({block.heading}) needs {name}: {name} is not installed")
    monkeypatch.chdir(folders[block.doc])
    run(block, namespaces.setdefault(block.doc, {}))


def test_the_readme_example_leaves_its_results(namespaces):
    if "README.md" not in namespaces:
        pytest.skip("the README's example did not run in this session (run the whole module)")
    assert namespaces["README.md"]["Y"].shape == (8, 1, 20, 32)
    assert namespaces["README.md"]["Ho"].shape == (8, 1, 32)


def test_the_blocks_are_found_with_their_packages():
    by_doc = {}
    for block in BLOCKS:
        by_doc.setdefault(block.doc, []).append(block)
    assert [b.optional for b in by_doc["docs/guide/models.md"]] == [[], [], [], ["onnx", "onnxruntime"], ["openvino"]]
    assert [b.optional for b in by_doc["docs/guide/pytorch.md"]] == [["torch"], ["torch"]]
    assert [b.optional for b in by_doc["docs/guide/compact-weights.md"]] == [[], ["torch"]]
    assert [b.fragment for b in by_doc["docs/contributing.md"]] == [True]
    assert len(by_doc["README.md"]) == 1 and not by_doc["README.md"][0].optional
    for doc in ("docs/getting-started.md", "docs/guide/ops.md", "docs/guide/streams.md", "docs/benchmarking.md"):
        assert by_doc[doc], doc  # the pages whose examples a reader runs first
    for block in BLOCKS:  # the line numbers point at the code
        assert (ROOT / block.doc).read_text().splitlines()[block.line - 1] == block.code.splitlines()[0]
    assert python_blocks(DASK_PAGE) and DASK_PAGE not in DOCUMENTS


def test_a_fragment_is_compiled_not_run():
    fragment = Block("doc.md", 1, "h", FRAGMENT + "x.py\nfigure(UNDEFINED)\n")
    run(fragment, {})  # only compiled: UNDEFINED is never looked up
    with pytest.raises(SyntaxError):
        run(Block("doc.md", 1, "h", FRAGMENT + "x.py\nfigure(\n"), {})
    with pytest.raises(NameError):
        run(Block("doc.md", 1, "h", "figure(UNDEFINED)\n"), {})


def test_the_readme_is_short_and_links_into_the_documentation():
    assert len(README.splitlines()) <= 250
    links = re.findall(r"\]\(([\w./-]+\.\w+)\)", README)  # [text](path/file.ext)
    assert "docs/semantics.md" in links and "docs/getting-started.md" in links
    for link in links:
        assert (ROOT / link).is_file(), link
    index = (ROOT / "docs" / "index.md").read_text()
    assert "```{include} ../README.md" in index  # the site's home page is the README: it says all the README says


def test_ci_runs_the_readme_test_command():
    assert len(TEST_COMMANDS) == 1
    assert TEST_COMMANDS[0] in CI_RUN


def test_ci_runs_the_aarch64_step_after_the_suite():
    """README's "Run the tests": CI runs the platform cases on aarch64 (.ci/aarch64.sh) after the x86-64 suite."""
    step = "bash .ci/aarch64.sh"
    assert step in README and step in CI_RUN
    assert CI_RUN.index(TEST_COMMANDS[0]) < CI_RUN.index(step)
    assert "tests/test_platform_bits.py" in (ROOT / ".ci" / "aarch64.sh").read_text()


def test_ci_builds_the_documentation_and_checks_the_wheel():
    """CI builds the site with warnings as errors, as ``tox -e docs`` does, and installs the built wheel
    and sdist in fresh virtualenvs to run the README's example (docs/contributing.md)."""
    tox = (ROOT / "tox.ini").read_text()
    docs = (ROOT / ".ci" / "docs").read_text()
    build = "sphinx -W --keep-going -b html docs docs/_build/html"
    assert build in tox and build in docs
    assert CI_RUN.index(TEST_COMMANDS[0]) < CI_RUN.index("bash .ci/docs") < CI_RUN.index("bash .ci/wheel")
    wheel = (ROOT / ".ci" / "wheel").read_text()
    assert "python -m build" in wheel and "README.md" in wheel and "python -m fastgru.demo" in wheel


def test_ci_requires_the_optional_packages():
    """CI fails when the torch or oracle tests would skip (conftest.py turns those skips into failures)."""
    required = re.findall(r"^export FASTGRU_REQUIRE=([\w,]+)$", CI_RUN, flags=re.M)
    assert len(required) == 1
    assert set(required[0].split(",")) >= set(OPTIONAL) - {"matplotlib"} | {"ml_dtypes"}
    assert CI_RUN.index("export FASTGRU_REQUIRE=") < CI_RUN.index(TEST_COMMANDS[0])
    assert "torch==2.13.0" in CI_RUN and "exit 1" in CI_RUN
    assert f"`FASTGRU_REQUIRE={required[0]}`" in " ".join(README.split())  # README says what CI requires


def test_the_demo_of_the_first_command_runs(capsys):
    assert "python -m fastgru.demo" in README
    from fastgru import demo

    demo.main()
    out = capsys.readouterr().out
    assert "Y (4, 2, 10, 32)" in out and "steps computed per row [10, 7, 3, 0]" in out
    assert out.count("True") == 3
