"""Every kernel path gives the same bits: serial or parallel, any thread count, X·Wᵀ hoisted or
computed per step, one row split over two threads or not, in one parallel region or with the
partner thread (fastgru/_kernels/gru.py, split.py)."""

import contextlib
import itertools

import numba
import numpy as np
import pytest

import fastgru
from fastgru import _dispatch, _partner


@contextlib.contextmanager
def _path(monkeypatch, threads, serial_below=0, hoist_bytes=_dispatch.HOIST_BYTES, split_from=None, pair_from=None):
    monkeypatch.setattr(_dispatch, "SERIAL_BELOW_FLOPS", serial_below)
    monkeypatch.setattr(_dispatch, "HOIST_BYTES", hoist_bytes)
    monkeypatch.setattr(_dispatch, "SPLIT_FROM_HIDDEN", 10**9 if split_from is None else split_from)
    monkeypatch.setattr(_dispatch, "PAIR_FROM_HIDDEN", 10**9 if pair_from is None else pair_from)
    monkeypatch.setattr(_dispatch, "PAIR_FROM_FLOPS", 0)
    monkeypatch.setattr(_dispatch, "PAIR_WAKE_FLOPS", 0)  # a pair call wakes the partner, never runs alone
    monkeypatch.setattr(_dispatch, "SPLIT_FROM_STEPS", 1)
    before = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        yield
    finally:
        numba.set_num_threads(before)


def _kernel_calls(monkeypatch):
    """Count the calls of the two-thread kernels, by name (list appends: safe from any thread)."""
    calls = []
    for name in ("run_split", "run_pair"):
        kernel = getattr(_dispatch, name)
        monkeypatch.setattr(_dispatch, name, lambda *args, _k=kernel, _n=name: calls.append(_n) or _k(*args))
    return calls


def _case(rng, n, s, i, h, direction, lbr, dtype, augru=False):
    d = 2 if direction == "bidirectional" else 1
    scale = 1 / np.sqrt(h)
    inputs = {
        "X": rng.standard_normal((n, s, i)).astype(dtype),
        "initial_hidden_state": rng.standard_normal((n, d, h)).astype(dtype),
        "sequence_lengths": rng.integers(0, s + 1, n) if n > 1 else np.array([s - 1]),
        "W": rng.uniform(-scale, scale, (d, 3 * h, i)).astype(dtype),
        "R": rng.uniform(-scale, scale, (d, 3 * h, h)).astype(dtype),
        "B": rng.uniform(-scale, scale, (d, (4 if lbr else 3) * h)).astype(dtype),
    }
    if augru:
        return fastgru.AUGRUSequence(inputs["W"], inputs["R"], inputs["B"]), {
            **{k: inputs[k] for k in ("X", "initial_hidden_state", "sequence_lengths")},
            "A": rng.uniform(-0.5, 1.5, (n, s, 1)).astype(dtype),
        }
    op = fastgru.GRUSequence(inputs["W"], inputs["R"], inputs["B"], direction=direction, linear_before_reset=lbr,
                             clip=0.9 if lbr else 0)
    return op, {k: inputs[k] for k in ("X", "initial_hidden_state", "sequence_lengths")}


PATHS = {
    "serial": {"threads": 1, "serial_below": 10**18},
    "serial-per-step-projection": {"threads": 1, "serial_below": 10**18, "hoist_bytes": 0},
    "parallel-1": {"threads": 1},
    "parallel-2": {"threads": 2},
    "parallel-2-per-step-projection": {"threads": 2, "hoist_bytes": 0},
    "split-2": {"threads": 2, "split_from": 1},
    "pair-2": {"threads": 2, "pair_from": 1},
}

#: The two-thread kernel that a path runs for a single row (batch 1, one direction).
ONE_ROW_KERNEL = {"split-2": "run_split", "pair-2": "run_pair"}

SHAPES = [
    # n, s, i, h, direction, lbr
    (13, 6, 5, 33, "forward", False),
    (11, 5, 3, 17, "reverse", True),
    (9, 4, 1, 40, "bidirectional", False),
    (1, 7, 4, 70, "forward", False),
    (1, 6, 3, 96, "reverse", True),  # split: one phase per step (H a whole number of panels)
    (1, 5, 3, 40, "forward", True),  # split: two phases per step
    (2, 3, 2, 1, "bidirectional", True),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "-".join(map(str, s)))
def test_every_path_gives_the_same_bits(monkeypatch, shape, dtype):
    op, inputs = _case(np.random.default_rng(7), *shape, dtype)
    calls = _kernel_calls(monkeypatch)
    results = {}
    for name, path in PATHS.items():
        with _path(monkeypatch, **path):
            calls.clear()
            results[name] = op(*inputs.values())
        one_row = shape[0] == 1 and shape[4] != "bidirectional"
        if one_row and name in ONE_ROW_KERNEL and _partner.PARTNER.enabled:
            assert calls == [ONE_ROW_KERNEL[name]], (name, calls)  # the path under test really ran
    for (a_name, a), (b_name, b) in itertools.pairwise(results.items()):
        for got, want in zip(a, b, strict=True):
            np.testing.assert_array_equal(got, want, err_msg=f"{a_name} vs {b_name}")


@pytest.mark.parametrize("n", [1, 10])
def test_augru_paths_give_the_same_bits(monkeypatch, n):
    op, inputs = _case(np.random.default_rng(3), n, 6, 4, 48, "forward", False, np.float32, augru=True)
    results = []
    for path in PATHS.values():
        with _path(monkeypatch, **path):
            results.append(op(*inputs.values()))
    for got in results[1:]:
        for g, w in zip(got, results[0], strict=True):
            np.testing.assert_array_equal(g, w)


def test_split_row_matches_the_function_api_on_two_threads(monkeypatch):
    """The split path shares its work through atomics; the function API runs it too."""
    op, inputs = _case(np.random.default_rng(5), 1, 30, 8, 64, "forward", False, np.float32)
    with _path(monkeypatch, threads=1, serial_below=10**18):
        want = op(*inputs.values())
    with _path(monkeypatch, threads=2, split_from=1):
        for _ in range(20):  # repeated: a race would show as a rare difference
            got = op(*inputs.values())
            for g, w in zip(got, want, strict=True):
                np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("how", ["split", "pair"])
def test_split_rows_from_four_python_threads_at_once(monkeypatch, how):
    """Four calls of a two-thread path at once on two cores: workers that spin on their partner
    must neither deadlock nor change a bit (one call at a time has the partner thread)."""
    from concurrent.futures import ThreadPoolExecutor

    cases = [_case(np.random.default_rng(k), 1, 25, 6, 64, "forward", k % 2 == 1, np.float32) for k in range(4)]
    with _path(monkeypatch, threads=1, serial_below=10**18):
        want = [op(*inputs.values()) for op, inputs in cases]
    calls = _kernel_calls(monkeypatch)
    with _path(monkeypatch, threads=2, **{f"{how}_from": 1}), ThreadPoolExecutor(max_workers=4) as pool:
        futures = [pool.submit(op, *inputs.values()) for op, inputs in cases * 5]
        got = [f.result(timeout=60) for f in futures]
    if _partner.PARTNER.enabled or how == "split":
        assert f"run_{how}" in calls  # some calls shared their row (the others had no thread left)
    for k, results in enumerate(got):
        for g, w in zip(results, want[k % 4], strict=True):
            np.testing.assert_array_equal(g, w)
