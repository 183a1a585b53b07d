"""The README is a promise: its Python examples run, and CI runs its test command.

Each Python block of README.md is one test, run in order in one namespace. A block that imports one
of the optional packages (onnx, onnxruntime, openvino, torch, dask) skips, naming the package, when
that package is not installed, and runs in a copy of the namespace, so that no later block can
depend on it. The examples of "Scale out with Dask" start a cluster of worker processes and need
the dask extra: tests/test_dask.py runs them (test_readme_dask_example_runs_on_a_local_cluster).
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

DASK_SECTION = re.compile(r"\n## Scale out with Dask\n.*?(?=\n## )", flags=re.S)

#: Packages that fastgru does not install and that some README examples import.
OPTIONAL = ("onnx", "onnxruntime", "openvino", "torch", "dask", "distributed")


@dataclass(frozen=True)
class Block:
    line: int  # README line of the block's first line of code
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


def python_blocks(text=README):
    """The Python blocks of the README, in order, but those of "Scale out with Dask"."""
    dask = DASK_SECTION.search(text)
    blocks = []
    for match in re.finditer(r"```python\n(.*?)```", text, flags=re.S):
        if dask and dask.start() <= match.start() < dask.end():
            continue
        heading = re.findall(r"^#+ (.+)$", text[: match.start()], flags=re.M)[-1]
        blocks.append(Block(text.count("\n", 0, match.start(1)) + 1, heading, match.group(1)))
    return blocks


BLOCKS = python_blocks()


@pytest.fixture(scope="module")
def namespace():
    """The namespace the README's blocks share, as a reader's session would."""
    return {}


@pytest.mark.parametrize("block", BLOCKS, ids=[f"line{b.line}" for b in BLOCKS])
def test_python_example_runs(block, namespace):
    for name in block.optional:
        if importlib.util.find_spec(name) is None:
            pytest.skip(f"README.md line {block.line} ({block.heading}) needs {name}: {name} is not installed")
    code = compile("\n" * (block.line - 1) + block.code, str(README_PATH), "exec")  # README's line numbers
    exec(code, dict(namespace) if block.optional else namespace)  # noqa: S102 - the README's own examples


def test_the_examples_leave_their_results(namespace):
    assert namespace["Y"].shape == (8, 1, 20, 32)
    assert namespace["h"].shape == (8, 32)


def test_the_blocks_are_found_with_their_packages():
    assert DASK_SECTION.search(README)
    by_heading = {}
    for block in BLOCKS:
        by_heading.setdefault(block.heading, []).append(block)
    assert [b.optional for b in by_heading["Load a model"]] == [[], ["onnx", "onnxruntime"], ["openvino"]]
    assert [b.optional for b in by_heading["PyTorch models"]] == [["torch"]]
    assert [b.optional for b in by_heading["Compact weights (bfloat16, int8)"]] == [[], ["torch"]]
    assert all(
        not b.optional
        for heading, blocks in by_heading.items()
        if heading not in ("Load a model", "PyTorch models", "Compact weights (bfloat16, int8)")
        for b in blocks
    )
    assert len(BLOCKS) >= 8
    for block in BLOCKS:  # the line numbers point at the code
        assert README.splitlines()[block.line - 1] == block.code.splitlines()[0]


def test_local_links_point_at_files():
    links = re.findall(r"\]\(([\w./-]+\.\w+)\)", README)  # [text](path/file.ext)
    assert "docs/semantics.md" in links
    for link in links:
        assert (ROOT / link).is_file(), link


def test_ci_runs_the_readme_test_command():
    assert len(TEST_COMMANDS) == 1
    assert TEST_COMMANDS[0] in CI_RUN


def test_ci_runs_the_aarch64_step_after_the_suite():
    """README's "Platforms": CI runs the platform cases on aarch64 (.ci/aarch64.sh) after the x86-64 suite."""
    step = "bash .ci/aarch64.sh"
    assert step in README and step in CI_RUN
    assert CI_RUN.index(TEST_COMMANDS[0]) < CI_RUN.index(step)
    assert "tests/test_platform_bits.py" in (ROOT / ".ci" / "aarch64.sh").read_text()


def test_ci_requires_the_optional_packages():
    """CI fails when the torch or oracle tests would skip (conftest.py turns those skips into failures)."""
    required = re.findall(r"^export FASTGRU_REQUIRE=([\w,]+)$", CI_RUN, flags=re.M)
    assert len(required) == 1
    assert set(required[0].split(",")) >= set(OPTIONAL) | {"ml_dtypes"}
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
