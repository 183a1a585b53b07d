"""Every platform computes the bits that x86-64 computes: the cases of tests/platform_cases.py (every
op, float32 and float64, ragged lengths, both directions, AUGRU, streams, the state pool), on every
kernel path this process has, against tests/data/platform_bits.npz, written on x86-64 in the generic
geometry. The x86-64 suite runs it in its own geometry, and CI runs it on aarch64 under emulation
(.ci/aarch64.sh).

Why the bits can agree across geometries and CPUs: every element of a matrix product gets the same
fused multiply-adds in the same order, whatever the tile (``_kernels/microkernel.py``, explicit
``llvm.fma``); the gate equations are compiled without contraction (``_config.JIT_EXACT``); and the
other kernels allow only contraction into fused multiply-adds, which LLVM applies to the same
expressions on every target that has them (x86-64 with FMA, aarch64, where they are part of the
base instruction set). float64's exp and tanh are glibc's on both (its x86-64 build picks an
FMA variant of exp at run time: these cases agree to the bit all the same). A platform that
rounds differently fails here with the largest difference in units in the last place.
"""

import platform

import numba
import numpy as np
import pytest
from conftest import expected_kernel, reach
from partner_control import spinning_partner, until
from platform_cases import CASES, load, run

from fastgru import _isa, _partner

INPUTS, RESULTS, RECORD = load()

PATHS = ("serial", "parallel", "split", "pair")


def ulps(got, want):
    """The largest distance between ``got`` and ``want`` in units in the last place (0: the same bits)."""
    bits = {4: np.int32, 8: np.int64}[got.dtype.itemsize]
    g, w = (a.view(bits).astype(np.int64) for a in (got, want))
    # signed magnitudes, so that the distance counts the floats between two values of either sign
    g, w = (np.where(a < 0, np.iinfo(bits).min - a, a) for a in (g, w))
    return int(np.abs(g - w).max(initial=0))


def test_the_reference_is_x86_64_in_the_generic_geometry():
    assert RECORD["machine"] == "x86_64" and RECORD["geometry"].startswith("generic ")
    assert set(INPUTS) == set(RESULTS) == {case.name for case in CASES}


def _assert_bits(case, got, path):
    want = RESULTS[case.name]
    assert set(got) == set(want)
    for label in want:
        assert got[label].dtype == want[label].dtype and got[label].shape == want[label].shape, label
        distance = ulps(got[label], want[label])
        assert distance == 0, (
            f"{case.name} {label} on the {path} path: {distance} ulp from x86-64's "
            f"({platform.machine()}, geometry {_isa.GEOMETRY.name})"
        )


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_the_bits_of_x86_64(monkeypatch, kernels_run, case, path):
    if path == "pair" and not _partner.PARTNER.enabled:
        pytest.skip(f"no partner thread here ({_partner.off_reason()})")
    reach(monkeypatch, path)
    # a function call of one row and one step takes no path (test_the_bits_from_the_callers_weights)
    _assert_bits(case, run(case, INPUTS[case.name], prepared=case.direct()), path)
    ran = expected_kernel(path, case.one_row())
    assert any(name.startswith(ran) for name in kernels_run), (ran, kernels_run)


@pytest.mark.parametrize("case", [case for case in CASES if case.direct()], ids=lambda case: case.name)
def test_the_bits_from_the_callers_weights(kernels_run, case):
    """A function call of one row and one step, computed from the caller's weights as they are."""
    _assert_bits(case, run(case, INPUTS[case.name]), "direct")
    assert kernels_run == ["run_direct"]


def test_the_partner_thread_takes_a_row_here(monkeypatch, kernels_run):
    """On x86-64 and aarch64 a one-row call shares its work with the partner thread, on two cores: a
    partner awake and spinning (``spinning_partner``: under emulation the calls are further apart
    than its 1 ms spin, and each would find it asleep) takes a call's half as soon as its thread
    runs; called until it has."""
    if platform.machine().lower() not in ("x86_64", "amd64", "aarch64", "arm64"):
        pytest.skip(f"{platform.machine()} has no partner thread")
    if _partner.SPIN_US == 0:
        pytest.skip("FASTGRU_SPIN_US=0 turns the partner thread off")
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("Numba has a single thread here")
    assert _partner.PARTNER.enabled, _partner.off_reason()
    reach(monkeypatch, "pair")
    case = next(case for case in CASES if case.name == "cell-f32-row")

    def call():
        kernels_run.clear()
        _assert_bits(case, run(case, INPUTS[case.name], prepared=True), "pair")
        assert [name.rstrip("+") for name in kernels_run] == ["run_pair"]

    with spinning_partner():
        until(lambda: kernels_run == ["run_pair+"], call, "the partner thread taking a row")
