"""A serving loop with ``out=`` allocates no array: no NumPy data buffer is made by a call of a prepared
op with preallocated outputs, whatever the dtype and integer type of sequence_lengths, ragged and
unsorted lengths included, on every kernel path. NumPy reports its data buffers to tracemalloc in a
domain of their own, which is what these tests count."""

import tracemalloc

import numba
import numpy as np
import pytest
from conftest import DTYPES, reach

import fastgru
from fastgru import _partner

pytestmark = pytest.mark.skipif(numba.config.DISABLE_JIT, reason="the kernels in pure Python make temporaries")


def _numpy_allocations(call, repeat=5):
    """Bytes of NumPy data buffers allocated (and still alive or not) by ``repeat`` calls, after one
    call outside the count (it may grow kept buffers)."""
    call()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for _ in range(repeat):
            call()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    domain = tracemalloc.DomainFilter(inclusive=True, domain=np.lib.tracemalloc_domain)
    stats = after.filter_traces([domain]).compare_to(before.filter_traces([domain]), "lineno")
    return sum(stat.size_diff for stat in stats if stat.size_diff > 0), sum(
        stat.count_diff for stat in stats if stat.count_diff > 0
    )


def _sequence(dtype, n=6, s=9, i=5, h=24, lbr=False, seed=0):
    rng = np.random.default_rng(seed)
    scale = 1 / np.sqrt(h)
    op = fastgru.GRUSequence(
        rng.uniform(-scale, scale, (1, 3 * h, i)).astype(dtype),
        rng.uniform(-scale, scale, (1, 3 * h, h)).astype(dtype),
        rng.uniform(-scale, scale, (1, (4 if lbr else 3) * h)).astype(dtype),
        linear_before_reset=lbr,
    )
    X = rng.standard_normal((n, s, i)).astype(dtype)
    h0 = rng.standard_normal((n, 1, h)).astype(dtype)
    return op, X, h0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lengths_dtype", [np.int64, np.int32, np.uint8])
def test_a_prepared_sequence_with_out_allocates_no_array(dtype, lengths_dtype):
    op, X, h0 = _sequence(dtype)
    lengths = np.array([3, 9, 0, 7, 9, 1], dtype=lengths_dtype)  # ragged and unsorted
    out = op(X, h0, lengths)
    want = tuple(o.copy() for o in out)
    grown, count = _numpy_allocations(lambda: op(X, h0, lengths, out=out))
    assert (grown, count) == (0, 0), f"{count} NumPy arrays, {grown} bytes"
    for got, w in zip(out, want):
        np.testing.assert_array_equal(got, w)


@pytest.mark.parametrize("path", ["serial", "parallel", "split", "pair"])
def test_no_array_on_any_path(monkeypatch, kernels_run, path):
    if path == "pair" and not _partner.PARTNER.enabled:
        pytest.skip("no partner thread here")
    n = 1 if path in ("split", "pair") else 6
    op, X, h0 = _sequence(np.float32, n=n, h=64, lbr=True)
    lengths = np.arange(n, dtype=np.int32) % 9 + 1
    out = op(X, h0, lengths)
    reach(monkeypatch, path)
    grown, count = _numpy_allocations(lambda: op(X, h0, lengths, out=out))
    assert (grown, count) == (0, 0), f"{path}: {count} NumPy arrays, {grown} bytes"
    assert {name.rstrip("+") for name in kernels_run[1:]} <= {"run_serial", "run_parallel", "run_split", "run_pair"}


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_cell_stepped_in_place_allocates_no_array(dtype):
    rng = np.random.default_rng(5)
    n, i, h = 4, 32, 256
    scale = 1 / np.sqrt(h)
    cell = fastgru.GRUCell(
        *(rng.uniform(-scale, scale, shape).astype(dtype) for shape in ((3 * h, i), (3 * h, h), (3 * h,)))
    )
    X = rng.standard_normal((n, i)).astype(dtype)
    state = np.zeros((n, h), dtype)
    grown, count = _numpy_allocations(lambda: cell(X, state, out=state))
    assert (grown, count) == (0, 0), f"{count} NumPy arrays, {grown} bytes"


def test_without_out_a_call_allocates_its_results_only():
    """The results are new arrays, and the only ones (kept alive here so that the count sees them)."""
    op, X, h0 = _sequence(np.float32, n=16, s=20, h=64)
    lengths = np.full(16, 20, np.int32)
    results = []
    grown, count = _numpy_allocations(lambda: results.append(op(X, h0, lengths)), repeat=3)
    Y, Ho = results[0]
    assert (grown, count) == (3 * (Y.nbytes + Ho.nbytes), 6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_streams_fed_frame_by_frame_into_out_allocate_no_array(dtype):
    op, X, h0 = _sequence(dtype, lbr=True)
    frame = np.ascontiguousarray(X[:, :1])
    stream, out = op.stream(h0, np.array([3, 9, 0, 7, 9, 1])), np.empty((6, 1, 1, 24), dtype)
    assert _numpy_allocations(lambda: stream(frame, out=out)) == (0, 0)
    rng = np.random.default_rng(1)
    A = np.ascontiguousarray(rng.uniform(size=(6, 1, 1)).astype(dtype))
    weights = (rng.uniform(-0.2, 0.2, shape).astype(dtype) for shape in ((1, 72, 5), (1, 72, 24), (1, 72)))
    augru = fastgru.AUGRUSequence(*weights).stream(h0)
    assert _numpy_allocations(lambda: augru(frame, A, out=out)) == (0, 0)
    stack = fastgru.GRUStack([op, _sequence(dtype, i=24, seed=1)[0]])
    stack_stream = stack.stream(np.zeros((6, 48), dtype))
    assert _numpy_allocations(lambda: stack_stream(frame, out=out)) == (0, 0)


def test_a_from_torch_stream_into_out_allocates_no_array():
    rng = np.random.default_rng(2)
    h = 8
    state = {}
    for k, inputs in enumerate((5, h)):
        state[f"weight_ih_l{k}"] = rng.uniform(-0.3, 0.3, (3 * h, inputs)).astype(np.float32)
        state[f"weight_hh_l{k}"] = rng.uniform(-0.3, 0.3, (3 * h, h)).astype(np.float32)
    gru = fastgru.from_torch(state, batch_first=True)
    frame, out = rng.standard_normal((1, 1, 5)).astype(np.float32), np.empty((1, 1, h), np.float32)
    stream = gru.stream()
    assert _numpy_allocations(lambda: stream(frame, out=out)) == (0, 0)
