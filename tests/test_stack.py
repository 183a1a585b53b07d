"""GRUStack: the bits of its layers run one by one with their ops, on every path, thread count and
dtype, with ragged and empty lengths; streams of stacks; the errors of the first layer that
refuses the input; no caller array written."""

import time

import numba
import numpy as np
import pytest
from conftest import reach
from partner_control import spinning_partner, until

import fastgru
from fastgru import _partner
from fastgru._dispatch import NO_ROWS


def _layer(rng, i, h, direction="forward", lbr=False, dtype=np.float32, **attributes):
    d = 2 if direction == "bidirectional" else 1
    scale = 1 / np.sqrt(h)
    return fastgru.GRUSequence(
        rng.uniform(-scale, scale, (d, 3 * h, i)).astype(dtype),
        rng.uniform(-scale, scale, (d, 3 * h, h)).astype(dtype),
        rng.uniform(-scale, scale, (d, (4 if lbr else 3) * h)).astype(dtype),
        direction=direction,
        linear_before_reset=lbr,
        **attributes,
    )


def _mixed(rng, dtype):
    """Layers that differ in everything a layer may: direction, size, lbr, clip, activations."""
    return [
        _layer(rng, 5, 7, "bidirectional", True, dtype),
        _layer(rng, 14, 9, "reverse", False, dtype, clip=0.7),
        _layer(rng, 9, 33, "forward", True, dtype, activations=["tanh", "relu"]),
        _layer(rng, 33, 6, "forward", False, dtype),
    ]


def _one_by_one(layers, X, h0, lengths):
    """The layers run with their ops, layer k's Y as layer k+1's X: what a stack must give."""
    n, s = X.shape[0], X.shape[1]
    states = []
    at = 0
    for op in layers:
        d, h = op.spec.num_directions, op.hidden_size
        Y, Ho = op(X, np.ascontiguousarray(h0[:, at : at + d * h]).reshape(n, d, h), lengths)
        states.append(Ho.reshape(n, d * h))
        X = Y.transpose(0, 2, 1, 3).reshape(n, s, d * h)
        at += d * h
    return Y, np.concatenate(states, axis=1)


def _inputs(rng, stack, n, s, dtype):
    X = rng.standard_normal((n, s, stack.input_size)).astype(dtype)
    h0 = rng.standard_normal((n, stack.state_size)).astype(dtype)
    lengths = rng.integers(0, s + 1, n)
    lengths[0] = s
    return X, h0, lengths


def _assert_bits(actual, expected):
    for a, e in zip(actual, expected):
        assert a.dtype == e.dtype and a.shape == e.shape
        np.testing.assert_array_equal(a.view(f"u{a.itemsize}"), e.view(f"u{e.itemsize}"))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("path", ["serial", "parallel"])
@pytest.mark.parametrize("threads", [1, 2])
def test_batch_paths_give_the_layers_bits(monkeypatch, dtype, path, threads):
    if threads > numba.config.NUMBA_NUM_THREADS:
        pytest.skip("Numba has fewer threads here")
    rng = np.random.default_rng(1)
    stack = fastgru.GRUStack(_mixed(rng, dtype))
    X, h0, lengths = _inputs(rng, stack, 13, 6, dtype)
    expected = _one_by_one(stack.layers, X, h0, lengths)
    reach(monkeypatch, path)
    with fastgru.threads(threads):
        _assert_bits(stack(X, h0, lengths), expected)
        y, ho = np.empty_like(expected[0]), np.empty_like(expected[1])
        ran = stack.run(13, 6, (X, h0, lengths, NO_ROWS, None, y, ho))
    wanted = "parallel" if path == "parallel" and threads > 1 else "serial"
    assert ran == (wanted,) * 4
    _assert_bits((y, ho), expected)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("path", ["split", "pair"])
@pytest.mark.parametrize("lbr", [False, True])
def test_one_row_paths_give_the_layers_bits(monkeypatch, dtype, path, lbr):
    if path == "pair" and not _partner.PARTNER.enabled:
        pytest.skip("no partner thread here (FASTGRU_SPIN_US=0, or not x86)")
    rng = np.random.default_rng(2)
    layers = [_layer(rng, 6, 40, "forward", lbr, dtype), _layer(rng, 40, 64, "forward", not lbr, dtype)]
    layers.append(_layer(rng, 64, 17, "forward", lbr, dtype, clip=0.5))
    stack = fastgru.GRUStack(layers)
    for s in (1, 7):
        X, h0, lengths = _inputs(rng, stack, 1, s, dtype)
        expected = _one_by_one(layers, X, h0, lengths)
        reach(monkeypatch, path)
        y, ho = np.empty_like(expected[0]), np.empty_like(expected[1])
        with fastgru.threads(2):
            ran = stack.run(1, s, (X, h0, lengths, NO_ROWS, None, y, ho))
        assert ran == (path,) * 3
        _assert_bits((y, ho), expected)
        for forced in ("serial", "parallel", "split", "pair"):  # forced paths, whatever the tuning
            ran = stack.run(1, s, (X, h0, lengths, NO_ROWS, None, y, ho), path=forced)
            _assert_bits((y, ho), expected)
        monkeypatch.undo()


def _forward_layers(rng, dtype, lbr):
    """Forward layers of other sizes and attributes: a wavefront's cut falls between two of them."""
    return [
        _layer(rng, 6, 40, "forward", lbr, dtype),
        _layer(rng, 40, 64, "forward", not lbr, dtype, clip=0.5),
        _layer(rng, 64, 17, "forward", lbr, dtype, activations=["tanh", "relu"]),
    ]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("lbr", [False, True])
@pytest.mark.parametrize("hoist", [True, False])
def test_one_row_wavefront_gives_the_layers_bits(monkeypatch, dtype, lbr, hoist):
    if not _partner.PARTNER.enabled:
        pytest.skip("no partner thread here (FASTGRU_SPIN_US=0, or not x86)")
    rng = np.random.default_rng(12)
    stack = fastgru.GRUStack(_forward_layers(rng, dtype, lbr))
    reach(monkeypatch, "wave", hoist)
    # until the partner took its layers: awake whatever the time between calls (``spinning_partner``),
    # it does as soon as its thread runs
    with fastgru.threads(2), spinning_partner():
        for s, length in ((2, 2), (7, 5), (40, 40), (40, 33), (40, 0)):  # 40: more than WAVE_STEPS
            X, h0, _ = _inputs(rng, stack, 1, s, dtype)
            lengths = np.array([length])
            expected = _one_by_one(stack.layers, X, h0, lengths)
            ran = _until_the_partner_takes_its_layers(stack, s, (X, h0, lengths), expected)
            assert ran <= {("wave",) * 3, ("serial",) * 3}
            _assert_bits(stack(X, h0, lengths), expected)


def _until_the_partner_takes_its_layers(stack, s, inputs, expected):
    """The paths ``stack.run`` answered for one row of ``inputs`` (X, h0, lengths) of S steps, called
    until one ran as a wavefront whose partner took its layers; each call's bits checked."""
    y, ho = np.empty_like(expected[0]), np.empty_like(expected[1])
    ran = set()

    def call():
        ran.add(stack.run(1, s, (*inputs, NO_ROWS, None, y, ho)))
        _assert_bits((y, ho), expected)

    until(lambda: ("wave",) * len(stack.layers) in ran, call, "the partner taking its layers")
    return ran


def test_a_wavefront_nobody_serves_runs_every_layer_on_the_calling_thread(monkeypatch):
    rng = np.random.default_rng(13)
    stack = fastgru.GRUStack(_forward_layers(rng, np.float32, False))
    X, h0, lengths = _inputs(rng, stack, 1, 20, np.float32)
    expected = _one_by_one(stack.layers, X, h0, lengths)
    reach(monkeypatch, "split")  # the partner off: the forced wavefront posts to a mailbox nobody reads
    y, ho = np.empty_like(expected[0]), np.empty_like(expected[1])
    assert stack.run(1, 20, (X, h0, lengths, NO_ROWS, None, y, ho), path="wave") == ("serial",) * 3
    _assert_bits((y, ho), expected)


def test_the_wavefront_cut_and_when_there_is_none():
    def cut(stack, n, s, limit=float("inf")):
        found = stack.wave_bytes(n, s)  # (cut, the larger part's bytes), or None
        return None if found is None or found[1] > limit else found[0]

    rng = np.random.default_rng(14)
    small, large = _layer(rng, 8, 8), _layer(rng, 8, 64)
    sizes = [op._packed.weights.nbytes for op in (small, large)]
    assert sizes[1] > 3 * sizes[0]
    # the cut balances the parts' packed weights: the large layer alone on one side
    assert cut(fastgru.GRUStack([small, _layer(rng, 8, 8), _layer(rng, 8, 64)]), 1, 5) == 2
    assert cut(fastgru.GRUStack([large, _layer(rng, 64, 8), _layer(rng, 8, 8)]), 1, 5) == 1
    two = fastgru.GRUStack([small, _layer(rng, 8, 8)])
    assert cut(two, 1, 2) == 1
    assert cut(two, 2, 5) is None  # one row only
    assert cut(two, 1, 1) is None  # more than one step
    assert cut(fastgru.GRUStack([small]), 1, 5) is None
    for direction in ("reverse", "bidirectional"):  # every layer forward
        d = 2 if direction == "bidirectional" else 1
        other = fastgru.GRUStack([_layer(rng, 8, 8, direction), _layer(rng, 8 * d, 8)])
        assert cut(other, 1, 5) is None
        with pytest.raises(ValueError, match="cannot run as a wavefront"):
            X = np.zeros((1, 5, 8), np.float32)
            y, ho = (np.empty(shape, np.float32) for shape in other.result_shapes(1, 5))
            other.run(1, 5, (X, np.zeros((1, other.state_size), np.float32), None, NO_ROWS, None, y, ho), path="wave")
    assert cut(two, 1, 5, sizes[0]) == 1  # each part within the limit (one core's L2)
    assert cut(fastgru.GRUStack([small, _layer(rng, 8, 64)]), 1, 5, sizes[0]) is None


def test_the_race_takes_the_faster_way_and_tries_the_other_again_less_often(monkeypatch):
    """_paths.Race on given times (ns): the wavefront first; a trial of three calls of the other way
    after WAVE_RETRY calls, twice as many after each lost trial (up to WAVE_RETRY_MAX), and at once
    when the current way's time grows past 1.25 times the other's; a trial's way taken when the
    median of its times is the lower by 3 %."""
    from fastgru import _paths, _tuning

    monkeypatch.setattr(_tuning, "WAVE_RETRY", 8)
    monkeypatch.setattr(_tuning, "WAVE_RETRY_MAX", 32)
    race, times, ran = _paths.Race(), {True: 100, False: 300}, []

    def calls(count):
        ran.clear()
        for _ in range(count):
            wave = race.wave()
            ran.append(wave)
            race.record(wave, times[wave])
        return ran

    # the jobs' call and two times of the wavefront, then a first trial of the paths (its first call
    # makes its jobs)
    assert calls(6) == [True] * 3 + [False] * 3
    for gap in (16, 32, 32):  # the wavefront faster: each lost trial doubles the gap, up to 32
        assert calls(gap + 3) == [True] * gap + [False] * 3
    assert race.current and race.time(False) == 300
    times[True] = 1000  # the wavefront slower (its partner's core taken, say): two such calls, a trial
    assert calls(5) == [True, True, False, False, False] and not race.current
    times[True] = 50  # and faster again: taken back at its next trial, 8 calls later
    assert calls(8 + 3) == [False] * 8 + [True] * 3 and race.current
    times[True] = 295  # less than 3 % faster: a trial does not change the way
    assert calls(8 + 3) == [True] * 8 + [False] * 3 and race.current
    race.record(True, 10**9)  # nor does one slow call of the current way
    assert race.wave() and race.time(True) == 295


def _raced_stack(monkeypatch, seed):
    """A stack of forward layers that may run as a wavefront, its arrays for ``run`` (one row of 20
    steps) and the layers' bits one by one; the race's retries every 4 calls."""
    from fastgru import _tuning

    rng = np.random.default_rng(seed)
    stack = fastgru.GRUStack(_forward_layers(rng, np.float32, False))
    X, h0, lengths = _inputs(rng, stack, 1, 20, np.float32)
    expected = _one_by_one(stack.layers, X, h0, lengths)
    reach(monkeypatch, "wave")
    monkeypatch.setattr(_tuning, "WAVE_RETRY", 4)
    arrays = (X, h0, lengths, NO_ROWS, None, np.empty_like(expected[0]), np.empty_like(expected[1]))
    return stack, arrays, expected


def test_a_stack_whose_wavefront_is_slow_runs_on_its_layers_paths(monkeypatch):
    if not _partner.PARTNER.enabled:
        pytest.skip("no partner thread here (FASTGRU_SPIN_US=0, or not x86)")
    from fastgru import _paths

    stack, arrays, expected = _raced_stack(monkeypatch, 16)
    wavefront = _paths._wavefront

    tried = []
    # The race's clock (time.perf_counter_ns) is the test's: a call takes 1 µs, the wavefront 5 ms
    # more, whatever the host's speed (a loaded host or an emulator made the layers' paths as slow).
    now = [0]

    def clock():
        now[0] += 1000
        return now[0]

    def slow(*args):  # a wavefront whose partner lost its core for 5 ms
        tried.append(len(ran))
        now[0] += 5_000_000
        return wavefront(*args)

    monkeypatch.setattr(time, "perf_counter_ns", clock)
    monkeypatch.setattr(_paths, "_wavefront", slow)
    ran = []
    with fastgru.threads(2):
        for _ in range(40):
            ran.append(stack.run(1, 20, arrays))
            _assert_bits(arrays[-2:], expected)
    # the wavefront's first three calls, a trial of the paths (calls 3 to 5), which wins; then trials
    # of the wavefront after 4 and 8 calls of the paths, which lose
    assert tried == [0, 1, 2, 10, 11, 12, 21, 22, 23], ran


def test_the_race_leaves_out_calls_that_found_no_second_thread(monkeypatch):
    """A call that finds no second thread (the partner or the budget's thread taken by another call,
    say): the wavefront does not run and its layers' pair paths run on one thread; neither is either
    way's time."""
    if not _partner.PARTNER.enabled:  # no pair paths: the layers' split paths run on two threads
        pytest.skip("no partner thread here (FASTGRU_SPIN_US=0, or not x86)")
    from fastgru import _plan

    stack, arrays, expected = _raced_stack(monkeypatch, 17)
    monkeypatch.setattr(_partner, "take_pair", lambda wanted: (2, 0))  # two threads asked, one had
    race = stack.plans.__dict__.setdefault((1, 20, None, 0, None, False), _plan.Plan(stack, arrays, 1, 20)).race
    with fastgru.threads(2):
        for current in (True, False):  # the wavefront, then the paths, the current way
            race.current = current
            for _ in range(5):
                assert stack.run(1, 20, arrays) == ("serial",) * 3
                _assert_bits(arrays[-2:], expected)
    assert race.runs == {True: 0, False: 0} and race.trial == 0


def test_a_stream_and_a_pool_of_one_row_as_a_wavefront(monkeypatch):
    if not _partner.PARTNER.enabled:
        pytest.skip("no partner thread here (FASTGRU_SPIN_US=0, or not x86)")
    rng = np.random.default_rng(15)
    stack = fastgru.GRUStack(_forward_layers(rng, np.float32, True))
    X, h0, _ = _inputs(rng, stack, 1, 30, np.float32)
    Y, Ho = stack(X, h0, None)
    reach(monkeypatch, "wave")
    with fastgru.threads(2):
        stream = stack.stream(h0)
        chunks = [stream(X[:, t : t + k]) for t, k in ((0, 17), (17, 1), (18, 12))]
        _assert_bits((np.concatenate(chunks, axis=2), stream.Ho), (Y, Ho))
        pool = fastgru.StatePool(stack, capacity=3)
        pool.open(h0[0])
        second = pool.open(h0[0])
        _assert_bits((pool.step(np.array([second]), X), pool.state(second)[None]), (Y, Ho))


def test_16_bit_dtypes_give_the_layers_bits():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    for dtype in (np.float16, ml_dtypes.bfloat16):
        rng = np.random.default_rng(3)
        stack = fastgru.GRUStack(_mixed(rng, dtype))
        X, h0, lengths = _inputs(rng, stack, 4, 5, dtype)
        _assert_bits(stack(X, h0, lengths), _one_by_one(stack.layers, X, h0, lengths))


@pytest.mark.parametrize("lengths", [None, "int32", "zeros"])
def test_lengths_of_every_kind(lengths):
    rng = np.random.default_rng(4)
    stack = fastgru.GRUStack(_mixed(rng, np.float32))
    X, h0, ragged = _inputs(rng, stack, 5, 4, np.float32)
    given = {None: None, "int32": ragged.astype(np.int32), "zeros": np.zeros(5, np.int64)}[lengths]
    expected = _one_by_one(stack.layers, X, h0, given)
    _assert_bits(stack(X, h0, given), expected)
    _assert_bits(stack(X, h0, given), expected)  # the second call takes the checked shape's short way
    if lengths == "zeros":
        assert not expected[0].any() and not expected[1].any()


def test_out_and_no_input_written():
    rng = np.random.default_rng(5)
    stack = fastgru.GRUStack(_mixed(rng, np.float32))
    X, h0, lengths = _inputs(rng, stack, 3, 4, np.float32)
    copies = [a.copy() for a in (X, h0, lengths)]
    expected = _one_by_one(stack.layers, X, h0, lengths)
    out = (np.empty_like(expected[0]), np.empty_like(expected[1]))
    for _ in range(2):
        result = stack(X, h0, lengths, out=out)
        assert result[0] is out[0] and result[1] is out[1]
        _assert_bits(out, expected)
    for a, b in zip((X, h0, lengths), copies):
        np.testing.assert_array_equal(a, b)


def test_states_splits_ho_into_the_layers_states():
    rng = np.random.default_rng(6)
    stack = fastgru.GRUStack(_mixed(rng, np.float32))
    X, h0, lengths = _inputs(rng, stack, 3, 4, np.float32)
    _, Ho = stack(X, h0, lengths)
    states = stack.states(Ho)
    assert [s.shape for s in states] == [(3, 2, 7), (3, 1, 9), (3, 1, 33), (3, 1, 6)]
    n, s = X.shape[:2]
    x = X
    for op, state, at in zip(stack.layers, states, stack._offsets):
        d, h = op.spec.num_directions, op.hidden_size
        y, ho = op(x, h0[:, at : at + d * h].reshape(n, d, h).copy(), lengths)
        np.testing.assert_array_equal(state, ho)
        x = y.transpose(0, 2, 1, 3).reshape(n, s, d * h)
    assert "num_layers=4" in repr(stack) and "state_size=" in repr(stack)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_stream_chunks_equal_one_call(dtype):
    rng = np.random.default_rng(7)
    layers = [_layer(rng, 4, 16, "forward", True, dtype), _layer(rng, 16, 8, "forward", False, dtype, clip=0.9)]
    stack = fastgru.GRUStack(layers)
    X, h0, lengths = _inputs(rng, stack, 3, 9, dtype)
    lengths[:] = [9, 4, 0]
    Y, Ho = stack(X, h0, lengths)
    stream = stack.stream(h0, lengths)
    chunks = [stream(X[:, t : t + k]) for t, k in ((0, 1), (1, 3), (4, 1), (5, 4))]
    _assert_bits((np.concatenate(chunks, axis=2),), (Y,))
    _assert_bits((stream.Ho,), (Ho,))
    assert stream.steps == 9
    frames = stack.stream(h0)  # frame by frame, unbounded: the state of every step carried in one array
    for t in range(9):
        frames(X[:, t : t + 1])
    _assert_bits((frames.Ho,), (stack(X, h0, np.full(3, 9))[1],))


def test_errors_are_the_first_layers():
    rng = np.random.default_rng(8)
    stack = fastgru.GRUStack(_mixed(rng, np.float32))
    first = stack.layers[0]
    X, h0, lengths = _inputs(rng, stack, 3, 4, np.float32)
    h0_first = np.zeros((3, 2, 7), np.float32)
    for bad_x, bad_lengths, error in (
        (X[:, :, :4], lengths, fastgru.FastGRUError),  # input_size
        (X.astype(np.float64), lengths, TypeError),
        (X, np.array([1, 2, 9]), fastgru.FastGRUError),  # a length past S
        (X, np.array([1.0, 2.0, 3.0]), TypeError),
    ):
        with pytest.raises(error) as expected:
            first(bad_x, h0_first, bad_lengths)
        with pytest.raises(error) as raised:
            stack(bad_x, h0, bad_lengths)
        if bad_x.dtype == np.float32:
            assert str(raised.value) == str(expected.value)
        else:  # the op names X against initial_hidden_state, the stack against its layers' weights
            assert "X is float64" in str(raised.value)
    with pytest.raises(fastgru.FastGRUError, match=r"initial_hidden_state has shape \(3, 5\); expected \(3, 62\)"):
        stack(X, h0[:, :5], lengths)
    with pytest.raises(TypeError, match="initial_hidden_state is float64"):
        stack(X, h0.astype(np.float64), lengths)
    with pytest.raises(fastgru.FastGRUError, match="out Ho has shape"):
        stack(X, h0, lengths, out=(np.empty((3, 1, 4, 6), np.float32), np.empty((3, 5), np.float32)))
    with pytest.raises(fastgru.FastGRUError, match="layer 1's input_size is 14; expected 7"):
        fastgru.GRUStack([_layer(rng, 5, 7), _layer(rng, 14, 9)])
    with pytest.raises(TypeError, match="layer 1 is GRUCell"):
        fastgru.GRUStack([_layer(rng, 5, 7), fastgru.GRUCell(np.zeros((21, 7)), np.zeros((21, 7)))])
    with pytest.raises(TypeError, match="layer 1's dtype is float64"):
        fastgru.GRUStack([_layer(rng, 5, 7), _layer(rng, 7, 7, dtype=np.float64)])
    with pytest.raises(fastgru.FastGRUError, match="layers is empty"):
        fastgru.GRUStack([])
    with pytest.raises(fastgru.FastGRUError, match="layer 0's direction is 'bidirectional'"):
        stack.stream(h0)
    after = stack(X, h0, lengths)  # a refused call changed nothing: the next gives the layers' bits
    _assert_bits(after, _one_by_one(stack.layers, X, h0, lengths))


@pytest.mark.parametrize("path", ["serial", "parallel"])
def test_pool_of_stacks_gives_each_stream_its_own_bits(monkeypatch, path):
    rng = np.random.default_rng(9)
    layers = [_layer(rng, 4, 16, "forward", True), _layer(rng, 16, 8, "forward", False, clip=0.9)]
    stack = fastgru.GRUStack(layers)
    pool = fastgru.StatePool(stack, capacity=6)
    assert pool.state_shape == (stack.state_size,)
    starts = rng.standard_normal((3, stack.state_size)).astype(np.float32)
    ids = [pool.open(starts[0]), pool.open(starts[1]), pool.open(starts[2])]
    alone = [stack.stream(starts[k : k + 1]) for k in range(3)]
    reach(monkeypatch, path)
    for rows, lengths in (([2, 0, 1], None), ([1, 2], np.array([2, 1])), ([0, 1, 2], None)):
        X = rng.standard_normal((len(rows), 2, 4)).astype(np.float32)
        Y = pool.step(np.array([ids[r] for r in rows]), X, lengths)
        for k, r in enumerate(rows):
            if lengths is None:
                expected = alone[r](X[k : k + 1])
            else:  # a stream's chunk of fewer steps than X: a stream of that many steps, zeros after
                expected = np.zeros_like(Y[k : k + 1])
                expected[:, :, : lengths[k]] = alone[r](X[k : k + 1, : lengths[k]])
            _assert_bits((Y[k : k + 1],), (expected,))
    for r in range(3):
        _assert_bits((pool.state(ids[r])[None],), (alone[r].Ho,))
    with pytest.raises(fastgru.FastGRUError, match="layer 0 has direction 'bidirectional'"):
        fastgru.StatePool(fastgru.GRUStack(_mixed(rng, np.float32)), 2)


def test_a_graph_of_chained_onnx_gru_nodes_is_a_stack_of_their_ops():
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(10)
    s, n, i, h = 5, 2, 3, 4
    nodes, weights = [], []
    x = "X"
    for k, inputs in enumerate((i, h)):
        for name, shape in (("W", (1, 3 * h, inputs)), ("R", (1, 3 * h, h)), ("B", (1, 6 * h))):
            weights.append(numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), f"{name}{k}"))
        nodes.append(helper.make_node("GRU", [x, f"W{k}", f"R{k}", f"B{k}"], [f"Y{k}"], name=f"gru{k}", hidden_size=h))
        weights.append(numpy_helper.from_array(np.array([1], np.int64), f"axis{k}"))
        nodes.append(helper.make_node("Squeeze", [f"Y{k}", f"axis{k}"], [f"X{k + 1}"]))  # (S, 1, N, H) -> (S, N, H)
        x = f"X{k + 1}"
    graph = helper.make_graph(
        nodes,
        "stack",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [s, n, i])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [s, n, h])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    X = rng.standard_normal((s, n, i)).astype(np.float32)
    (expected,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"X": X}
    )
    stack = fastgru.GRUStack([fastgru.from_onnx(model, name).op for name in ("gru0", "gru1")])
    Y, _ = stack(X.transpose(1, 0, 2), np.zeros((n, stack.state_size), np.float32), None)
    np.testing.assert_allclose(Y[:, 0].transpose(1, 0, 2), expected, rtol=1e-5, atol=1e-6)


def test_threads_calling_one_stack_at_once_get_their_own_bits():
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(11)
    stack = fastgru.GRUStack([_layer(rng, 4, 24, "forward", True), _layer(rng, 24, 12, "forward", False)])
    inputs = [_inputs(rng, stack, 2, 6, np.float32) for _ in range(4)]
    expected = [_one_by_one(stack.layers, *args) for args in inputs]

    def work(k):
        for _ in range(50):
            _assert_bits(stack(*inputs[k]), expected[k])

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(work, range(4)))
