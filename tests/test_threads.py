"""Thread control (issue 4): a per-thread count, the same bits for any count, and concurrent calls
that neither deadlock nor take more threads than the process's budget, on every threading layer."""

import contextlib
import os
import subprocess
import sys
import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
import pytest
from conftest import expected_kernel, reach

import fastgru
from fastgru import FastGRUError, _partner, _threading


def _op(rng, n=6, s=20, i=8, h=64, direction="forward"):
    d = 2 if direction == "bidirectional" else 1
    scale = 1 / np.sqrt(h)
    W = rng.uniform(-scale, scale, (d, 3 * h, i)).astype(np.float32)
    R = rng.uniform(-scale, scale, (d, 3 * h, h)).astype(np.float32)
    B = rng.uniform(-scale, scale, (d, 3 * h)).astype(np.float32)
    inputs = (
        rng.standard_normal((n, s, i)).astype(np.float32),
        rng.standard_normal((n, d, h)).astype(np.float32),
        rng.integers(0, s + 1, n),
    )
    return fastgru.GRUSequence(W, R, B, direction=direction), inputs


def test_thread_count_is_per_calling_thread_and_restored():
    start = fastgru.get_num_threads()
    seen = {}
    with fastgru.threads(1):
        assert fastgru.get_num_threads() == 1
        other = threading.Thread(target=lambda: seen.update(other=fastgru.get_num_threads()))
        other.start()
        other.join()
    assert fastgru.get_num_threads() == start
    assert seen["other"] == numba.config.NUMBA_NUM_THREADS  # a new thread starts at the default
    fastgru.set_num_threads(1)
    try:
        assert fastgru.get_num_threads() == 1
    finally:
        fastgru.set_num_threads(start)


@pytest.mark.parametrize("n", [0, -1, 10**6, 1.5, True, "2"])
def test_bad_thread_counts(n):
    with pytest.raises(
        FastGRUError,
        match=rf"set_num_threads: n is {n!r}; expected an integer from 1 to "
        rf"NUMBA_NUM_THREADS={numba.config.NUMBA_NUM_THREADS}",
    ):
        fastgru.set_num_threads(n)
    with pytest.raises(FastGRUError):
        with fastgru.threads(n):
            pass


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="Numba has a single thread here")
@pytest.mark.parametrize(
    ("shape", "path"),
    [
        (dict(n=6), "parallel"),
        (dict(n=1, h=256), "pair"),
        (dict(n=1, h=256), "split"),
        (dict(n=3, direction="bidirectional"), "parallel"),
    ],
    ids=["rows", "one-row-with-the-partner", "one-row-split", "bidirectional"],
)
def test_same_bits_for_any_thread_count(shape, path, monkeypatch, kernels_run):
    if path == "pair" and not _partner.PARTNER.enabled:
        pytest.skip("no partner thread here")
    reach(monkeypatch, path)
    op, inputs = _op(np.random.default_rng(0), **shape)
    results = []
    for count in range(1, numba.config.NUMBA_NUM_THREADS + 1):
        kernels_run.clear()
        with fastgru.threads(count):
            results.append(op(*inputs))
        if count > 1:
            one_row = shape["n"] == 1
            assert [name.rstrip("+") for name in kernels_run] == [expected_kernel(path, one_row)]
    for got in results[1:]:
        for g, w in zip(got, results[0], strict=True):
            np.testing.assert_array_equal(g, w)


def test_a_lease_grants_what_is_left_or_runs_alone():
    budget = _threading.BUDGET
    with _threading.lease(budget) as first:
        assert first == budget and _threading.busy() == budget
        with _threading.lease(budget) as second:
            assert second == 1  # the budget is spent: the call runs alone, outside the budget
            assert _threading.busy() == budget
    assert _threading.busy() == 0


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="Numba has a single thread here")
def test_the_partner_and_its_two_threads_go_to_one_call_within_the_budget():
    """``take_pair`` under the budget's lock, ``give_pair`` a store without it: from 6 Python threads
    at once, taking the partner and leasing threads, one call at a time holds the partner, and the
    calls never hold more than the budget together."""
    budget = _threading.BUDGET
    assert _threading.take_pair(True) == (fastgru.get_num_threads(), 2) and _threading.busy() == 2
    seen = []
    other = threading.Thread(target=lambda: seen.append(_threading.take_pair(True)[1]))
    other.start()
    other.join()
    assert seen == [0 if budget < 4 else 1]  # no partner for a second call; no threads either if none are left
    with _threading.lease(budget) as granted:
        assert granted == (1 if budget < 4 else budget - 2)
    _threading.give_pair()
    assert _threading.busy() == 0

    guard, holders, problems, taken = threading.Lock(), [0], [], []

    def check():
        if _threading.busy() > budget:
            problems.append(("over the budget", _threading.busy()))

    def pair_calls():
        for _ in range(3000):
            count, held = _threading.take_pair(True)
            if held == 2:
                taken.append(1)
                with guard:
                    holders[0] += 1
                    if holders[0] > 1:
                        problems.append("two calls hold the partner")
                check()
                with guard:
                    holders[0] -= 1
                _threading.give_pair()

    def lease_calls():
        for _ in range(3000):
            with _threading.lease(budget) as granted:
                if granted > 1:
                    check()

    workers = [threading.Thread(target=f) for f in (pair_calls, lease_calls) * 3]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert problems == [] and _threading.busy() == 0 and taken


@pytest.mark.skipif(not _partner.PARTNER.enabled, reason="no partner thread here")
def test_a_call_that_raises_on_the_pair_road_gives_everything_back(monkeypatch):
    """The partner and its two threads go back when the kernel call raises (``_paths.run``'s finally),
    and the plan's ``Shared`` takes them again at the next call."""
    from fastgru import _paths

    reach(monkeypatch, "pair")  # every call takes the partner, waking it
    op, inputs = _op(np.random.default_rng(2), n=1, h=256)
    op(*inputs)
    held = []

    def broken(entry, arrays, way):
        held.append(_threading.busy())
        raise RuntimeError("broken entry")

    monkeypatch.setattr(_paths, "_enter", broken)
    for _ in range(3):
        with pytest.raises(RuntimeError, match="broken entry"):
            op(*inputs)
        assert _threading.busy() == 0
    assert held == [2, 2, 2]  # each held the partner and its two threads when it raised
    monkeypatch.undo()
    with _threading.lease(_threading.BUDGET) as granted:
        assert granted == _threading.BUDGET


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="Numba has a single thread here")
def test_many_python_threads_at_once_give_serial_answers(monkeypatch):
    """A thread-pool server: 8 Python threads calling at once, on the parallel, pair and serial
    paths; the calls that share their work never hold more than the budget together."""
    reach(monkeypatch, "pair")
    rng = np.random.default_rng(1)
    cases = [_op(rng, n=6), _op(rng, n=1, h=256), _op(rng, n=3, direction="bidirectional"), _op(rng, n=2, s=1)]
    with fastgru.threads(1):
        want = [op(*inputs) for op, inputs in cases]
    grants, over = [], []
    lease = _threading.lease

    @contextlib.contextmanager
    def watched(wanted, *count):
        with lease(wanted, *count) as granted:
            busy = _threading.busy()  # read inside the lease: this call's grant is counted in it
            grants.append(granted)
            if busy > _threading.BUDGET:
                over.append(busy)
            yield granted

    from fastgru import _paths

    monkeypatch.setattr(_paths, "lease", watched)

    def call(k):
        op, inputs = cases[k % len(cases)]
        return k, op(*inputs)

    with ThreadPoolExecutor(max_workers=8) as pool:
        for k, got in pool.map(call, range(64), timeout=120):
            for g, w in zip(got, want[k % len(cases)], strict=True):
                np.testing.assert_array_equal(g, w)
    # The calls that share their work stay within the budget; some calls did share it.
    assert over == [] and max(grants) > 1
    assert _threading.busy() == 0


_CONCURRENT = textwrap.dedent("""
    import sys
    from concurrent.futures import ThreadPoolExecutor
    import numba, numpy as np, fastgru
    fastgru._tuning.SERIAL_BELOW_FLOPS = 0  # every call shares its work
    rng = np.random.default_rng(0)
    h = 64
    W = rng.uniform(-.1, .1, (1, 3 * h, 8)).astype(np.float32)
    R = rng.uniform(-.1, .1, (1, 3 * h, h)).astype(np.float32)
    op = fastgru.GRUSequence(W, R, np.zeros((1, 3 * h), np.float32))
    X, h0, L = rng.standard_normal((8, 30, 8)).astype(np.float32), np.zeros((8, 1, h), np.float32), np.full(8, 30)
    with fastgru.threads(1):
        want = op(X, h0, L)
    with ThreadPoolExecutor(6) as pool:
        for got in pool.map(lambda _: op(X, h0, L), range(60), timeout=120):
            assert all(np.array_equal(g, w) for g, w in zip(got, want))
    print(numba.threading_layer())
""")


@pytest.mark.parametrize("layer", ["omp", "workqueue", "tbb"])
def test_concurrent_calls_on_each_threading_layer(layer):
    """workqueue cannot run two parallel regions at once (Numba aborts the process): the budget
    lets only one call share its work; omp and tbb run them side by side."""
    env = {**os.environ, "NUMBA_THREADING_LAYER": layer, "NUMBA_NUM_THREADS": "2"}
    done = subprocess.run([sys.executable, "-c", _CONCURRENT], env=env, capture_output=True, text=True, timeout=300)
    if layer == "tbb" and "No threading layer could be loaded" in done.stderr:
        pytest.skip("TBB is not installed (pip install tbb)")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-1] == layer


def test_the_kernels_release_the_gil():
    # Calls from several Python threads (a thread-pool server, a Dask worker's tasks) overlap only
    # if the kernel calls release the GIL; the partner thread serves without it. Python enters the
    # kernels through the entry (and the partner through serve); the drivers are C callbacks.
    from fastgru._config import KERNELS, _is_callback
    from fastgru._kernels import entry, pair

    cell = fastgru.GRUCell(np.ones((3, 2), np.float32), np.ones((3, 1), np.float32), np.zeros(3, np.float32))
    cell(np.ones((1, 2), np.float32), np.ones((1, 1), np.float32))
    cell(np.ones((1, 2), np.float32), np.ones((1, 1), np.float32))  # the second call is planned
    kernels = [kernel for kernel in KERNELS if not _is_callback(kernel)]
    assert pair.serve in kernels and any(kernel.py_func is entry._run_plan for kernel in kernels)
    assert all(kernel.targetoptions.get("nogil") for kernel in kernels)
