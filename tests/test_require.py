"""FASTGRU_REQUIRE (the root conftest.py): the optional packages a run must test with, as CI sets it.

Each case runs pytest in a subprocess, in a folder holding a copy of the repository's conftest.py,
small test files and a fake package ``broken``, which is found but cannot be imported (a dependency
of it is missing); ``absent`` does not exist.
"""

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT_CONFTEST = Path(__file__).resolve().parent.parent / "conftest.py"
FAILS = "\nFASTGRU_REQUIRE names 'broken', but this was skipped because it is missing: "


def _root_conftest():
    """The root conftest.py as a module of its own (``conftest`` is tests/conftest.py here)."""
    spec = importlib.util.spec_from_file_location("fastgru_root_conftest", ROOT_CONFTEST)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TESTS = textwrap.dedent("""
    import pytest

    def test_plain():
        pass

    def test_needs_broken():
        pytest.importorskip("broken")

    @pytest.mark.skipif(True, reason="broken is not installed")
    def test_marked_for_broken():
        pass

    def test_needs_absent():
        pytest.importorskip("absent")

    def test_skips_for_another_reason():
        pytest.skip("Numba has a single thread here")
""")


def run_pytest(folder, require, *args):
    env = {k: v for k, v in os.environ.items() if k != "FASTGRU_REQUIRE" and not k.startswith("PYTEST_")}
    if require is not None:
        env["FASTGRU_REQUIRE"] = require
    env["PYTHONPATH"] = str(folder)  # the fake packages
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, done.stdout + done.stderr


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "conftest.py").write_text(ROOT_CONFTEST.read_text())
    (tmp_path / "broken.py").write_text("import broken_dependency\n")  # found, but cannot import
    (tmp_path / "test_fake.py").write_text(TESTS)
    return tmp_path


def test_without_the_variable_the_tests_skip(folder):
    code, out = run_pytest(folder, None)
    assert code == 0, out
    assert "1 passed, 4 skipped" in out


def test_a_skip_for_a_required_package_fails_naming_it(folder):
    code, out = run_pytest(folder, "broken")
    assert code == 1, out
    assert "1 failed, 1 passed, 2 skipped, 1 error" in out  # a skipif mark skips in set-up: an error there
    assert "FAILED test_fake.py::test_needs_broken - FASTGRU_REQUIRE names 'broken'" in out
    assert "ERROR test_fake.py::test_marked_for_broken - FASTGRU_REQUIRE names 'broken'" in out
    assert (FAILS + "could not import 'broken': No module named 'broken_dependency'\n") in out
    assert FAILS + "broken is not installed\n" in out
    assert "could not import 'absent'" in out and "test_needs_absent - FASTGRU" not in out  # not required
    assert "a skip for want of broken fails this run" in out


def test_a_module_skipped_for_a_required_package_is_an_error(folder):
    (folder / "test_fake.py").write_text(
        "import pytest\n\nbroken = pytest.importorskip('broken')\n\n\ndef test_uses_it():\n    pass\n"
    )
    (folder / "test_other.py").write_text("def test_plain():\n    pass\n")
    code, out = run_pytest(folder, None)
    assert code == 0 and "1 passed, 1 skipped" in out, out
    code, out = run_pytest(folder, "broken")
    assert code == 2, out  # an error during collection
    assert "ERROR collecting test_fake.py" in out and "test_plain" not in out
    assert (FAILS + "could not import 'broken': No module named 'broken_dependency'\n") in out


def test_a_required_package_that_is_not_installed_stops_the_run(folder):
    code, out = run_pytest(folder, "broken, absent,also_absent")
    assert code == 4, out  # a usage error: no test ran
    assert (
        "FASTGRU_REQUIRE=broken, absent,also_absent: absent, also_absent are not installed, and this run must "
        "test with them (install them, or leave them out of FASTGRU_REQUIRE)"
    ) in out
    assert "passed" not in out


@pytest.mark.parametrize(
    "reason, package",
    [
        ("could not import 'onnxruntime': No module named 'onnxruntime'", "onnxruntime"),
        ("could not import 'dask.array': No module named 'dask'", "dask"),
        ("README.md line 120 (Load a model) needs openvino: openvino is not installed", "openvino"),
        ("ml_dtypes is not installed", "ml_dtypes"),
        ("Numba has a single thread here", None),
        ("no partner thread (FASTGRU_SPIN_US=0 or no JIT)", None),
    ],
)
def test_the_reasons_that_name_a_missing_package(reason, package):
    assert _root_conftest().missing_package(reason) == package
