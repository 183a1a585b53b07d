"""Prepared ops (GRUCell, GRUSequence, AUGRUSequence): the same bits as the functions, out=,
state updated in place, and per-call errors that blame the per-call input."""

import numpy as np
import pytest

import fastgru
from fastgru import FastGRUError

N, S, I, H = 5, 6, 7, 9


def _weights(rng, shape_w, shape_r, shape_b, dtype=np.float32):
    scale = 1 / np.sqrt(H)
    return tuple(rng.uniform(-scale, scale, shape).astype(dtype) for shape in (shape_w, shape_r, shape_b))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("lbr", [False, True])
def test_sequence_equals_the_function(direction, lbr, dtype):
    rng = np.random.default_rng(1)
    d = 2 if direction == "bidirectional" else 1
    W, R, B = _weights(rng, (d, 3 * H, I), (d, 3 * H, H), (d, (4 if lbr else 3) * H), dtype)
    X = rng.standard_normal((N, S, I)).astype(dtype)
    h0 = rng.standard_normal((N, d, H)).astype(dtype)
    lengths = np.array([S, 0, 2, 5, 1], dtype=np.int32)
    attrs = {"direction": direction, "linear_before_reset": lbr, "activations": ("tanh", "relu"), "clip": 2.0}
    op = fastgru.GRUSequence(W, R, B, **attrs)
    want = fastgru.gru_sequence(X, h0, lengths, W, R, B, **attrs)
    got = op(X, h0, lengths)
    out = (np.full_like(want[0], np.nan), np.full_like(want[1], np.nan))
    assert op(X, h0, lengths, out=out) is out
    for g, o, w in zip(got, out, want, strict=True):
        assert g.dtype == dtype
        np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(o, w)


@pytest.mark.parametrize("with_bias", [False, True])
def test_cell_steps_in_place_equal_a_sequence(with_bias):
    rng = np.random.default_rng(2)
    W, R, B = _weights(rng, (3 * H, I), (3 * H, H), (3 * H,))
    cell = fastgru.GRUCell(W, R, B if with_bias else None)
    X = rng.standard_normal((N, S, I)).astype(np.float32)
    h = rng.standard_normal((N, H)).astype(np.float32)
    h_start = h.copy()
    for t in range(S):
        assert cell(X[:, t], h, out=h) is h
    Y, Ho = fastgru.gru_sequence(
        X, h_start[:, None], np.full(N, S), W[None], R[None], (B if with_bias else np.zeros(3 * H, np.float32))[None]
    )
    np.testing.assert_array_equal(h, Ho[:, 0])
    np.testing.assert_array_equal(
        cell(X[:, 0], h_start), fastgru.gru_cell(X[:, 0], h_start, W, R, B if with_bias else None)
    )


@pytest.mark.parametrize("layout", ["documented", "openvino"])
def test_augru_equals_the_function(layout):
    rng = np.random.default_rng(3)
    W, R, B = _weights(rng, (3 * H, I), (3 * H, H), (3 * H,))
    X = rng.standard_normal((N, S, I)).astype(np.float32)
    h0 = rng.standard_normal((N, H)).astype(np.float32)
    A = rng.uniform(size=(N, S, 1)).astype(np.float32)
    lengths = [S, 3, 0, 1, 6]
    if layout == "openvino":
        W, R, B, h0 = W[None], R[None], B[None], h0[:, None]
    op = fastgru.AUGRUSequence(W, R, B)
    want = fastgru.augru_sequence(X, h0, lengths, W, R, B, A)
    got = op(X, h0, lengths, A)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape
        np.testing.assert_array_equal(g, w)


def test_weights_are_copied_at_preparation():
    rng = np.random.default_rng(4)
    W, R, B = _weights(rng, (1, 3 * H, I), (1, 3 * H, H), (1, 3 * H))
    op = fastgru.GRUSequence(W, R, B)
    X, h0, lengths = rng.standard_normal((N, S, I)).astype(np.float32), np.zeros((N, 1, H), np.float32), [S] * N
    want = op(X, h0, lengths)
    W[:] = 0
    R[:] = 0
    got = op(X, h0, lengths)
    np.testing.assert_array_equal(got[0], want[0])


def test_attributes_and_weights_are_checked_when_preparing():
    rng = np.random.default_rng(5)
    W, R, B = _weights(rng, (1, 3 * H, I), (1, 3 * H, H), (1, 3 * H))
    with pytest.raises(FastGRUError, match=r"^GRUSequence: direction is 'up'"):
        fastgru.GRUSequence(W, R, B, direction="up")
    with pytest.raises(FastGRUError, match=r"^GRUSequence: B has shape \(1, 27\).*4\*hidden_size=36"):
        fastgru.GRUSequence(W, R, B, linear_before_reset=True)
    with pytest.raises(FastGRUError, match=r"^GRUCell: W has rank 3"):
        fastgru.GRUCell(W, R)
    with pytest.raises(
        FastGRUError,
        match=r"^AUGRUSequence: W has rank 1 .*expected rank 2 \(3\*hidden_size, "
        r"input_size\) or, in OpenVINO's layout, rank 3",
    ):
        fastgru.AUGRUSequence(W[0, 0], R, B)


def test_per_call_errors_blame_the_per_call_input():
    rng = np.random.default_rng(6)
    W, R, B = _weights(rng, (1, 3 * H, I), (1, 3 * H, H), (1, 3 * H))
    op = fastgru.GRUSequence(W, R, B)
    X, h0 = np.zeros((N, S, I), np.float32), np.zeros((N, 1, H), np.float32)
    with pytest.raises(
        FastGRUError,
        match=r"^GRUSequence: X has shape \(5, 6, 4\); expected \(batch_size=5, "
        r"seq_length=6, input_size=7\); input_size from the op's W",
    ):
        op(np.zeros((N, S, 4), np.float32), h0, [S] * N)
    with pytest.raises(
        FastGRUError,
        match=r"initial_hidden_state has shape \(5, 1, 8\).*hidden_size=9\); .*"
        r"hidden_size from the op's R",
    ):
        op(X, np.zeros((N, 1, 8), np.float32), [S] * N)
    with pytest.raises(TypeError, match=r"^GRUSequence: X is float64 but the op's W is float32"):
        op(X.astype(np.float64), h0, [S] * N)
    with pytest.raises(
        FastGRUError,
        match=r"sequence_lengths\[1\] is 7; expected 0 <= sequence_lengths <= "
        r"seq_length=6",
    ):
        op(X, h0, [S, 7, 0, 0, 0])
    with pytest.raises(TypeError, match=r"sequence_lengths is float64"):
        op(X, h0, np.full(N, 2.0))


def test_out_is_checked():
    rng = np.random.default_rng(7)
    W, R, B = _weights(rng, (1, 3 * H, I), (1, 3 * H, H), (1, 3 * H))
    op = fastgru.GRUSequence(W, R, B)
    X, h0, lengths = np.zeros((N, S, I), np.float32), np.zeros((N, 1, H), np.float32), [S] * N
    Y, Ho = np.zeros((N, 1, S, H), np.float32), np.zeros((N, 1, H), np.float32)  # no signalling NaN to cast
    with pytest.raises(FastGRUError, match=r"^GRUSequence: out is ndarray; expected a tuple \(Y, Ho\)"):
        op(X, h0, lengths, out=Y)
    with pytest.raises(FastGRUError, match=r"out Ho has shape \(5, 9\); expected \(5, 1, 9\)"):
        op(X, h0, lengths, out=(Y, Ho[:, 0]))
    with pytest.raises(TypeError, match=r"out Y is float64; expected float32"):
        op(X, h0, lengths, out=(Y.astype(np.float64), Ho))
    with pytest.raises(FastGRUError, match=r"out Y must be a writeable C-contiguous array"):
        op(X, h0, lengths, out=(np.empty((H, S, 1, N), np.float32).T, Ho))
    cell = fastgru.GRUCell(W[0], R[0])
    with pytest.raises(FastGRUError, match=r"^GRUCell: out Ho is tuple; expected an ndarray"):
        cell(X[:, 0], h0[:, 0], out=(Ho,))


def test_repr_names_the_op():
    rng = np.random.default_rng(8)
    W, R, B = _weights(rng, (2, 3 * H, I), (2, 3 * H, H), (2, 3 * H))
    op = fastgru.GRUSequence(W, R, B, direction="bidirectional")
    assert repr(op) == (
        "GRUSequence(hidden_size=9, input_size=7, direction='bidirectional', linear_before_reset=False, dtype=float32)"
    )
    assert (op.hidden_size, op.input_size, op.dtype) == (H, I, np.float32)
