"""Streaming: a sequence fed chunk by chunk gives the bits of one call (a cell stepped in place
allocating nothing: tests/test_allocation.py)."""

import numpy as np
import pytest
from conftest import DTYPES

import fastgru
from fastgru import FastGRUError, _tuning

N, I, H = 6, 5, 12
LENGTHS = np.array([23, 0, 5, 17, 1, 11])  # ragged, 0 and the full length included


def _weights(rng, dtype, lbr=False, layout="sequence"):
    scale = 1 / np.sqrt(H)
    lead = () if layout == "augru2d" else (1,)
    W = rng.uniform(-scale, scale, (*lead, 3 * H, I)).astype(dtype)
    R = rng.uniform(-scale, scale, (*lead, 3 * H, H)).astype(dtype)
    B = rng.uniform(-scale, scale, (*lead, (4 if lbr else 3) * H)).astype(dtype)
    return W, R, B


def _chunks(steps, rng):
    """Random chunk bounds covering [0, steps), an empty chunk among them."""
    cuts = np.sort(rng.choice(np.arange(1, steps), size=4, replace=False))
    bounds = [0, *cuts.tolist(), cuts[-1], steps]
    return list(zip(bounds[:-1], bounds[1:]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lbr", [False, True])
@pytest.mark.parametrize("shared", [False, True], ids=["serial", "parallel"])
def test_gru_stream_equals_one_call(monkeypatch, dtype, lbr, shared):
    if shared:  # the rows shared among threads: the keep flag of the parallel kernel
        monkeypatch.setattr(_tuning, "SERIAL_BELOW_FLOPS", 0)
    rng = np.random.default_rng(0)
    S = int(LENGTHS.max())
    W, R, B = _weights(rng, dtype, lbr)
    op = fastgru.GRUSequence(W, R, B, linear_before_reset=lbr, clip=3.0)
    X = rng.standard_normal((N, S, I)).astype(dtype)
    h0 = rng.standard_normal((N, 1, H)).astype(dtype)
    Y, Ho = op(X, h0, LENGTHS)
    stream = op.stream(h0, LENGTHS)
    ys = [stream(X[:, a:b]) for a, b in _chunks(S, rng)]
    assert stream.steps == S
    np.testing.assert_array_equal(np.concatenate(ys, axis=2), Y)
    np.testing.assert_array_equal(stream.Ho, Ho)
    assert stream.Ho.dtype == Ho.dtype and not np.any(stream.Ho[1])  # length 0: zero (docs/semantics.md, "Sequences")


@pytest.mark.parametrize("layout", ["augru2d", "sequence"])
def test_augru_stream_equals_one_call(layout):
    rng = np.random.default_rng(1)
    S = int(LENGTHS.max())
    W, R, B = _weights(rng, np.float32, layout=layout)
    op = fastgru.AUGRUSequence(W, R, B)
    X = rng.standard_normal((N, S, I)).astype(np.float32)
    A = rng.uniform(size=(N, S, 1)).astype(np.float32)
    h0 = rng.standard_normal((N, H) if layout == "augru2d" else (N, 1, H)).astype(np.float32)
    Y, Ho = op(X, h0, LENGTHS, A)
    stream = op.stream(h0, LENGTHS)
    ys = [stream(X[:, a:b], A[:, a:b]) for a, b in _chunks(S, rng)]
    np.testing.assert_array_equal(np.concatenate(ys, axis=-2), Y)
    np.testing.assert_array_equal(stream.Ho, Ho)


def test_chained_calls_equal_one_call_for_full_lengths():
    """Each chunk's Ho as the next chunk's initial_hidden_state: the same bits, when every row runs
    every step (a row that has ended would get Ho = 0 from a chunk without its steps: Stream)."""
    rng = np.random.default_rng(2)
    S = 30
    op = fastgru.GRUSequence(*_weights(rng, np.float32))
    X = rng.standard_normal((N, S, I)).astype(np.float32)
    h = rng.standard_normal((N, 1, H)).astype(np.float32)
    Y, Ho = op(X, h, np.full(N, S))
    ys = []
    for a, b in [(0, 7), (7, 8), (8, 30)]:
        y, h = op(X[:, a:b], h, np.full(N, b - a))
        ys.append(y)
    np.testing.assert_array_equal(np.concatenate(ys, axis=2), Y)
    np.testing.assert_array_equal(h, Ho)


def test_stream_without_lengths_runs_every_step():
    rng = np.random.default_rng(3)
    op = fastgru.GRUSequence(*_weights(rng, np.float64))
    X = rng.standard_normal((N, 9, I))
    h0 = np.zeros((N, 1, H))
    stream = op.stream(h0)
    ys = [stream(X[:, :4]), stream(X[:, 4:])]
    Y, Ho = op(X, h0, np.full(N, 9))
    np.testing.assert_array_equal(np.concatenate(ys, axis=2), Y)
    np.testing.assert_array_equal(stream.Ho, Ho)


def test_stream_errors():
    rng = np.random.default_rng(4)
    W, R, B = _weights(rng, np.float32)
    h0 = np.zeros((N, 1, H), np.float32)
    op = fastgru.GRUSequence(W, R, B)
    with pytest.raises(FastGRUError, match=r"GRUSequence.stream: direction is 'reverse'; only 'forward'"):
        fastgru.GRUSequence(W, R, B, direction="reverse").stream(h0)
    with pytest.raises(
        FastGRUError, match=r"GRUSequence: sequence_lengths\[2\] is -1; expected 0 <= sequence_lengths$"
    ):
        op.stream(h0, [1, 2, -1, 0, 0, 0])
    with pytest.raises(FastGRUError, match=r"GRUSequence: initial_hidden_state has shape \(6, 1, 5\); expected"):
        op.stream(np.zeros((N, 1, 5), np.float32))
    stream = op.stream(h0)
    with pytest.raises(FastGRUError, match=r"GRUSequence stream: X has batch_size 2; expected 6, the batch_size"):
        stream(np.zeros((2, 3, I), np.float32))
    with pytest.raises(FastGRUError, match=r"GRUSequence stream: A is given; expected stream\(X\)"):
        stream(np.zeros((N, 3, I), np.float32), np.zeros((N, 3, 1), np.float32))
    with pytest.raises(TypeError, match=r"GRUSequence: X is float64 but the op's W is float32"):
        stream(np.zeros((N, 3, I)))
    augru = fastgru.AUGRUSequence(W, R, B).stream(h0)
    with pytest.raises(FastGRUError, match=r"AUGRUSequence stream: A is missing; expected stream\(X, A\)"):
        augru(np.zeros((N, 3, I), np.float32))
    assert stream.steps == 0  # nothing was fed by the failed calls


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_stream_writes_each_chunk_into_out(dtype):
    rng = np.random.default_rng(5)
    S = int(LENGTHS.max())
    op = fastgru.GRUSequence(*_weights(rng, dtype, lbr=True), linear_before_reset=True)
    X = rng.standard_normal((N, S, I)).astype(dtype)
    h0 = rng.standard_normal((N, 1, H)).astype(dtype)
    Y, Ho = op(X, h0, LENGTHS)
    stream = op.stream(h0, LENGTHS)
    out = np.full((N, 1, 1, H), np.nan, dtype)
    for t in range(S):  # frame by frame, into the same array
        assert stream(np.ascontiguousarray(X[:, t : t + 1]), out=out) is out
        np.testing.assert_array_equal(out, Y[:, :, t : t + 1])
    np.testing.assert_array_equal(stream.Ho, Ho)


def test_a_stream_refuses_a_wrong_out_with_its_message():
    rng = np.random.default_rng(6)
    op = fastgru.AUGRUSequence(*_weights(rng, np.float32))
    stream = op.stream(np.zeros((N, 1, H), np.float32))
    X, A = np.zeros((N, 2, I), np.float32), np.zeros((N, 2, 1), np.float32)
    stream(X, A, out=np.empty((N, 1, 2, H), np.float32))  # a chunk like it passed the checks
    with pytest.raises(
        FastGRUError, match=r"AUGRUSequence stream: out has shape \(6, 1, 3, 12\); expected \(6, 1, 2, 12\)"
    ):
        stream(X, A, out=np.empty((N, 1, 3, H), np.float32))
    with pytest.raises(TypeError, match="AUGRUSequence stream: out is float64"):
        stream(X, A, out=np.empty((N, 1, 2, H)))
    stack = fastgru.GRUStack([fastgru.GRUSequence(*_weights(rng, np.float32))])
    stack_stream = stack.stream(np.zeros((N, H), np.float32))
    with pytest.raises(FastGRUError, match=r"GRUStack stream: out has shape \(6, 1, 2, 5\); expected \(6, 1, 2, 12\)"):
        stack_stream(X, out=np.empty((N, 1, 2, 5), np.float32))
    assert stream.steps == 2 and stack_stream.steps == 0  # the refused chunks fed nothing


@pytest.mark.parametrize("kind", ["op", "stack"])
def test_frames_after_the_first_take_the_plan_without_checks(monkeypatch, kind):
    """A stream's chunks of a shape seen before run through the plan of the last one
    (``_plan.StreamSteps``): the runner's checked ``run`` only for the first chunk of each shape, and
    again on a thread other than the plan's (a plan's scratch is its thread's); the bits are still
    those of one call, ragged lengths and a stream fed from two threads included."""
    import threading

    from fastgru._dispatch import Packed

    rng = np.random.default_rng(3)
    W, R, B = _weights(rng, np.float32)
    op = fastgru.GRUSequence(W, R, B)
    scale = 1 / np.sqrt(H)
    shapes = ((1, 3 * H, H), (1, 3 * H, H), (1, 3 * H))
    second = [rng.uniform(-scale, scale, shape).astype(np.float32) for shape in shapes]
    runner = fastgru.GRUStack([op, fastgru.GRUSequence(*second)]) if kind == "stack" else op
    runs = []
    cls = fastgru.GRUStack if kind == "stack" else Packed
    checked = cls.run
    monkeypatch.setattr(cls, "run", lambda self, *a, **k: runs.append(a[1]) or checked(self, *a, **k))
    S = 12
    X = rng.standard_normal((N, S, I)).astype(np.float32)
    lengths = np.minimum(LENGTHS, S)
    if kind == "stack":
        h0 = np.zeros((N, runner.state_size), np.float32)
        Y, Ho = runner(X, h0, lengths)
        runs.clear()
        stream = runner.stream(h0, lengths)
    else:
        h0 = np.zeros((N, 1, H), np.float32)
        Y, Ho = op(X, h0, lengths)
        runs.clear()
        stream = op.stream(h0, lengths)
    parts = []
    for t in range(6):  # frames of one step on this thread: one checked run, for the first
        parts.append(stream(np.ascontiguousarray(X[:, t : t + 1])).copy())
    assert runs == [1]
    other = threading.Thread(target=lambda: parts.append(stream(np.ascontiguousarray(X[:, 6:7])).copy()))
    other.start()
    other.join()
    assert runs == [1, 1]  # the other thread's own plan
    parts.append(stream(np.ascontiguousarray(X[:, 7:9])).copy())  # back here, another shape
    parts.append(stream(np.ascontiguousarray(X[:, 9:])).copy())  # a shape of 3 steps
    assert runs == [1, 1, 2, 3]
    np.testing.assert_array_equal(np.concatenate(parts, axis=2), Y)
    np.testing.assert_array_equal(stream.Ho, Ho)
