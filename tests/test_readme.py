"""The README is a promise: its Python examples run, and CI runs its test command."""

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


#: The examples of "Scale out with Dask" start a cluster of worker processes and need the dask extra:
#: tests/test_dask.py runs them (test_readme_dask_example_runs_on_a_local_cluster); here, all the others.
DASK_SECTION = re.compile(r"\n## Scale out with Dask\n.*?(?=\n## )", flags=re.S)


def test_python_examples_run_in_order():
    assert DASK_SECTION.search(README)
    blocks = re.findall(r"```python\n(.*?)```", DASK_SECTION.sub("", README), flags=re.S)
    assert len(blocks) >= 2
    namespace = {}
    for block in blocks:
        if "import torch" in block and importlib.util.find_spec("torch") is None:
            continue  # "PyTorch models" needs torch (tests/test_torch_module.py skips without it too)
        exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 - the README's own examples
    assert namespace["Y"].shape == (8, 1, 20, 32)
    assert namespace["h"].shape == (8, 32)


def test_ci_runs_the_readme_test_command():
    commands = re.findall(r"## Run the tests\s+```bash\n(.*?)\n```", README, flags=re.S)
    assert len(commands) == 1
    assert commands[0] in (ROOT / ".ci" / "run").read_text()


def test_the_demo_of_the_first_command_runs(capsys):
    assert "python -m fastgru.demo" in README
    from fastgru import demo

    demo.main()
    out = capsys.readouterr().out
    assert "Y (4, 2, 10, 32)" in out and "steps computed per row [10, 7, 3, 0]" in out
    assert out.count("True") == 3
