"""Inputs the caller owns: any memory layout gives the same answer, and nothing is modified.

docs/semantics.md, "Inputs, outputs and memory": non-contiguous, Fortran-ordered, big-endian and
read-only arrays are valid inputs and give the same answer as their contiguous copies; no input
array is ever modified; calls from several Python threads at once give the same answers as serial
calls.
"""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from conftest import reach

import fastgru

N, S, I, H = 5, 7, 6, 8


def _sequence_inputs(rng, dtype=np.float32, n=N, h=H):
    """Bidirectional, linear_before_reset inputs with ragged lengths (0 and S included)."""
    scale = 1 / np.sqrt(h)
    return {
        "X": rng.standard_normal((n, S, I)).astype(dtype),
        "initial_hidden_state": rng.standard_normal((n, 2, h)).astype(dtype),
        "sequence_lengths": np.arange(n) * 3 % (S + 1),
        "W": rng.uniform(-scale, scale, (2, 3 * h, I)).astype(dtype),
        "R": rng.uniform(-scale, scale, (2, 3 * h, h)).astype(dtype),
        "B": rng.uniform(-scale, scale, (2, 4 * h)).astype(dtype),
    }


def _call(inputs):
    return fastgru.gru_sequence(*inputs.values(), direction="bidirectional", linear_before_reset=True)


def _strided(a):
    """The same values in memory with gaps between elements (not contiguous)."""
    wide = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), dtype=a.dtype)
    wide[..., ::2] = a
    view = wide[..., ::2]
    assert not view.flags.c_contiguous
    return view


def _fortran(a):
    return np.asfortranarray(a)


def _big_endian(a):
    return a.astype(a.dtype.newbyteorder(">"))


def _read_only(a):
    a = a.copy()
    a.flags.writeable = False
    return a


@pytest.mark.parametrize("make", [_strided, _fortran, _big_endian, _read_only], ids=lambda f: f.__name__[1:])
@pytest.mark.parametrize("name", ["X", "initial_hidden_state", "sequence_lengths", "W", "R", "B"])
def test_any_memory_layout_gives_the_same_answer(rng, make, name):
    inputs = _sequence_inputs(rng)
    want = _call(inputs)
    inputs[name] = make(inputs[name])
    got = _call(inputs)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
        assert g.flags.c_contiguous and g.dtype == np.float32


def test_every_input_given_in_an_odd_layout_at_once(rng):
    inputs = _sequence_inputs(rng, dtype=np.float64)
    want = _call(inputs)
    odd = {name: _big_endian(_fortran(_strided(a))) for name, a in inputs.items()}
    got = _call(odd)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
        assert g.dtype == np.float64 and g.dtype.isnative


def test_lists_are_accepted(rng):
    inputs = _sequence_inputs(rng, dtype=np.float64)
    want = _call(inputs)
    got = _call({name: a.tolist() for name, a in inputs.items()})
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_no_input_is_modified(rng, dtype):
    inputs = _sequence_inputs(rng, dtype=dtype)
    A = rng.uniform(size=(N, S, 1)).astype(dtype)
    before = {name: a.copy() for name, a in inputs.items()}
    before_A = A.copy()
    _call(inputs)
    fastgru.augru_sequence(
        inputs["X"],
        inputs["initial_hidden_state"][:, :1],
        inputs["sequence_lengths"],
        inputs["W"][:1],
        inputs["R"][:1],
        inputs["B"][:1, : 3 * H],
        A,
    )
    fastgru.gru_cell(
        inputs["X"][:, 0],
        inputs["initial_hidden_state"][:, 0],
        inputs["W"][0],
        inputs["R"][0],
        inputs["B"][0],
        linear_before_reset=True,
    )
    for name, a in inputs.items():
        np.testing.assert_array_equal(a, before[name], err_msg=name)
    np.testing.assert_array_equal(A, before_A, err_msg="A")


def test_outputs_do_not_share_memory_with_inputs(rng):
    inputs = _sequence_inputs(rng)
    Y, Ho = _call(inputs)
    for a in inputs.values():
        assert not np.shares_memory(Y, a) and not np.shares_memory(Ho, a)


@pytest.mark.parametrize("path", ["serial", "parallel"])
def test_concurrent_calls_from_four_threads_agree_with_serial_calls(monkeypatch, kernels_run, path):
    cases = [_sequence_inputs(np.random.default_rng(k), np.float32 if k % 2 else np.float64, 8, 40) for k in range(8)]
    with fastgru.threads(1):
        serial = [_call(c) for c in cases]
    reach(monkeypatch, path)
    kernels_run.clear()
    with ThreadPoolExecutor(max_workers=4) as pool:
        concurrent = list(pool.map(_call, cases * 4))
    assert f"run_{path}" in kernels_run
    for k, got in enumerate(concurrent):
        for g, w in zip(got, serial[k % len(cases)]):
            np.testing.assert_array_equal(g, w)
