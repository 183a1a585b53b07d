"""Every kernel path gives the same bits, and each test asserts the kernel that really ran: serial or
parallel, X·Wᵀ hoisted or computed per step, a single row split over two threads in a Numba
parallel region or with the partner thread (one phase per step or two), any thread count from 1
to 4, and values past each row's length never reach the outputs on any path."""

import itertools
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
import pytest
from conftest import expected_kernel, on_every_path, reach

import fastgru
from fastgru import _isa, _partner

pytestmark = pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="Numba has a single thread here")


def _skip_without_partner(path):
    if path == "pair" and not _partner.PARTNER.enabled:
        pytest.skip(f"no partner thread here ({_partner.off_reason()})")


def _panel(dtype):
    """The panel width of this process's geometry for ``dtype``."""
    return _isa.GEOMETRY.panel_width(np.dtype(dtype).itemsize)


def _inputs(rng, n, s, i, h, direction, lbr, dtype):
    d = 2 if direction == "bidirectional" else 1
    scale = 1 / np.sqrt(h)
    return {
        "X": rng.standard_normal((n, s, i)).astype(dtype),
        "initial_hidden_state": rng.standard_normal((n, d, h)).astype(dtype),
        "sequence_lengths": rng.integers(0, s + 1, n) if n > 1 else np.array([s - 1]),
        "W": rng.uniform(-scale, scale, (d, 3 * h, i)).astype(dtype),
        "R": rng.uniform(-scale, scale, (d, 3 * h, h)).astype(dtype),
        "B": rng.uniform(-scale, scale, (d, (4 if lbr else 3) * h)).astype(dtype),
    }


def _shapes(dtype):
    """(n, s, i, h, direction, lbr): batches of rows, and single rows whose split takes one phase per
    step (linear_before_reset with H a whole number of panels) or two."""
    nr = _panel(dtype)
    return [
        (13, 6, 5, 33, "forward", False),
        (11, 5, 3, 17, "reverse", True),
        (9, 4, 1, 40, "bidirectional", False),
        (70, 3, 2, 9, "forward", True),  # more rows than a chunk
        (2, 3, 2, 1, "bidirectional", True),
        (1, 7, 4, 2 * nr + 6, "forward", False),  # one row: two phases
        (1, 6, 3, 3 * nr, "reverse", True),  # one row: one phase per step
        (1, 5, 3, nr + 8, "forward", True),  # one row, linear_before_reset: two phases
    ]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", range(8))
def test_every_path_gives_the_same_bits(monkeypatch, kernels_run, k, dtype):
    n, s, i, h, direction, lbr = shape = _shapes(dtype)[k]
    one_row = n == 1 and direction != "bidirectional"
    inputs = _inputs(np.random.default_rng(k), *shape, dtype)
    attrs = {"direction": direction, "linear_before_reset": lbr, "clip": 0.9 if lbr else 0.0}
    op = fastgru.GRUSequence(inputs["W"], inputs["R"], inputs["B"], **attrs)
    per_call = (inputs["X"], inputs["initial_hidden_state"], inputs["sequence_lengths"])
    by_path = on_every_path(
        monkeypatch, kernels_run, lambda: (op(*per_call), fastgru.gru_sequence(**inputs, **attrs)), one_row, calls=2
    )
    results = {f"{name}-{form}": r for name, pair in by_path.items() for form, r in zip(("prepared", "function"), pair)}
    for (a_name, a), (b_name, b) in itertools.pairwise(results.items()):
        for got, want in zip(a, b, strict=True):
            np.testing.assert_array_equal(got, want, err_msg=f"{a_name} vs {b_name}")


@pytest.mark.parametrize("n", [1, 10])
def test_augru_paths_give_the_same_bits(monkeypatch, kernels_run, n):
    rng = np.random.default_rng(3)
    inputs = _inputs(rng, n, 6, 4, 48, "forward", False, np.float32)
    op = fastgru.AUGRUSequence(inputs["W"], inputs["R"], inputs["B"])
    A = rng.uniform(-0.5, 1.5, (n, 6, 1)).astype(np.float32)
    per_call = (inputs["X"], inputs["initial_hidden_state"], inputs["sequence_lengths"], A)
    results = list(on_every_path(monkeypatch, kernels_run, lambda: op(*per_call), n == 1).values())
    for got in results[1:]:
        for g, w in zip(got, results[0], strict=True):
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("path", ["serial", "parallel", "split", "pair"])
@pytest.mark.parametrize("n", [1, 7])
def test_values_past_each_length_never_reach_the_outputs(monkeypatch, kernels_run, path, n):
    """NaN and inf in X past each row's length (and in the attention scores): Y is zero there and every
    output equals that of zeros in their place, on every path."""
    _skip_without_partner(path)
    rng = np.random.default_rng(11)
    s, h = 9, 3 * _panel(np.float32)
    inputs = _inputs(rng, n, s, 5, h, "forward", True, np.float32)
    lengths = np.array([4]) if n == 1 else rng.integers(0, s + 1, n)
    inputs["sequence_lengths"] = lengths
    past = np.arange(s)[None, :] >= lengths[:, None]
    poisoned, clean = inputs["X"].copy(), inputs["X"].copy()
    poisoned[past] = np.where(rng.uniform(size=(past.sum(), 5)) < 0.5, np.nan, np.inf)
    clean[past] = 0
    op = fastgru.GRUSequence(inputs["W"], inputs["R"], inputs["B"], linear_before_reset=True)
    augru = fastgru.AUGRUSequence(inputs["W"], inputs["R"], inputs["B"][:, : 3 * h])
    A = rng.uniform(0, 1, (n, s, 1)).astype(np.float32)
    A_poisoned = A.copy()
    A_poisoned[past] = np.nan
    with monkeypatch.context() as patch:
        reach(patch, path)
        got = op(poisoned, inputs["initial_hidden_state"], lengths)
        got_augru = augru(poisoned, inputs["initial_hidden_state"], lengths, A_poisoned)
    assert {name.rstrip("+") for name in kernels_run} == {expected_kernel(path, n == 1)}
    want = op(clean, inputs["initial_hidden_state"], lengths)
    want_augru = augru(clean, inputs["initial_hidden_state"], lengths, A)
    for g, w in zip((*got, *got_augru), (*want, *want_augru), strict=True):
        np.testing.assert_array_equal(g, w)
    assert not np.any(got[0][:, 0][past]) and np.isfinite(got[0]).all()


@pytest.mark.parametrize("path", ["split", "pair"])
def test_split_rows_from_four_python_threads_at_once(monkeypatch, kernels_run, path):
    """Four calls of a two-thread path at once on two cores: workers that spin on their partner
    must neither deadlock nor change a bit (one call at a time has the partner thread)."""
    _skip_without_partner(path)
    cases = []
    for k in range(4):
        inputs = _inputs(np.random.default_rng(k), 1, 25, 6, 64, "forward", k % 2 == 1, np.float32)
        op = fastgru.GRUSequence(inputs["W"], inputs["R"], inputs["B"], linear_before_reset=k % 2 == 1)
        cases.append((op, (inputs["X"], inputs["initial_hidden_state"], inputs["sequence_lengths"])))
    with fastgru.threads(1):
        want = [op(*per_call) for op, per_call in cases]
    with monkeypatch.context() as patch:
        reach(patch, path)
        kernels_run.clear()
        with ThreadPoolExecutor(max_workers=4) as pool:
            futures = [pool.submit(op, *per_call) for op, per_call in cases * 5]
            got = [f.result(timeout=120) for f in futures]
    assert f"run_{path}" in {name.rstrip("+") for name in kernels_run}  # some calls shared their row
    for k, results in enumerate(got):
        for g, w in zip(results, want[k % 4], strict=True):
            np.testing.assert_array_equal(g, w)


_THREAD_COUNTS = textwrap.dedent("""
    import numba, numpy as np, fastgru
    from fastgru import _paths, _partner, _tuning
    import pytest, sys
    sys.path.insert(0, sys.argv[1])  # tests/: conftest's watch_entries
    from conftest import watch_entries
    ran = []
    watch_entries(pytest.MonkeyPatch(), lambda kinds, answer: ran.extend("run_" + kind for kind in kinds))
    _tuning.SERIAL_BELOW_FLOPS = 0
    _tuning.SPLIT_FROM_HIDDEN = _tuning.SPLIT_FROM_STEPS = 1
    _partner.PARTNER.enabled = False  # single rows: the Numba split, which uses the thread count
    rng = np.random.default_rng(0)
    checked = []
    for n, s, i, h, direction, dtype in [(7, 9, 5, 37, "forward", np.float32), (13, 6, 3, 20, "bidirectional",
                                         np.float64), (5, 8, 4, 70, "reverse", np.float32),
                                         (1, 20, 6, 64, "forward", np.float32)]:
        d = 2 if direction == "bidirectional" else 1
        X = rng.standard_normal((n, s, i)).astype(dtype)
        h0 = rng.standard_normal((n, d, h)).astype(dtype)
        W = rng.uniform(-.2, .2, (d, 3 * h, i)).astype(dtype)
        R = rng.uniform(-.2, .2, (d, 3 * h, h)).astype(dtype)
        B = rng.uniform(-.2, .2, (d, 3 * h)).astype(dtype)
        L = rng.integers(0, s + 1, n) if n > 1 else np.array([s])
        op = fastgru.GRUSequence(W, R, B, direction=direction)
        with fastgru.threads(1):
            want = op(X, h0, L)
        for count in range(2, numba.config.NUMBA_NUM_THREADS + 1):
            ran.clear()
            with fastgru.threads(count):
                got = op(X, h0, L)
            assert ran == ["run_split" if n * d == 1 else "run_parallel"], ran
            assert all(np.array_equal(g, w) for g, w in zip(got, want)), (n, direction, count)
            checked.append(count)
    print(sorted(set(checked)))
""")


@pytest.mark.parametrize("threads", [3, 4])
def test_the_same_bits_for_one_to_four_threads(threads):
    """Uneven batches shared among 2, 3 and 4 threads (in a process with NUMBA_NUM_THREADS of 3 or 4:
    more threads than cores here) give the bits of one thread."""
    env = {**os.environ, "NUMBA_NUM_THREADS": str(threads)}
    run = [sys.executable, "-c", _THREAD_COUNTS, os.path.dirname(__file__)]
    done = subprocess.run(run, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("\n")[-2] == str(list(range(2, threads + 1)))
