"""fastgru.augru_sequence against the NumPy reference (fastgru/reference.py): both layouts of
docs/semantics.md, "Inputs and their shapes", every dtype and T2 dtype, ragged and empty sizes,
attention outside [0, 1], and where NaN and inf may and may not go."""

import numpy as np
import pytest
from conftest import DTYPES, assert_close, make_case, run_both

import fastgru
from fastgru import reference

LAYOUTS = ["documented", "openvino"]
T2_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def _shapes(layout, batch, seq_len, hidden_size):
    """(Y shape, Ho shape) of docs/semantics.md, "Inputs and their shapes" for a layout."""
    if layout == "documented":
        return (batch, seq_len, hidden_size), (batch, hidden_size)
    return (batch, 1, seq_len, hidden_size), (batch, 1, hidden_size)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_augru_sequence_matches_reference(rng, layout, dtype):
    case = make_case(
        rng,
        op="augru_sequence",
        batch=4,
        seq_len=5,
        input_size=3,
        hidden_size=6,
        dtype=dtype,
        layout=layout,
        ragged=True,
    )
    got, want = run_both("augru_sequence", case)
    assert_close(got, want)
    assert (got[0].shape, got[1].shape) == _shapes(layout, 4, 5, 6)
    for result in got:
        assert result.dtype == np.dtype(dtype) and result.flags.c_contiguous


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_two_layouts_give_the_same_answer(rng, dtype):
    case = make_case(
        rng, op="augru_sequence", batch=4, seq_len=5, input_size=3, hidden_size=6, dtype=dtype, layout="documented"
    )
    Y, Ho = fastgru.augru_sequence(**case.inputs)
    openvino = {
        **case.inputs,
        **{name: case.inputs[name][None] for name in ("W", "R", "B")},
        "initial_hidden_state": case.inputs["initial_hidden_state"][:, None],
    }
    Y4, Ho3 = fastgru.augru_sequence(**openvino)
    np.testing.assert_array_equal(Y4[:, 0], Y)
    np.testing.assert_array_equal(Ho3[:, 0], Ho)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(
    "low, high", [(0.0, 1.0), (-1.0, 2.0), (1.0, 1.0), (0.0, 0.0)], ids=["in-0-1", "outside-0-1", "one", "zero"]
)
def test_attention(rng, layout, low, high):
    """a outside [0, 1] is not clamped; a = 1 keeps only the candidate h; a = 0 is plain GRU."""
    case = make_case(rng, op="augru_sequence", batch=3, seq_len=4, input_size=2, hidden_size=5, layout=layout)
    case.inputs["A"] = rng.uniform(low, high, case.inputs["A"].shape).astype(np.float32)
    assert_close(*run_both("augru_sequence", case))


def test_attention_changes_the_answer(rng):
    case = make_case(
        rng, op="augru_sequence", batch=3, seq_len=4, input_size=2, hidden_size=5, dtype=np.float64, ragged=False
    )
    Y, _ = fastgru.augru_sequence(**case.inputs)
    Y0, _ = fastgru.augru_sequence(**{**case.inputs, "A": np.zeros_like(case.inputs["A"])})
    assert np.abs(Y - Y0).max() > 1e-3


@pytest.mark.parametrize("hidden_size, input_size", [(1, 1), (3, 1), (17, 1), (1, 4), (17, 3)])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_odd_sizes(rng, layout, hidden_size, input_size):
    case = make_case(
        rng, op="augru_sequence", batch=3, seq_len=4, input_size=input_size, hidden_size=hidden_size, layout=layout
    )
    assert_close(*run_both("augru_sequence", case))


@pytest.mark.parametrize("t2", T2_DTYPES)
def test_every_integer_t2(rng, t2):
    case = make_case(rng, op="augru_sequence", batch=5, seq_len=6, input_size=2, hidden_size=4, lengths_dtype=t2)
    lengths = case.inputs["sequence_lengths"]
    assert lengths.dtype == np.dtype(t2) and 0 in lengths and 6 in lengths
    got, want = run_both("augru_sequence", case)
    assert_close(got, want)
    as_int64 = fastgru.augru_sequence(**{**case.inputs, "sequence_lengths": lengths.astype(np.int64)})
    for a, b in zip(got, as_int64):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_lengths_zero_and_full(rng, layout):
    case = make_case(
        rng, op="augru_sequence", batch=4, seq_len=5, input_size=3, hidden_size=4, layout=layout, lengths=[0, 5, 2, 0]
    )
    (Y, Ho), want = run_both("augru_sequence", case)
    assert_close((Y, Ho), want)
    Y, Ho = Y.reshape(4, 5, 4), Ho.reshape(4, 4)  # both layouts as (N, S, Hs), (N, Hs)
    assert np.all(Y[[0, 3]] == 0) and np.all(
        Ho[[0, 3]] == 0
    )  # L = 0: Ho is zero, not h0 (docs/semantics.md, "Sequences")
    assert np.all(Y[2, 2:] == 0) and np.all(Y[2, :2] != 0)
    np.testing.assert_array_equal(Ho[1], Y[1, 4])
    np.testing.assert_array_equal(Ho[2], Y[2, 1])


@pytest.mark.parametrize("batch, seq_len", [(0, 4), (3, 0), (0, 0)])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_empty_batch_or_sequence(rng, layout, batch, seq_len):
    case = make_case(rng, op="augru_sequence", batch=batch, seq_len=seq_len, input_size=3, hidden_size=4, layout=layout)
    (Y, Ho), want = run_both("augru_sequence", case)
    assert (Y.shape, Ho.shape) == _shapes(layout, batch, seq_len, 4)
    assert np.all(Ho == 0)
    assert_close((Y, Ho), want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_values_past_a_length_never_reach_the_outputs(rng, layout, dtype):
    case = make_case(
        rng,
        op="augru_sequence",
        batch=4,
        seq_len=6,
        input_size=3,
        hidden_size=5,
        dtype=dtype,
        layout=layout,
        lengths=[6, 2, 0, 5],
    )
    X, A = case.inputs["X"], case.inputs["A"]
    X[1, 2:] = np.nan
    A[1, 2:] = np.nan
    X[2, :] = np.inf
    A[2, :] = -np.inf
    X[3, 5:] = -np.inf
    A[3, 5:] = np.inf
    case.inputs["initial_hidden_state"][2] = np.nan  # a row of length 0 never reads its h0
    (Y, Ho), want = run_both("augru_sequence", case)
    assert np.all(np.isfinite(Y)) and np.all(np.isfinite(Ho))
    assert_close((Y, Ho), want)


@pytest.mark.parametrize("where", ["X", "A"])
def test_nan_in_a_valid_step_stays_in_its_row(rng, where):
    case = make_case(rng, op="augru_sequence", batch=3, seq_len=6, input_size=3, hidden_size=5, lengths=[6, 5, 6])
    case.inputs[where][1, 2, 0] = np.nan
    (Y, Ho), want = run_both("augru_sequence", case)
    assert np.all(np.isnan(Y[1, 2:5])) and np.all(np.isnan(Ho[1]))
    assert not np.any(np.isnan(Y[1, :2])) and np.all(Y[1, 5] == 0)
    assert not np.any(np.isnan(Y[[0, 2]])) and not np.any(np.isnan(Ho[[0, 2]]))
    assert_close((Y, Ho), want)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_hidden_size_given(rng, layout):
    case = make_case(rng, op="augru_sequence", batch=3, seq_len=4, input_size=2, hidden_size=5, layout=layout)
    got = fastgru.augru_sequence(**case.inputs, hidden_size=5)
    want = fastgru.augru_sequence(**case.inputs)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    assert_close(got, reference.augru_sequence(**case.inputs, hidden_size=5))


def test_a_longer_sequence(rng):
    case = make_case(rng, op="augru_sequence", batch=3, seq_len=30, input_size=4, hidden_size=16, layout="openvino")
    assert_close(*run_both("augru_sequence", case))
