"""State pools (issue 14): many streams advanced together in one kernel call give, for every stream,
the bits it gets alone (``op.stream``, and ``cell(x, h, out=h)`` for a cell), on every kernel path
and thread count; a failed call changes no state; a step with ``out=`` allocates nothing; steps
with disjoint ids run from several threads at once, and held ids are refused."""

import sys
import threading
import tracemalloc
import weakref
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
import pytest
from conftest import BFLOAT16, DTYPES, expected_kernel, reach
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastgru
from fastgru import FastGRUError, _partner
from fastgru._codes import HELD, IDLE

I, H = 4, 9  # input_size, hidden_size of the small ops
KINDS = ["cell-lbr0", "cell-lbr1", "gru-lbr0", "gru-lbr1", "augru2d", "augru3d"]
PATHS = ["serial", "parallel", "split", "pair"]


def _weights(rng, kind, dtype, i=I, h=H):
    """W, R, B of ``kind`` (KINDS) in ``dtype``: the cell's and AUGRU's documented 2-D layout, else
    GRUSequence's ranks."""
    scale = 1 / np.sqrt(h)
    lead = () if kind.startswith("cell") or kind == "augru2d" else (1,)
    gates = 4 if kind.endswith("lbr1") else 3

    def uniform(*shape):
        return rng.uniform(-scale, scale, (*lead, *shape)).astype(dtype)

    return uniform(3 * h, i), uniform(3 * h, h), uniform(gates * h)


def make_op(kind, dtype, rng, i=I, h=H):
    """A prepared op of ``kind``; the lbr1 kinds also clip. A cell's GRUSequence twin (the same
    weights and attributes: one step of it is the cell) goes to TWINS."""
    W, R, B = _weights(rng, kind, dtype, i, h)
    lbr = kind.endswith("lbr1")
    attrs = {"linear_before_reset": lbr, "clip": 1.5 if lbr else np.inf}
    if kind.startswith("cell"):
        cell = fastgru.GRUCell(W, R, B, **attrs)
        TWINS[cell] = fastgru.GRUSequence(W[None], R[None], B[None], **attrs)
        return cell
    if kind.startswith("gru"):
        return fastgru.GRUSequence(W, R, B, **attrs)
    return fastgru.AUGRUSequence(W, R, B)


#: The GRUSequence twin of each cell made by make_op.
TWINS = weakref.WeakKeyDictionary()


class Alone:
    """One stream fed alone: ``op.stream`` for the sequence ops; for a cell, ``cell(x, h, out=h)``
    (float32, float64) and a GRUSequence of the cell's weights streamed one step at a time (every
    dtype: its state stays in float32 for float16 and bfloat16, as the pool's does)."""

    def __init__(self, op, initial_state):
        self.op = op
        spec = op.spec
        self.cell = spec.op == "GRUCell"
        h0 = np.zeros(_state_shape(op), spec.dtype) if initial_state is None else initial_state
        if self.cell:
            self.native = spec.dtype in (np.float32, np.float64)
            self.h = h0.reshape(1, -1).copy()
            self.twin_stream = TWINS[op].stream(h0.reshape(1, 1, -1))
        else:
            self.stream = op.stream(h0[None])

    def feed(self, x, length=None, a=None):
        """One step of the pool for this stream: its row of the pool's result."""
        if self.cell:
            y = self.twin_stream(x[None, None])[0, 0, 0]
            if self.native:
                self.op(x[None], self.h, out=self.h)
                np.testing.assert_array_equal(self.h[0], y)  # the reference agrees with itself
            return y
        s, spec = x.shape[0], self.op.spec
        row = np.zeros(self.op._packed.result_shapes(1, s)[0][1:], spec.dtype)
        if length:
            y = self.stream(x[None, :length]) if a is None else self.stream(x[None, :length], a[None, :length])
            row[..., :length, :] = y[0]
        return row

    def state(self):
        if self.cell:
            return self.h[0].copy() if self.native else self.twin_stream.Ho[0, 0]
        return self.stream.Ho[0]


def _state_shape(op):
    return (1, op.hidden_size) if op.spec.layout == "sequence" else (op.hidden_size,)


# ---------------------------------------------------------------------------------------- scripts


def draw_script(data, op, capacity, max_steps=6, actions=12):
    """A random interleaving of opens, closes, resets and steps of random subsets of the open
    streams (any order, ragged lengths, 0 included), drawn with hypothesis; arrays from a drawn seed.
    It ends with a step of one stream and one of every open stream, so that every script reaches the
    one-row and the many-row kernels. Streams are named by slots; the pool's ids are its own."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    spec, dtype = op.spec, op.spec.dtype
    cell, augru = spec.op == "GRUCell", spec.op == "AUGRUSequence"
    open_slots, script, slots = [], [], 0

    def initial():
        return None if rng.random() < 0.3 else rng.standard_normal(_state_shape(op)).astype(dtype)

    def step(chosen):
        n = len(chosen)
        if cell:
            return ("step", chosen, rng.standard_normal((n, spec.input_size)).astype(dtype), None, None)
        s = int(rng.integers(1, max_steps + 1))
        X = rng.standard_normal((n, s, spec.input_size)).astype(dtype)
        lengths = None if rng.random() < 0.2 else rng.integers(0, s + 1, n)
        A = rng.uniform(0, 1, (n, s, 1)).astype(dtype) if augru else None
        return ("step", chosen, X, lengths, A)

    for _ in range(data.draw(st.integers(1, actions), label="actions")):
        what = data.draw(st.sampled_from(["open", "close", "reset", "step", "step", "step"]), label="action")
        if what == "open" or not open_slots:
            if len(open_slots) < capacity:
                script.append(("open", slots, initial()))
                open_slots.append(slots)
                slots += 1
        elif what == "close":
            slot = open_slots.pop(data.draw(st.integers(0, len(open_slots) - 1), label="close"))
            script.append(("close", slot))
        elif what == "reset":
            script.append(("reset", open_slots[data.draw(st.integers(0, len(open_slots) - 1))], initial()))
        else:
            chosen = data.draw(st.lists(st.sampled_from(open_slots), min_size=1, unique=True), label="subset")
            script.append(step(chosen))
    while len(open_slots) < 2:
        script.append(("open", slots, initial()))
        open_slots.append(slots)
        slots += 1
    script.append(step([open_slots[-1]]))
    script.append(step(list(rng.permutation(open_slots))))
    return script


def run_alone(op, script):
    """Each stream of the script fed alone: (the result of every step, as rows; final states by slot)."""
    streams, results = {}, []
    for action in script:
        if action[0] == "open" or action[0] == "reset":
            streams[action[1]] = Alone(op, action[2])
        elif action[0] == "close":
            del streams[action[1]]
        else:
            _, chosen, X, lengths, A = action
            rows = []
            for k, slot in enumerate(chosen):
                length = None if lengths is None else int(lengths[k])
                if length is None and X.ndim == 3:
                    length = X.shape[1]
                rows.append(streams[slot].feed(X[k], length, None if A is None else A[k]))
            results.append(np.stack(rows))
    return results, {slot: stream.state() for slot, stream in streams.items()}


def run_pool(pool, script, out=False):
    """The script on a pool: (the result of every step; final states by slot)."""
    ids, results = {}, []
    for action in script:
        if action[0] == "open":
            ids[action[1]] = pool.open(action[2])
        elif action[0] == "reset":
            pool.reset(ids[action[1]], action[2])
        elif action[0] == "close":
            pool.close(ids.pop(action[1]))
        else:
            _, chosen, X, lengths, A = action
            stream_ids = np.array([ids[slot] for slot in chosen])
            args = (stream_ids, X) if lengths is None and A is None else (stream_ids, X, lengths, A)
            if out:
                shape = pool.op._packed.result_shapes(len(chosen), 1 if X.ndim == 2 else X.shape[1])[0]
                result = np.full(shape, np.nan, pool.op.dtype)
                assert pool.step(*args, out=result) is result
            else:
                result = pool.step(*args)
            results.append(result)
    assert len(pool) == len(ids)
    return results, {slot: pool.state(i) for slot, i in ids.items()}


def assert_same_bits(got, want):
    (got_steps, got_states), (want_steps, want_states) = got, want
    assert len(got_steps) == len(want_steps)
    for k, (g, w) in enumerate(zip(got_steps, want_steps)):
        assert g.dtype == w.dtype and g.shape == w.shape, (k, g.dtype, w.dtype, g.shape, w.shape)
        np.testing.assert_array_equal(g, w, err_msg=f"step {k}")
    assert got_states.keys() == want_states.keys()
    for slot, w in want_states.items():
        assert got_states[slot].dtype == w.dtype and got_states[slot].shape == w.shape
        np.testing.assert_array_equal(got_states[slot], w, err_msg=f"state of slot {slot}")


# ---------------------------------------------------------------------------------- the guarantee


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_streams_in_a_pool_get_the_bits_they_get_alone(monkeypatch, kernels_run, kind, dtype, path, data):
    """Any interleaving of steps over random subsets of the streams, with ragged lengths, gives every
    stream the bits of feeding it alone, on 1 and 2 threads, on every kernel path (asserted)."""
    if path == "pair" and not _partner.PARTNER.enabled:
        pytest.skip(f"no partner thread here ({_partner.off_reason()})")
    op = make_op(kind, dtype, np.random.default_rng(KINDS.index(kind)))
    script = draw_script(data, op, capacity=5)
    want = run_alone(op, script)  # the default paths, one call per stream
    with monkeypatch.context() as patch:
        reach(patch, path)
        for count in (1, 2):
            kernels_run.clear()
            with fastgru.threads(count):
                assert_same_bits(run_pool(fastgru.StatePool(op, 5), script, out=count == 2), want)
            if count == 2 and numba.config.NUMBA_NUM_THREADS >= 2:
                ran = {name.rstrip("+") for name in kernels_run}
                assert ran == {expected_kernel(path, True), expected_kernel(path, False)}, (path, ran)


def test_a_pool_step_is_one_kernel_call_for_every_stream(kernels_run):
    rng = np.random.default_rng(1)
    op = make_op("gru-lbr0", np.float32, rng)
    pool = fastgru.StatePool(op, 40)
    ids = [pool.open() for _ in range(40)]
    kernels_run.clear()
    pool.step(ids[::-1], rng.standard_normal((40, 3, I)).astype(np.float32), rng.integers(0, 4, 40))
    assert len(kernels_run) == 1


def test_length_zero_keeps_the_state_and_gives_zero_y():
    rng = np.random.default_rng(2)
    op = make_op("gru-lbr1", np.float32, rng)
    pool = fastgru.StatePool(op, 3)
    h0 = rng.standard_normal((1, H)).astype(np.float32)
    a, b = pool.open(h0), pool.open(h0)
    X = rng.standard_normal((2, 4, I)).astype(np.float32)
    Y = pool.step([a, b], X, [0, 4])
    np.testing.assert_array_equal(pool.state(a), h0)  # not zero, as the op's Ho would be
    assert not Y[0].any() and Y[1].all()
    np.testing.assert_array_equal(Y[1, 0, -1], pool.state(b)[0])


def test_a_cell_pool_in_float16_is_the_float32_pool_rounded():
    """float16 is computed in float32 and the states stay in float32: the float16 pool's results are
    the float32 pool's on the same (exactly widened) data, rounded once."""
    rng = np.random.default_rng(3)
    W, R, B = _weights(rng, "cell-lbr0", np.float16)
    pools = [
        fastgru.StatePool(fastgru.GRUCell(W.astype(t), R.astype(t), B.astype(t)), 4) for t in (np.float16, np.float32)
    ]
    for pool in pools:
        pool.open(), pool.open()
    for _ in range(5):
        x = rng.standard_normal((2, I)).astype(np.float16)
        h16, h32 = pools[0].step([1, 0], x), pools[1].step([1, 0], x.astype(np.float32))
        np.testing.assert_array_equal(h16, h32.astype(np.float16))
    np.testing.assert_array_equal(pools[0].state(0), pools[1].state(0).astype(np.float16))
    assert pools[0]._states.dtype == np.float32


def test_empty_steps_change_nothing():
    rng = np.random.default_rng(4)
    op = make_op("augru2d", np.float32, rng)
    pool = fastgru.StatePool(op, 2)
    a = pool.open(rng.standard_normal(H).astype(np.float32))
    before = pool.state(a)
    Y = pool.step(np.zeros(0, np.int64), np.zeros((0, 3, I), np.float32), None, np.zeros((0, 3, 1), np.float32))
    assert Y.shape == (0, 3, H)
    Y = pool.step([a], np.zeros((1, 0, I), np.float32), [0], np.zeros((1, 0, 1), np.float32))
    assert Y.shape == (1, 0, H)
    np.testing.assert_array_equal(pool.state(a), before)


@pytest.mark.parametrize(
    "ids_dtype",
    [
        np.int8,
        np.uint8,
        np.int16,
        np.uint16,
        np.int32,
        np.uint32,
        np.uint64,
        "list",
        "big-endian",
        "strided",
        "read-only",
    ],
)
def test_ids_of_any_integer_dtype_and_layout(ids_dtype):
    rng = np.random.default_rng(5)
    op = make_op("cell-lbr1", np.float32, rng)
    pools = [fastgru.StatePool(op, 6) for _ in range(2)]
    h0 = rng.standard_normal((6, H)).astype(np.float32)
    for pool in pools:
        for h in h0:
            pool.open(h)
        pool.reset(2)
    order = np.array([4, 0, 2, 5])
    if ids_dtype == "list":
        ids = order.tolist()
    elif ids_dtype == "big-endian":
        ids = order.astype(">i8")
    elif ids_dtype == "strided":
        ids = np.repeat(order, 2)[::2]
    elif ids_dtype == "read-only":
        ids = order.copy()
        ids.flags.writeable = False
    else:
        ids = order.astype(ids_dtype)
    X = rng.standard_normal((4, I)).astype(np.float32)
    np.testing.assert_array_equal(pools[0].step(ids, X), pools[1].step(order, X))
    for k in range(6):
        np.testing.assert_array_equal(pools[0].state(k), pools[1].state(k))


def test_read_only_and_strided_inputs():
    rng = np.random.default_rng(6)
    op = make_op("augru3d", np.float64, rng)
    pools = [fastgru.StatePool(op, 3) for _ in range(2)]
    for pool in pools:
        pool.open(), pool.open()
    X = rng.standard_normal((2, 5, 2 * I))[:, :, ::2]  # strided
    A = np.asfortranarray(rng.uniform(size=(2, 5, 1)))
    L = np.array([5, 3], np.int64)
    frozen = [a.copy() for a in (X, A, L)]
    for a in frozen:
        a.flags.writeable = False
    got = pools[0].step(np.array([1, 0]), frozen[0], frozen[2], frozen[1])
    want = pools[1].step([1, 0], np.ascontiguousarray(X), L.astype(np.int32), np.ascontiguousarray(A))
    np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------------------- streams and ids


def test_ids_are_reused_and_the_capacity_is_fixed():
    rng = np.random.default_rng(7)
    pool = fastgru.StatePool(make_op("cell-lbr0", np.float32, rng), 3)
    assert [pool.open() for _ in range(3)] == [0, 1, 2] and len(pool) == 3
    with pytest.raises(
        FastGRUError,
        match=r"GRUCell pool.open: all 3 streams are open \(capacity=3\); close one "
        r"first, or make the pool with a larger capacity",
    ):
        pool.open()
    assert len(pool) == 3 and pool._states.shape == (3, 1, H)  # no growth
    pool.close(2)
    pool.close(0)
    assert len(pool) == 1 and 1 in pool and 0 not in pool and 7 not in pool and "x" not in pool
    assert pool.open() == 0 and pool.open() == 2  # the lowest free id first
    assert repr(pool).startswith("StatePool(GRUCell(hidden_size=9") and repr(pool).endswith("capacity=3, open=3)")


def test_open_reset_and_state():
    rng = np.random.default_rng(8)
    op = make_op("gru-lbr0", np.float16, rng)
    pool = fastgru.StatePool(op, 4)
    assert pool.state_shape == (1, H)
    h0 = rng.standard_normal((1, H)).astype(np.float16)
    a, b = pool.open(h0), pool.open()
    np.testing.assert_array_equal(pool.state(a), h0)
    assert pool.state(a).dtype == np.float16 and not pool.state(b).any()
    got = pool.state(a)
    got[:] = 7  # a copy
    np.testing.assert_array_equal(pool.state(a), h0)
    pool.step([a, b], rng.standard_normal((2, 3, I)).astype(np.float16))
    pool.reset(a)
    assert not pool.state(a).any()
    pool.reset(b, h0)
    np.testing.assert_array_equal(pool.state(b), h0)


def _pools_for_errors():
    rng = np.random.default_rng(9)
    cell = fastgru.StatePool(make_op("cell-lbr0", np.float32, rng), 4)
    seq = fastgru.StatePool(make_op("gru-lbr0", np.float32, rng), 4)
    augru = fastgru.StatePool(make_op("augru2d", np.float32, rng), 4)
    for pool in (cell, seq, augru):
        for _ in range(3):
            pool.open(rng.standard_normal(pool.state_shape).astype(np.float32))
        pool.close(1)  # open: 0 and 2; closed: 1 and 3
    return {"cell": cell, "seq": seq, "augru": augru}


X2, X3 = np.zeros((2, I), np.float32), np.zeros((2, 3, I), np.float32)
A3 = np.zeros((2, 3, 1), np.float32)
BAD_STEPS = [
    (
        "cell",
        TypeError,
        r"GRUCell pool.step: ids is float64; expected an integer dtype \(the ids pool.open\(\) "
        r"returned\), e.g. np.int64",
        ([0.0, 2.0], X2),
    ),
    ("cell", TypeError, r"GRUCell pool.step: ids is bool; expected an integer dtype", ([True, False], X2)),
    (
        "cell",
        FastGRUError,
        r"GRUCell pool.step: ids has shape \(1, 2\); expected a 1-D array of stream ids",
        ([[0, 2]], X2),
    ),
    ("cell", FastGRUError, r"GRUCell pool.step: ids\[1\] is 4; expected an id in \[0, capacity=4\)", ([0, 4], X2)),
    ("cell", FastGRUError, r"GRUCell pool.step: ids\[0\] is -1; expected an id in \[0, capacity=4\)", ([-1, 0], X2)),
    (
        "cell",
        FastGRUError,
        r"GRUCell pool.step: ids\[1\] is 1, which is not open; expected ids of open streams",
        ([0, 1], X2),
    ),
    (
        "cell",
        FastGRUError,
        r"GRUCell pool.step: ids\[0\] and ids\[2\] are both 2; expected distinct ids \(a stream "
        r"advances once per step\)",
        ([2, 0, 2], np.zeros((3, I), np.float32)),
    ),
    (
        "cell",
        FastGRUError,
        r"GRUCell pool.step: X has batch_size 2 \(X.shape\[0\]\); expected 1, one row per id",
        ([0], X2),
    ),
    (
        "cell",
        FastGRUError,
        r"GRUCell: X has shape \(2, 5\); expected \(batch_size=2, input_size=4\)",
        ([0, 2], np.zeros((2, 5), np.float32)),
    ),
    ("cell", FastGRUError, r"GRUCell: X has rank 3", ([0, 2], X3)),
    ("cell", TypeError, r"GRUCell: X is float64 but the op's W is float32", ([0, 2], X2.astype(np.float64))),
    (
        "cell",
        TypeError,
        r"GRUCell pool.step: a cell takes no sequence_lengths; each listed stream advances one "
        r"step: pool.step\(ids, X\)",
        ([0, 2], X2, [1, 1]),
    ),
    (
        "seq",
        FastGRUError,
        r"GRUSequence: sequence_lengths\[1\] is 4; expected 0 <= sequence_lengths <= "
        r"seq_length=3",
        ([0, 2], X3, [3, 4]),
    ),
    (
        "seq",
        FastGRUError,
        r"GRUSequence: sequence_lengths has shape \(3,\); expected \(batch_size=2\); "
        r"batch_size from X.shape\[0\]",
        ([0, 2], X3, [3, 3, 3]),
    ),
    (
        "seq",
        TypeError,
        r"GRUSequence: sequence_lengths is float64; expected an integer dtype",
        ([0, 2], X3, [3.0, 1.0]),
    ),
    (
        "seq",
        FastGRUError,
        r"GRUSequence pool.step: A is given; expected no A: only AUGRUSequence takes A",
        ([0, 2], X3, None, A3),
    ),
    (
        "augru",
        FastGRUError,
        r"AUGRUSequence pool.step: A is missing; expected pool.step\(ids, X, sequence_lengths, A\)",
        ([0, 2], X3),
    ),
    (
        "augru",
        FastGRUError,
        r"AUGRUSequence: A has shape \(2, 4, 1\); expected \(batch_size=2, seq_length=3, 1\)",
        ([0, 2], X3, None, np.zeros((2, 4, 1), np.float32)),
    ),
]
VALID_STEPS = {"cell": ([2, 0], X2), "seq": ([2, 0], X3), "augru": ([2, 0], X3, None, A3)}
BAD_OUTS = [
    (np.zeros((2, H + 1), np.float32), FastGRUError, r"GRUCell pool.step: out has shape \(2, 10\); expected \(2, 9\)"),
    (np.zeros((2, H)), TypeError, r"GRUCell pool.step: out is float64; expected float32, the dtype of the inputs"),
    (np.zeros((H, 2), np.float32).T, FastGRUError, r"GRUCell pool.step: out must be a writeable C-contiguous array"),
    ([[0.0] * H] * 2, FastGRUError, r"GRUCell pool.step: out is list; expected an ndarray of shape \(2, 9\)"),
]


@pytest.mark.parametrize("which, error, message, args", BAD_STEPS, ids=[m[:60] for _, _, m, _ in BAD_STEPS])
def test_a_failed_step_names_the_input_and_changes_no_state(which, error, message, args):
    pool = _pools_for_errors()[which]
    states, marks = pool._states.copy(), bytes(pool._marks)
    with pytest.raises(error, match=message):
        pool.step(*args)
    np.testing.assert_array_equal(pool._states, states)
    assert bytes(pool._marks) == marks  # no id left held
    pool.step(*VALID_STEPS[which])


@pytest.mark.parametrize("n", [2, 3, 17, 40], ids=lambda n: f"{n}ids")
def test_a_refused_claim_names_the_id_and_holds_none(n):
    """A closed, repeated or out-of-range id anywhere in a step (here the last) is named, and the
    ids the claim marked before it are released."""
    rng = np.random.default_rng(15)
    pool = fastgru.StatePool(make_op("cell-lbr1", np.float32, rng), 64)
    for _ in range(50):
        pool.open()
    pool.close(45)
    ids = rng.permutation(45)[:n]
    x = np.ones((n, I), np.float32)
    marks = bytes(pool._marks)
    cases = [(45, r"ids\[{k}\] is 45, which is not open"), (int(ids[0]), r"ids\[0\] and ids\[{k}\] are both {i}")]
    for value, message in cases:
        bad = ids.copy()
        k = n - 1
        bad[k] = value
        with pytest.raises(FastGRUError, match="GRUCell pool.step: " + message.format(k=k, i=value)):
            pool.step(bad, x)
        assert bytes(pool._marks) == marks
    with pytest.raises(FastGRUError, match=rf"GRUCell pool.step: ids\[{n - 1}\] is 64; expected an id in \[0, "):
        pool.step(np.append(ids[:-1], 64), x)
    pool.step(ids, x)
    assert bytes(pool._marks) == marks


def test_more_ids_than_the_capacity_repeat_one():
    pool = fastgru.StatePool(make_op("cell-lbr0", np.float32, np.random.default_rng(16)), 4)
    for _ in range(4):
        pool.open()
    with pytest.raises(FastGRUError, match=r"GRUCell pool.step: ids\[0\] and ids\[4\] are both 0; expected distinct"):
        pool.step(np.arange(20) % 4, np.ones((20, I), np.float32))
    assert set(pool._marks) == {IDLE}


@pytest.mark.parametrize("out, error, message", BAD_OUTS, ids=["shape", "dtype", "layout", "list"])
def test_a_bad_out_changes_no_state(out, error, message):
    pool = _pools_for_errors()["cell"]
    states = pool._states.copy()
    with pytest.raises(error, match=message):
        pool.step([0, 2], np.ones((2, I), np.float32), out=out)
    np.testing.assert_array_equal(pool._states, states)


def test_bad_ids_of_the_stream_methods():
    pool = _pools_for_errors()["seq"]
    states = pool._states.copy()
    for method in ("close", "reset", "state"):
        with pytest.raises(
            FastGRUError,
            match=rf"GRUSequence pool.{method}: stream 1 is not open; expected the id "
            r"of an open stream \(pool.open\(\) returns one\)",
        ):
            getattr(pool, method)(1)
        with pytest.raises(
            FastGRUError,
            match=rf"GRUSequence pool.{method}: id 4 is out of range; expected an id "
            r"in \[0, capacity=4\)",
        ):
            getattr(pool, method)(4)
        with pytest.raises(TypeError, match=rf"GRUSequence pool.{method}: id is 0.0 \(float\); expected an int"):
            getattr(pool, method)(0.0)
        with pytest.raises(TypeError, match=rf"GRUSequence pool.{method}: id is True \(bool\)"):
            getattr(pool, method)(True)
    with pytest.raises(
        FastGRUError,
        match=r"GRUSequence pool.open: initial_state has shape \(9,\); expected \(1, 9\), "
        r"one stream's state \(hidden_size=9\)",
    ):
        pool.open(np.zeros(H, np.float32))
    with pytest.raises(
        TypeError,
        match=r"GRUSequence pool.reset: initial_state is float64 but the op's W is "
        r"float32",
    ):
        pool.reset(0, np.zeros((1, H)))
    np.testing.assert_array_equal(pool._states, states)
    assert len(pool) == 2
    assert pool.open(np.zeros((1, H), np.float32)) == 1  # numpy integers are ids too
    pool.close(np.int32(1))


def test_pool_construction_errors():
    rng = np.random.default_rng(10)
    W, R, B = _weights(rng, "gru-lbr0", np.float32)
    with pytest.raises(
        TypeError,
        match=r"StatePool: op is function; expected a prepared fastgru.GRUCell, "
        r"GRUSequence, AUGRUSequence or GRUStack",
    ):
        fastgru.StatePool(fastgru.gru_cell, 4)
    for direction in ("reverse", "bidirectional"):
        d = 2 if direction == "bidirectional" else 1
        op = fastgru.GRUSequence(np.repeat(W, d, 0), np.repeat(R, d, 0), np.repeat(B, d, 0), direction=direction)
        with pytest.raises(
            FastGRUError,
            match=rf"StatePool: the GRUSequence's direction is '{direction}'; a pool "
            r"runs forward streams only",
        ):
            fastgru.StatePool(op, 4)
    op = fastgru.GRUSequence(W, R, B)
    for capacity in (0, -3, 2.0, True, None):
        with pytest.raises(FastGRUError, match=rf"StatePool: capacity is {capacity!r}; expected a positive integer"):
            fastgru.StatePool(op, capacity)
    assert fastgru.StatePool(op, np.int16(2)).capacity == 2


# ------------------------------------------------------------------------------------ allocation


def _numpy_data_allocations(run):
    """Where ``run()`` holds NumPy data (tracemalloc's NumPy domain) between any two Python opcodes
    (file, line, bytes), and its peak of traced memory of all domains in a run without the tracer.

    The opcode trace sees every array a Python expression makes, even one freed right after; the
    peak also catches buffers NumPy makes and frees inside one C call."""
    domain = np.lib.tracemalloc_domain
    seen = []

    def tracer(frame, event, arg):
        frame.f_trace_opcodes = True
        held = [trace for trace in tracemalloc._get_traces() if trace[0] == domain]
        if held:
            seen.append((frame.f_code.co_filename, frame.f_lineno, held[0][1]))
        return tracer

    tracemalloc.start()
    try:
        sys.settrace(tracer)
        try:
            run()
        finally:
            sys.settrace(None)
        start = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        run()
        peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    return seen, peak


@pytest.mark.parametrize(
    "kind, dtype, ids_dtype, n",
    [
        ("cell-lbr0", np.float32, np.int64, 1024),
        ("cell-lbr0", np.float32, np.int64, 8),
        ("cell-lbr1", np.float16, np.int32, 1024),
        ("gru-lbr0", np.float32, np.int32, 1024),
        ("augru3d", np.float64, np.uint16, 1024),
        ("gru-lbr1", "bfloat16", np.int64, 1024),
    ],
)
def test_a_step_with_out_allocates_nothing(kind, dtype, ids_dtype, n):
    """1024 streams, so that any buffer of the ids, lengths or results (8 KiB and more) would stand
    out of the peak (about 2 KiB of Python objects: views, integers); and a step of a few ids,
    which checks them as a list."""
    if dtype == "bfloat16":
        if BFLOAT16 is None:
            pytest.skip("ml_dtypes is not installed")
        dtype = BFLOAT16
    rng = np.random.default_rng(11)
    s = 1 if kind.startswith("cell") else 3
    op = make_op(kind, dtype, rng, h=4)
    pool = fastgru.StatePool(op, n)
    for _ in range(n):
        pool.open()
    ids = rng.permutation(n).astype(ids_dtype)
    X = rng.standard_normal((n, I) if s == 1 else (n, s, I)).astype(dtype)
    args = [ids, X]
    if not kind.startswith("cell"):
        args.append(rng.integers(0, s + 1, n).astype(np.int32))
    if kind.startswith("augru"):
        args.append(rng.uniform(size=(n, s, 1)).astype(dtype))
    out = np.empty(op._packed.result_shapes(n, s)[0], dtype)
    want = pool.step(*args)  # the first step makes the thread's kept buffers
    pool.reset(0)
    seen, peak = _numpy_data_allocations(lambda: pool.step(*args, out=out))
    assert not seen, seen[:5]
    assert peak < 4096, f"{peak} bytes at the peak of a step"
    assert out.shape == want.shape


# --------------------------------------------------------------------------------------- threads


def test_disjoint_steps_from_several_threads_at_once():
    """Four Python threads step their own quarter of 64 streams, 30 ticks each, at once: every stream
    ends with the bits of the same steps taken one thread after the other."""
    rng = np.random.default_rng(12)
    op = make_op("gru-lbr0", np.float32, rng, i=16, h=48)
    ticks = [[rng.standard_normal((16, 4, 16)).astype(np.float32) for _ in range(30)] for _ in range(4)]
    lengths = [[rng.integers(0, 5, 16) for _ in range(30)] for _ in range(4)]
    quarters = [np.arange(q, 64, 4) for q in range(4)]

    def serve(pool, q):
        return [pool.step(quarters[q], x, length) for x, length in zip(ticks[q], lengths[q])]

    pools = [fastgru.StatePool(op, 64) for _ in range(2)]
    for pool in pools:
        for _ in range(64):
            pool.open()
    want = [serve(pools[0], q) for q in range(4)]
    start = threading.Barrier(4)

    def serve_at_once(q):
        start.wait()
        return serve(pools[1], q)

    with ThreadPoolExecutor(max_workers=4) as executor:
        got = list(executor.map(serve_at_once, range(4)))
    for g, w in zip(got, want):
        for a, b in zip(g, w):
            np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(pools[1]._states, pools[0]._states)
    assert set(pools[1]._marks) == {IDLE}


def test_ids_held_by_a_running_step_are_refused(monkeypatch):
    """While a step runs (held inside its kernel call here), a step on any of its ids, and close,
    reset or state of one, raise; a step on other ids runs."""
    rng = np.random.default_rng(13)
    op = make_op("cell-lbr0", np.float32, rng)
    pool = fastgru.StatePool(op, 4)
    for _ in range(4):
        pool.open()
    entered, release = threading.Event(), threading.Event()
    run = op._packed.run
    holder = threading.current_thread

    def held_run(*args, **kwargs):
        if holder().name == "holder":
            entered.set()
            assert release.wait(60)
        return run(*args, **kwargs)

    monkeypatch.setattr(op._packed, "run", held_run)
    x = np.ones((2, I), np.float32)
    thread = threading.Thread(target=pool.step, args=([3, 1], x), name="holder")
    thread.start()
    try:
        assert entered.wait(60)
        with pytest.raises(
            FastGRUError,
            match=r"GRUCell pool.step: ids\[1\] is 1, which a step on another thread is "
            r"advancing; steps that run at once must have disjoint ids",
        ):
            pool.step([0, 1], x)
        for method in ("close", "reset", "state"):
            with pytest.raises(
                FastGRUError,
                match=rf"GRUCell pool.{method}: stream 3 is being advanced by a step on "
                r"another thread; wait for that step to return",
            ):
                getattr(pool, method)(3)
        pool.step([2, 0], x)  # disjoint ids run meanwhile
        assert list(pool._marks) == [IDLE, HELD, IDLE, HELD]
    finally:
        release.set()
        thread.join(60)
    assert list(pool._marks) == [IDLE] * 4
    pool.close(3)


def test_open_and_close_from_several_threads():
    rng = np.random.default_rng(14)
    pool = fastgru.StatePool(make_op("cell-lbr0", np.float32, rng), 200)

    def churn(k):
        mine = []
        for j in range(300):
            if len(mine) < 25 and (j + k) % 3:
                mine.append(pool.open())
            elif mine:
                pool.close(mine.pop(0))
        return mine

    with ThreadPoolExecutor(max_workers=8) as executor:
        kept = [i for mine in executor.map(churn, range(8)) for i in mine]
    assert len(set(kept)) == len(kept) == len(pool)
    assert [i for i, mark in enumerate(pool._marks) if mark == IDLE] == sorted(kept)
