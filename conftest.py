"""pytest's set-up for the whole repository (tests/ and fastgru's doctests).

Optional packages: the tests and doctests that need onnx, onnxruntime, openvino, torch or dask skip
without them, and fastgru/dask.py's doctests are not collected without ``distributed``, nor
fastgru/torch.py's without torch.

``FASTGRU_REQUIRE`` (comma-separated import names, e.g. ``torch,openvino,onnxruntime,onnx,dask``)
names the optional packages a run must test with, as CI sets it: each of them must be installed,
else the run stops before collecting with a message naming it; and a test or module skipped because
one of them is missing fails instead, naming the package. A skip is taken to be for a missing
package ``X`` when its reason says so in one of the forms the suite uses: ``could not import 'X'``
(``pytest.importorskip``) or ``X is not installed`` (README blocks, ``skipif`` marks).
"""

import importlib.util
import os
import re

import pytest

collect_ignore = [] if importlib.util.find_spec("distributed") else ["fastgru/dask.py"]
if importlib.util.find_spec("torch") is None:  # fastgru/torch.py imports torch
    collect_ignore.append("fastgru/torch.py")

#: The import names of the packages this run must test with.
REQUIRED = tuple(
    dict.fromkeys(name.strip() for name in os.environ.get("FASTGRU_REQUIRE", "").split(",") if name.strip())
)

_MISSING = re.compile(r"could not import '([\w.]+)'|\b([\w.]+) is not installed")


def missing_package(reason):
    """The top-level package that a skip reason says is missing, or None."""
    found = _MISSING.search(reason or "")
    return None if found is None else (found.group(1) or found.group(2)).split(".")[0]


def _required_missing(report):
    """The required package whose absence made ``report`` a skip, or None."""
    if not (REQUIRED and report.skipped) or getattr(report, "wasxfail", None) is not None:
        return None
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    package = missing_package(reason)
    return package if package in REQUIRED else None


def _fail(report, package):
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    report.outcome = "failed"
    report.longrepr = (
        f"FASTGRU_REQUIRE names {package!r}, but this was skipped because it is missing: "
        f"{reason.removeprefix('Skipped: ')}"
    )


def pytest_configure(config):
    absent = [name for name in REQUIRED if _find_spec(name) is None]
    if absent:
        raise pytest.UsageError(
            f"FASTGRU_REQUIRE={os.environ['FASTGRU_REQUIRE']}: {', '.join(absent)} "
            f"{'is' if len(absent) == 1 else 'are'} not installed, and this run must test "
            "with them (install them, or leave them out of FASTGRU_REQUIRE)"
        )


def _find_spec(name):
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    package = _required_missing(report)
    if package is not None:
        _fail(report, package)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    report = outcome.get_result()
    package = _required_missing(report)
    if package is not None:
        _fail(report, package)


def pytest_terminal_summary(terminalreporter):
    if REQUIRED:
        terminalreporter.write_line(f"FASTGRU_REQUIRE: a skip for want of {', '.join(REQUIRED)} fails this run")
