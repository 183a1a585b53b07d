"""The kernel geometries (fastgru/_isa.py, fastgru/_tuning.py): which one a CPU gets, the override
FASTGRU_ISA and its errors, and every geometry this machine can run passing the kernel and op tests
(the rest of the suite runs the geometry of this process)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fastgru import FastGRUError, _isa
from fastgru._tuning import GEOMETRIES

ROOT = Path(__file__).resolve().parent.parent
AVX512, AVX2 = frozenset({"avx512f", "avx2", "fma"}), frozenset({"avx2", "fma"})


@pytest.mark.parametrize(
    ("features", "name"),
    [(AVX512, "avx512"), (AVX2, "avx2"), (frozenset(), "generic"), (frozenset({"avx2"}), "generic")],
)
def test_the_best_geometry_the_target_has(features, name):
    assert _isa.choose("", "cpu", features, AVX512).name == name
    assert _isa.choose("auto", "cpu", features, AVX512).name == name


@pytest.mark.parametrize("name", list(GEOMETRIES))
def test_any_geometry_the_target_has_can_be_asked_for(name):
    assert _isa.choose(name.upper(), "znver4", AVX512, AVX512).name == name


def test_a_geometry_the_target_lacks_is_a_clear_error():
    with pytest.raises(
        FastGRUError,
        match=r"FASTGRU_ISA=avx512 needs avx512f, which the kernels' target CPU znver3 "
        r"lacks; this CPU can run avx2, generic",
    ):
        _isa.choose("avx512", "znver3", AVX2, AVX512)


def test_an_unknown_geometry_is_a_clear_error():
    with pytest.raises(FastGRUError, match=r"FASTGRU_ISA is 'sse9'; expected one of avx512, avx2, generic or auto"):
        _isa.choose("sse9", "znver4", AVX512, AVX512)


def test_a_target_with_features_this_cpu_lacks_is_refused():
    """NUMBA_CPU_NAME naming a newer CPU would compile instructions this one cannot run: an error at
    import, not an illegal instruction later."""
    with pytest.raises(
        FastGRUError,
        match=r"the kernels would compile for sapphirerapids with avx512f, which "
        r"this CPU \(.*\) lacks",
    ):
        _isa.choose("", "sapphirerapids", AVX512, AVX2)


def _python(code, **env):
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env={**os.environ, **env}
    )


def test_the_error_comes_at_import():
    done = _python("import fastgru", FASTGRU_ISA="sse9")
    assert done.returncode != 0 and "FastGRUError: FASTGRU_ISA is 'sse9'" in done.stderr


def test_info_names_the_geometry():
    done = _python("from fastgru import _cli; print(_cli.info())")
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(":", 1) for line in done.stdout.splitlines())
    assert lines["geometry"].split()[0] == _isa.GEOMETRY.name


def _environment(name):
    """The environment that runs geometry ``name`` here, or None if this CPU cannot run it. The avx2
    geometry compiles for an AVX2 CPU (znver3), with 16 vector registers, as on a real AVX2 machine."""
    host = _isa.host_features()
    if not set(GEOMETRIES[name].requires) <= host:
        return None
    env = {"FASTGRU_ISA": name}
    if name == "avx2" and "avx512f" in host:
        env.update(NUMBA_CPU_NAME="znver3", NUMBA_CPU_FEATURES="")
    return env


@pytest.mark.parametrize("name", list(GEOMETRIES))
def test_every_geometry_this_cpu_can_run_passes_the_kernel_tests(name):
    if name == _isa.GEOMETRY.name:
        pytest.skip(f"{name} is this process's geometry: the whole suite runs it")
    env = _environment(name)
    if env is None:
        pytest.skip(f"this CPU cannot run the {name} geometry (it needs {', '.join(GEOMETRIES[name].requires)})")
    tests = [
        "tests/test_kernel_paths.py",
        "tests/test_gru_sequence.py",
        "tests/test_gru_cell.py",
        "tests/test_augru_sequence.py",
        "tests/test_streaming.py",
        "tests/test_compact_weights.py",
        "tests/test_packing.py",
        "tests/test_direct.py",
        "tests/test_platform_bits.py",  # the bits other platforms are compared with are this geometry's
    ]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
        env={**os.environ, **env},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout.splitlines()[-1]
    check = _python("from fastgru import _isa; print(_isa.GEOMETRY.name, _isa.TARGET_CPU)", **env)
    assert check.stdout.split()[0] == name  # the subprocess really ran that geometry
