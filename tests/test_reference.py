"""fastgru against the NumPy reference (tests/reference.py) over every attribute, direction,
dtype, layout and sequence-length pattern of SPEC.md."""

import itertools
import math

import numpy as np
import pytest
import reference
from conftest import DTYPES, assert_close, make_case

import fastgru

DIRECTIONS = ["forward", "reverse", "bidirectional"]
ACTIVATIONS = ["relu", "sigmoid", "tanh"]


def _both(op, case):
    got = getattr(fastgru, op)(**case.inputs, **case.attrs)
    want = getattr(reference, op)(**case.inputs, **case.attrs)
    return got, want


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("linear_before_reset", [False, True])
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_gru_sequence(rng, direction, linear_before_reset, dtype):
    case = make_case(rng, batch=5, seq_len=6, input_size=4, hidden_size=7, dtype=dtype, direction=direction,
                     linear_before_reset=linear_before_reset)
    got, want = _both("gru_sequence", case)
    assert_close(got, want)
    for array in got:
        assert array.flags.c_contiguous and array.dtype == np.dtype(dtype)


@pytest.mark.parametrize("f, g", list(itertools.product(ACTIVATIONS, repeat=2)))
@pytest.mark.parametrize("linear_before_reset", [False, True])
def test_every_activation_pair(rng, f, g, linear_before_reset):
    case = make_case(rng, batch=4, seq_len=5, hidden_size=9, direction="bidirectional",
                     linear_before_reset=linear_before_reset, activations=(f, g))
    assert_close(*_both("gru_sequence", case))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("clip", [math.inf, 0, 0.5, 1e-3])
@pytest.mark.parametrize("linear_before_reset", [False, True])
def test_clip(rng, clip, linear_before_reset, dtype):
    case = make_case(rng, batch=4, seq_len=5, hidden_size=5, dtype=dtype, direction="reverse",
                     linear_before_reset=linear_before_reset, clip=clip)
    got, want = _both("gru_sequence", case)
    assert_close(got, want)
    if clip == 0.5:  # the clip is active: it changes the answer
        unclipped = fastgru.gru_sequence(**case.inputs, **{**case.attrs, "clip": math.inf})
        assert not np.allclose(got[0], unclipped[0])


@pytest.mark.parametrize("hidden_size, input_size", [(1, 1), (3, 1), (17, 4), (1, 9), (33, 2), (64, 3)])
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_odd_sizes(rng, hidden_size, input_size, direction):
    case = make_case(rng, batch=4, seq_len=4, input_size=input_size, hidden_size=hidden_size, direction=direction)
    assert_close(*_both("gru_sequence", case))


@pytest.mark.parametrize("t2", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64])
def test_every_integer_t2(rng, t2):
    case = make_case(rng, batch=4, seq_len=6)
    case.inputs["sequence_lengths"] = case.inputs["sequence_lengths"].astype(t2)
    assert_close(*_both("gru_sequence", case))


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_lengths_zero_and_full(rng, direction):
    case = make_case(rng, batch=4, seq_len=5, direction=direction, lengths=[0, 5, 0, 5])
    (Y, Ho), want = _both("gru_sequence", case)
    assert_close((Y, Ho), want)
    assert np.all(Y[[0, 2]] == 0) and np.all(Ho[[0, 2]] == 0)  # SPEC.md §4: Ho = 0 for L = 0
    d = Y.shape[1]
    if direction != "reverse":
        np.testing.assert_array_equal(Ho[1, 0], Y[1, 0, 4])
    if direction != "forward":
        np.testing.assert_array_equal(Ho[1, d - 1], Y[1, d - 1, 0])


@pytest.mark.parametrize("op", ["gru_sequence", "augru_sequence"])
@pytest.mark.parametrize("batch, seq_len", [(0, 5), (3, 0), (0, 0)])
def test_empty_batch_or_sequence(rng, op, batch, seq_len):
    case = make_case(rng, op=op, batch=batch, seq_len=seq_len, ragged=False)
    got, want = _both(op, case)
    assert_close(got, want)
    assert np.all(got[1] == 0)


def test_empty_cell_batch(rng):
    case = make_case(rng, op="gru_cell", batch=0)
    got, want = _both("gru_cell", case)
    assert got.shape == want.shape == (0, 6)


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_values_past_a_length_never_reach_the_outputs(rng, direction):
    case = make_case(rng, batch=3, seq_len=6, direction=direction, lengths=[6, 2, 0])
    X = case.inputs["X"]
    X[1, 2:] = np.nan
    X[2, :] = np.inf
    (Y, Ho), want = _both("gru_sequence", case)
    assert np.all(np.isfinite(Y)) and np.all(np.isfinite(Ho))
    assert_close((Y, Ho), want)


def test_nan_in_a_valid_step_stays_in_its_row(rng):
    case = make_case(rng, batch=3, seq_len=6, hidden_size=5, lengths=[6, 6, 6])
    case.inputs["X"][1, 2, 0] = np.nan
    Y, Ho = fastgru.gru_sequence(**case.inputs, **case.attrs)
    assert np.all(np.isnan(Y[1, 0, 2:])) and np.all(np.isnan(Ho[1]))
    assert not np.any(np.isnan(Y[1, 0, :2]))
    assert not np.any(np.isnan(Y[[0, 2]]))


@pytest.mark.parametrize("activations", [("relu", "relu"), ("sigmoid", "tanh"), ("tanh", "sigmoid")])
def test_nan_propagates_through_every_activation(rng, activations):
    case = make_case(rng, batch=2, seq_len=3, hidden_size=4, lengths=[3, 3], activations=activations)
    case.inputs["initial_hidden_state"][0, 0, 1] = np.nan
    Y, _ = fastgru.gru_sequence(**case.inputs, **case.attrs)
    assert np.isnan(Y[0, 0, 0, 1]) and not np.any(np.isnan(Y[1]))


def test_attribute_spellings(rng):
    case = make_case(rng, batch=3, hidden_size=6, direction="bidirectional")
    want = fastgru.gru_sequence(**case.inputs, **case.attrs)
    for extra in ({"activations": ["SIGMOID", "Tanh"]}, {"hidden_size": 6}, {"activations_alpha": [0.5, 1.0]},
                  {"activations_beta": [2.0]}, {"clip": 0.0}, {"direction": "Bidirectional"}):
        got = fastgru.gru_sequence(**case.inputs, **{**case.attrs, **extra})
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w, err_msg=str(extra))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("linear_before_reset", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
def test_gru_cell(rng, dtype, linear_before_reset, with_bias):
    case = make_case(rng, op="gru_cell", batch=4, input_size=5, hidden_size=6, dtype=dtype,
                     linear_before_reset=linear_before_reset)
    if not with_bias:
        del case.inputs["B"]
    assert_close(*_both("gru_cell", case))


@pytest.mark.parametrize("f, g", [("relu", "sigmoid"), ("tanh", "relu")])
def test_gru_cell_attributes(rng, f, g):
    case = make_case(rng, op="gru_cell", batch=3, hidden_size=17, activations=(f, g), clip=0.7,
                     linear_before_reset=True)
    assert_close(*_both("gru_cell", case))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["documented", "openvino"])
def test_augru_sequence(rng, dtype, layout):
    case = make_case(rng, op="augru_sequence", batch=5, seq_len=6, hidden_size=7, dtype=dtype, layout=layout)
    got, want = _both("augru_sequence", case)
    assert_close(got, want)
    n, s, h = 5, 6, 7
    assert got[0].shape == ((n, s, h) if layout == "documented" else (n, 1, s, h))


def test_augru_attention_is_not_clamped(rng):
    case = make_case(rng, op="augru_sequence", batch=3, seq_len=4, hidden_size=5)
    case.inputs["A"] = rng.uniform(-1, 2, case.inputs["A"].shape).astype(np.float32)
    assert_close(*_both("augru_sequence", case))


@pytest.mark.parametrize("linear_before_reset", [False, True])
def test_more_rows_than_a_chunk(rng, linear_before_reset):
    """More rows per thread than the kernel's chunk of 64 (fastgru/_kernels/gru.py, CHUNK_ROWS)."""
    case = make_case(rng, batch=300, seq_len=4, input_size=3, hidden_size=20, direction="bidirectional",
                     linear_before_reset=linear_before_reset)
    assert_close(*_both("gru_sequence", case))


@pytest.mark.parametrize("op", ["gru_sequence", "gru_cell"])
def test_input_size_zero(rng, op):
    case = make_case(rng, op=op, batch=3, seq_len=4, input_size=0, hidden_size=5)
    assert_close(*_both(op, case))
