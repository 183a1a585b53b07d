"""The short path of repeated calls (fastgru/_plan.py, fastgru/_packs.py): a prepared op's call of a
shape seen before goes straight to the kernel, and the function API keeps packed weights while the
caller's weights are unchanged. Each gives the bits of the full path; anything that does not match
gets the full checks and their messages; no caller's array is written by a refused call."""

import threading

import numba
import numpy as np
import pytest
from conftest import make_case
from partner_control import spinning_partner, until

import fastgru
from fastgru import _packs, _partner, _plan, _tuning
from fastgru._validate import FastGRUError


def prepared(case, op):
    """The prepared op of ``case`` and a function calling it on the case's per-call inputs."""
    inputs = case.inputs
    if op == "gru_cell":
        cell = fastgru.GRUCell(inputs["W"], inputs["R"], inputs.get("B"), **case.attrs)
        return cell, lambda **kw: cell(inputs["X"], inputs["initial_hidden_state"], **kw)
    if op == "augru_sequence":
        augru = fastgru.AUGRUSequence(inputs["W"], inputs["R"], inputs["B"])
        args = (inputs["X"], inputs["initial_hidden_state"], inputs["sequence_lengths"], inputs["A"])
        return augru, lambda **kw: augru(*args, **kw)
    seq = fastgru.GRUSequence(inputs["W"], inputs["R"], inputs["B"], **case.attrs)
    args = (inputs["X"], inputs["initial_hidden_state"], inputs["sequence_lengths"])
    return seq, lambda **kw: seq(*args, **kw)


@pytest.fixture
def plans_run(monkeypatch):
    """A True for each call a plan answered without checks (the rest took the full path)."""
    count = []
    original = _plan.Plan.__call__

    def counted(self, *args):
        results = original(self, *args)
        if results is not None:
            count.append(True)
        return results

    monkeypatch.setattr(_plan.Plan, "__call__", counted)
    return count


def empty_outs(results):
    return tuple(np.full_like(r, np.nan) for r in (results if isinstance(results, tuple) else (results,)))


CASES = [
    ("gru_cell", {}),
    ("gru_cell", {"linear_before_reset": True, "clip": 0.5}),
    ("gru_sequence", {"direction": "forward"}),
    ("gru_sequence", {"direction": "reverse", "lengths_dtype": np.int32}),
    ("gru_sequence", {"direction": "bidirectional", "linear_before_reset": True}),
    ("augru_sequence", {}),
    ("augru_sequence", {"layout": "openvino", "lengths_dtype": np.int32}),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op, extra", CASES)
def test_a_planned_call_gives_the_bits_of_the_full_path(op, extra, dtype, rng, plans_run):
    case = make_case(rng, op=op, batch=3, dtype=dtype, **extra)
    _, call = prepared(case, op)
    first = call()  # the full path; it leaves a plan
    assert plans_run == []
    second, again = call(), call()
    outs = empty_outs(first)
    into = call(out=outs[0] if op == "gru_cell" else outs)
    assert plans_run == [True, True, True]
    for got in (second, again, into):
        for a, b in zip(got if isinstance(got, tuple) else (got,), first if isinstance(first, tuple) else (first,)):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("ragged_first", [False, True])
def test_a_sequence_without_lengths_takes_its_plan(rng, plans_run, ragged_first):
    """sequence_lengths=None (every step) runs the plan, and never the lengths of an earlier call."""
    case = make_case(rng, op="gru_sequence", batch=3, dtype=np.float32)
    seq, _ = prepared(case, "gru_sequence")
    X, h0 = case.inputs["X"], case.inputs["initial_hidden_state"]
    full = seq(X, h0, np.full(3, X.shape[1]))
    if ragged_first:  # the plan's kept lengths hold these afterwards
        seq(X, h0, np.array([1, 0, 2]))
        seq(X, h0, np.array([1, 0, 2]))
    for got in (seq(X, h0, None), seq(X, h0, None)):
        for a, b in zip(got, full):
            np.testing.assert_array_equal(a, b)
    assert plans_run[-2:] == [True, True]


def test_a_cell_stepped_in_place_matches_calls_with_new_arrays(rng, plans_run):
    case = make_case(rng, op="gru_cell", batch=1, input_size=4, hidden_size=4)
    cell, _ = prepared(case, "gru_cell")
    h = case.inputs["initial_hidden_state"].copy()
    want = h.copy()
    for x in rng.standard_normal((5, 1, 4)).astype(np.float32):
        cell(x, h, out=h)
        want = cell(x.copy(), want.copy())
    np.testing.assert_array_equal(h, want)
    assert len(plans_run) >= 5


def test_calls_that_share_work_have_a_plan_too(rng, monkeypatch, plans_run, kernels_run):
    monkeypatch.setattr(_tuning, "SERIAL_BELOW_FLOPS", 0)
    case = make_case(rng, op="gru_sequence", batch=4, seq_len=6)
    _, call = prepared(case, "gru_sequence")
    first, again = call(), call()
    assert plans_run == [True]  # the parallel driver's job, by the plan
    assert kernels_run[-1] == "run_parallel" or fastgru.get_num_threads() == 1
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)


@pytest.mark.skipif(not _partner.PARTNER.enabled, reason=f"no partner thread ({_partner.off_reason()})")
@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="Numba has a single thread here")
def test_a_row_shared_with_the_partner_is_planned(rng, monkeypatch, plans_run, kernels_run):
    """A one-row call on the pair path takes its plan: the pair driver's job when the partner and a
    second thread come, else the serial one, with the bits of one thread; the full path again when
    the partner is off."""
    h = 256
    cell = fastgru.GRUCell(*(rng.uniform(-0.06, 0.06, (3 * h, h)).astype(np.float32) for _ in range(2)))
    x, state = rng.standard_normal((1, h)).astype(np.float32), rng.standard_normal((1, h)).astype(np.float32)
    with fastgru.threads(1):
        want = cell(x, state)  # the full path; it leaves the plan
    np.testing.assert_array_equal(cell(x, state), want)  # the plan's first call compiles (or loads) its kernels
    with spinning_partner():  # the partner awake, whatever the time between calls: it takes a half when its thread runs
        np.testing.assert_array_equal(cell(x, state), want)  # a plan of this partner's
        kernels_run.clear()
        plans_run.clear()
        until(
            lambda: "run_pair+" in kernels_run,
            lambda: np.testing.assert_array_equal(cell(x, state), want),
            "the partner taking a planned call's half",
        )
    assert plans_run == [True] * len(kernels_run)  # every call by the plan
    assert set(kernels_run) <= {"run_serial", "run_pair", "run_pair+"} and "run_pair+" in kernels_run
    monkeypatch.setattr(_partner.PARTNER, "enabled", False)
    answered = len(plans_run)
    np.testing.assert_array_equal(cell(x, state), want)
    assert len(plans_run) == answered and kernels_run[-1] == "run_serial"  # the full path, serial


def test_a_change_of_the_tuning_table_remakes_the_plans(rng, monkeypatch, kernels_run):
    case = make_case(rng, op="gru_sequence", batch=4, seq_len=6)
    _, call = prepared(case, "gru_sequence")
    call(), call()
    assert kernels_run == ["run_serial", "run_serial"]  # the second by run_planned
    monkeypatch.setattr(_tuning, "SERIAL_BELOW_FLOPS", 0)
    call()
    assert kernels_run[-1] in ("run_parallel", "run_serial") and len(kernels_run) == 3


# ------------------------------------------------------------------------------- what a plan refuses


def planned_sequence(rng, **kw):
    case = make_case(rng, op="gru_sequence", batch=3, seq_len=5, **kw)
    op, call = prepared(case, "gru_sequence")
    call(), call()  # the second takes the plan the first left
    return case, op


@pytest.mark.parametrize("bad", [-1, 6])
def test_a_length_out_of_range_gets_the_full_message_and_writes_nothing(bad, rng, plans_run):
    case, op = planned_sequence(rng)
    inputs = case.inputs
    lengths = inputs["sequence_lengths"].copy()
    lengths[1] = bad
    Y, Ho = np.full((3, 1, 5, 6), 7.0, np.float32), np.full((3, 1, 6), 7.0, np.float32)
    with pytest.raises(FastGRUError, match=rf"GRUSequence: sequence_lengths\[1\] is {bad}; expected 0 <="):
        op(inputs["X"], inputs["initial_hidden_state"], lengths, out=(Y, Ho))
    assert (Y == 7).all() and (Ho == 7).all()


def test_inputs_of_another_layout_or_type_get_the_full_path(rng):
    case, op = planned_sequence(rng)
    X, h0, lengths = case.inputs["X"], case.inputs["initial_hidden_state"], case.inputs["sequence_lengths"]
    want = op(X, h0, lengths)
    readonly = X.copy()
    readonly.flags.writeable = False
    for args in (
        (np.asfortranarray(X), h0, lengths),
        (readonly, h0, lengths),
        (X, h0, lengths.astype(np.int16)),
        (X, h0, lengths.tolist()),
    ):
        for a, b in zip(op(*args), want):
            np.testing.assert_array_equal(a, b)


def test_inputs_of_another_shape_or_dtype_get_the_full_messages(rng):
    case, op = planned_sequence(rng)
    X, h0, lengths = case.inputs["X"], case.inputs["initial_hidden_state"], case.inputs["sequence_lengths"]
    with pytest.raises(TypeError, match="GRUSequence: X is float64"):
        op(X.astype(np.float64), h0, lengths)
    with pytest.raises(FastGRUError, match="GRUSequence: X has shape"):
        op(np.ascontiguousarray(X[:, :, :3]), h0, lengths)
    with pytest.raises(FastGRUError, match="initial_hidden_state"):
        op(X, np.ascontiguousarray(h0[:2]), lengths)


def test_outputs_that_do_not_match_get_the_full_messages(rng):
    case, op = planned_sequence(rng)
    X, h0, lengths = case.inputs["X"], case.inputs["initial_hidden_state"], case.inputs["sequence_lengths"]
    Y, Ho = np.empty((3, 1, 5, 6), np.float32), np.empty((3, 1, 6), np.float32)
    op(X, h0, lengths, out=(Y, Ho))
    with pytest.raises(FastGRUError, match=r"GRUSequence: out Y has shape \(3, 1, 4, 6\)"):
        op(X, h0, lengths, out=(np.empty((3, 1, 4, 6), np.float32), Ho))
    with pytest.raises(TypeError, match="GRUSequence: out Ho is float64"):
        op(X, h0, lengths, out=(Y, np.empty((3, 1, 6))))
    with pytest.raises(FastGRUError, match="GRUSequence: out is ndarray; expected a tuple"):
        op(X, h0, lengths, out=Y)
    with pytest.raises(FastGRUError, match="GRUSequence: out Y must be a writeable C-contiguous array"):
        op(X, h0, lengths, out=(np.empty((6, 5, 1, 3), np.float32).T, Ho))


def test_a_cell_refuses_a_tuple_out_with_the_full_message(rng):
    case = make_case(rng, op="gru_cell", batch=2)
    cell, call = prepared(case, "gru_cell")
    call(), call(), call()
    with pytest.raises(FastGRUError, match="GRUCell: out Ho is tuple; expected an ndarray"):
        call(out=(np.empty((2, 6), np.float32),))


def test_each_thread_has_its_own_plans(rng):
    case = make_case(rng, op="gru_sequence", batch=2, seq_len=4)
    op, call = prepared(case, "gru_sequence")
    want = call()
    errors = []

    def work():
        try:
            for _ in range(200):
                for a, b in zip(call(), want):
                    np.testing.assert_array_equal(a, b)
        except AssertionError as exc:  # pragma: no cover
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


# ------------------------------------------------------------------------------------ the function API


def test_the_function_api_reuses_packed_weights_only_while_they_are_unchanged(rng, monkeypatch):
    # batch 2: a call of one row and one step packs nothing (test_direct.py)
    case = make_case(rng, op="gru_cell", batch=2, input_size=8, hidden_size=8)
    inputs = dict(case.inputs)
    made = []
    original = _packs.Packed

    def counting(*args):
        made.append(1)
        return original(*args)

    monkeypatch.setattr(_packs, "Packed", counting)
    first = fastgru.gru_cell(**inputs)
    np.testing.assert_array_equal(fastgru.gru_cell(**inputs), first)
    assert len(made) == 1
    for name in ("W", "R", "B"):
        inputs[name][0, ...] += 0.25  # in place: the same array, other bits
        got = fastgru.gru_cell(**inputs)
        want = fastgru.GRUCell(inputs["W"], inputs["R"], inputs["B"])(inputs["X"], inputs["initial_hidden_state"])
        np.testing.assert_array_equal(got, want)
        assert not np.array_equal(got, first)
        first = got
    assert len(made) == 4
    inputs["W"][0, 0] = np.nan  # a NaN equals itself bit for bit: kept, and the result says NaN
    nan = fastgru.gru_cell(**inputs)
    assert np.isnan(nan).any()
    np.testing.assert_array_equal(fastgru.gru_cell(**inputs), nan)
    assert len(made) == 5


@pytest.mark.parametrize("form", ["fortran", "float16"])
def test_the_function_api_keeps_weights_it_converts_and_sees_them_change(rng, form):
    """Weights the kernels cannot read as they are (converted at each call) are kept too, compared
    after the conversion: a change in place still reaches the result."""
    case = make_case(rng, op="gru_cell", batch=2, input_size=8, hidden_size=8)
    dtype = np.float16 if form == "float16" else np.float32
    inputs = {name: np.asarray(a, dtype) for name, a in case.inputs.items()}
    if form == "fortran":
        inputs["W"], inputs["R"] = np.asfortranarray(inputs["W"]), np.asfortranarray(inputs["R"])
    first = fastgru.gru_cell(**inputs)
    np.testing.assert_array_equal(fastgru.gru_cell(**inputs), first)
    inputs["R"][1, 2] += dtype(0.5)
    got = fastgru.gru_cell(**inputs)
    want = fastgru.GRUCell(inputs["W"], inputs["R"], inputs["B"])(inputs["X"], inputs["initial_hidden_state"])
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(got, first)


def test_the_function_api_keeps_a_bounded_number_of_weight_sets(rng):
    for _ in range(_packs.KEEP + 3):
        case = make_case(rng, op="gru_sequence", batch=1, seq_len=2)
        fastgru.gru_sequence(**case.inputs, **case.attrs)
    assert len(_packs._kept) <= _packs.KEEP
    assert _packs._bytes() <= _packs.KEEP_BYTES


# ------------------------------------------------------------------------------- pools and streams


def test_a_pool_step_like_a_checked_one_still_refuses_what_is_wrong(rng):
    case = make_case(rng, op="gru_sequence", batch=2, seq_len=3)
    op, _ = prepared(case, "gru_sequence")
    pool = fastgru.StatePool(op, capacity=4)
    a, b = pool.open(), pool.open()
    X = case.inputs["X"]
    ids = np.array([a, b])
    first = pool.step(ids, X, np.array([3, 1]))
    states = [pool.state(a), pool.state(b)]
    where = "GRUSequence pool.step"
    with pytest.raises(FastGRUError, match=r"GRUSequence: sequence_lengths\[0\] is 4"):
        pool.step(ids, X, np.array([4, 1]))
    with pytest.raises(FastGRUError, match=rf"{where}: ids"):
        pool.step(np.array([a, 7]), X)
    pool.close(b)
    with pytest.raises(FastGRUError, match=rf"{where}: ids\[1\] is 1, which is not open"):
        pool.step(ids, X)
    with pytest.raises(TypeError, match="X is float64"):
        pool.step(np.array([a, a + 2]), X.astype(np.float64))
    with pytest.raises(FastGRUError, match=rf"{where}: out has shape"):
        pool.step(np.array([a]), X[:1].copy(), out=np.empty((1, 1, 2, 6), np.float32))
    np.testing.assert_array_equal(pool.state(a), states[0])  # refused steps changed nothing
    assert first.shape == (2, 1, 3, 6)


def test_a_stream_chunk_like_a_checked_one_still_refuses_what_is_wrong(rng):
    case = make_case(rng, op="augru_sequence", batch=2, seq_len=4)
    op, _ = prepared(case, "augru_sequence")
    stream = op.stream(case.inputs["initial_hidden_state"])
    X, A = case.inputs["X"], case.inputs["A"]
    stream(X, A)
    with pytest.raises(TypeError, match="A is float64"):
        stream(X, A.astype(np.float64))
    with pytest.raises(FastGRUError, match="AUGRUSequence stream: A is missing"):
        stream(X)
    with pytest.raises(FastGRUError, match="A has shape"):
        stream(X, A[:, :3])
    assert stream.steps == 4


def test_a_stack_call_like_a_checked_one_takes_its_plan_and_still_refuses_what_is_wrong(rng, plans_run):
    ops = [fastgru.GRUSequence(*(rng.uniform(-0.5, 0.5, s).astype(np.float32) for s in shapes), hidden_size=6)
        for shapes in (((1, 18, 4), (1, 18, 6), (1, 18)), ((1, 18, 6), (1, 18, 6), (1, 18)))]  # fmt: skip
    stack = fastgru.GRUStack(ops)
    X, h0 = rng.standard_normal((3, 5, 4)).astype(np.float32), rng.standard_normal((3, 12)).astype(np.float32)
    lengths = np.array([5, 2, 0], np.int32)
    want = stack(X, h0, lengths)
    Y, Ho = np.full((3, 1, 5, 6), np.nan, np.float32), np.full((3, 12), np.nan, np.float32)
    stack(X, h0, lengths, out=(Y, Ho))  # out: a call shape of its own, checked once
    before = len(plans_run)
    got = stack(X, h0, lengths, out=(Y, Ho))
    assert len(plans_run) == before + 1 and got[0] is Y and got[1] is Ho
    for a, b in zip((Y, Ho), want):
        np.testing.assert_array_equal(a, b)
    Y[:], Ho[:] = 7, 7
    with pytest.raises(FastGRUError, match=r"sequence_lengths\[1\] is 6"):
        stack(X, h0, np.array([5, 6, 0], np.int32), out=(Y, Ho))
    with pytest.raises(FastGRUError, match="GRUStack: initial_hidden_state has shape"):
        stack(X, np.ascontiguousarray(h0[:, :6]), lengths, out=(Y, Ho))
    with pytest.raises(TypeError, match="out Ho is float64"):
        stack(X, h0, lengths, out=(Y, np.empty((3, 12))))
    with pytest.raises(TypeError, match="X is float64"):
        stack(X.astype(np.float64), h0, lengths, out=(Y, Ho))
    assert (Y == 7).all() and (Ho == 7).all()  # refused calls wrote nothing
    for a, b in zip(stack(X, h0, lengths.tolist()), want):  # a list: the full path, the same bits
        np.testing.assert_array_equal(a, b)
