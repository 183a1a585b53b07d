"""The function API's calls of one row and one step (fastgru/_kernels/direct.py): computed from the
caller's W, R and B as they are, with the bits of the prepared ops (which pack the weights first),
for every op, attribute, direction, dtype, sequence length and shape; weights changed in place
between calls are seen; nothing is kept, and nothing of the caller's is written."""

import threading

import numpy as np
import pytest
from conftest import make_case, reach
from partner_control import partner_on_a_clock, spinning_partner, until

import fastgru
from fastgru import _api, _packs, _partner

#: (input_size, hidden_size): tiny, ragged against every geometry's lanes and panels, and more rows
#: of k than the driver packs at a time (K_ROWS), with a ragged last run.
SIZES = [(4, 4), (17, 33), (0, 20), (257, 129)]


def prepared_result(op, inputs, attrs):
    """The prepared op's answer: packed weights, the other drivers."""
    if op == "gru_cell":
        cell = fastgru.GRUCell(inputs["W"], inputs["R"], inputs.get("B"), **attrs)
        return cell(inputs["X"], inputs["initial_hidden_state"])
    if op == "augru_sequence":
        augru = fastgru.AUGRUSequence(inputs["W"], inputs["R"], inputs["B"])
        return augru(inputs["X"], inputs["initial_hidden_state"], inputs["sequence_lengths"], inputs["A"])
    seq = fastgru.GRUSequence(inputs["W"], inputs["R"], inputs["B"], **attrs)
    return seq(inputs["X"], inputs["initial_hidden_state"], inputs["sequence_lengths"])


def function_result(op, inputs, attrs):
    return getattr(fastgru, op)(**inputs, **attrs)


def calls_of(monkeypatch, module, name, count=None):
    """A list (``count``, or a new one) that grows by one at each call of ``module.name`` (which still runs)."""
    count = [] if count is None else count
    original = getattr(module, name)

    def counted(*args):
        count.append(1)
        return original(*args)

    monkeypatch.setattr(module, name, counted)
    return count


@pytest.fixture
def direct_calls(kernels_run):
    """The kernel calls that ran the direct driver, on the calling thread or shared with the partner."""

    class Direct:
        def __len__(self):
            return sum(name.startswith("run_direct") for name in kernels_run)

    return Direct()


@pytest.fixture
def full_checks(monkeypatch):
    """How many function calls ran the full checks (``_api.validate``); no short path kept before."""
    monkeypatch.setattr(_api, "_seen", threading.local())
    return calls_of(monkeypatch, _api, "validate")


def assert_same_bits(got, want):
    for a, b in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a.view(f"u{a.itemsize}"), b.view(f"u{b.itemsize}"))


CASES = [
    ("gru_cell", {}),
    ("gru_cell", {"linear_before_reset": True, "clip": 0.5}),
    ("gru_cell", {"with_bias": False, "activations": ["tanh", "relu"]}),
    ("gru_cell", {"activations": ["relu", "sigmoid"], "clip": 2.0}),
    ("gru_sequence", {"direction": "forward"}),
    ("gru_sequence", {"direction": "reverse", "linear_before_reset": True}),
    ("gru_sequence", {"direction": "bidirectional", "clip": 1.0}),
    ("gru_sequence", {"direction": "bidirectional", "linear_before_reset": True, "lengths": [0]}),
    ("gru_sequence", {"direction": "forward", "lengths": [0], "lengths_dtype": np.int32}),
    ("augru_sequence", {}),
    ("augru_sequence", {"layout": "openvino"}),
    ("augru_sequence", {"lengths": [0]}),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("size", SIZES, ids=[f"i{i}h{h}" for i, h in SIZES])
@pytest.mark.parametrize("op, options", CASES)
def test_one_row_one_step_has_the_prepared_ops_bits(rng, direct_calls, op, options, size, dtype):
    options = dict(options)
    case = make_case(rng, op=op, batch=1, seq_len=1, input_size=size[0], hidden_size=size[1], dtype=dtype, **options)
    before = {name: a.copy() for name, a in case.inputs.items()}
    got = function_result(op, case.inputs, case.attrs)
    assert direct_calls
    assert_same_bits(got, prepared_result(op, case.inputs, case.attrs))
    for name, a in case.inputs.items():
        np.testing.assert_array_equal(a, before[name])  # only read


#: The calls of one direction, which the partner thread can share.
ONE_DIRECTION = [(op, options) for op, options in CASES if options.get("direction") != "bidirectional"]
needs_partner = pytest.mark.skipif(not _partner.PARTNER.enabled, reason="the partner thread is off")


@needs_partner
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("size", SIZES, ids=[f"i{i}h{h}" for i, h in SIZES])
@pytest.mark.parametrize("op, options", ONE_DIRECTION)
def test_a_call_shared_with_the_partner_has_the_prepared_ops_bits(
    rng, monkeypatch, kernels_run, op, options, size, dtype
):
    reach(monkeypatch, "pair")  # every one-direction call shared, the partner woken
    case = make_case(rng, op=op, batch=1, seq_len=1, input_size=size[0], hidden_size=size[1], dtype=dtype, **options)
    before = {name: a.copy() for name, a in case.inputs.items()}
    got = function_result(op, case.inputs, case.attrs)
    assert [name.rstrip("+") for name in kernels_run] == ["run_direct_pair"]
    assert_same_bits(got, prepared_result(op, case.inputs, case.attrs))
    for name, a in case.inputs.items():
        np.testing.assert_array_equal(a, before[name])  # only read


@needs_partner
def test_the_partner_takes_its_half_of_a_shared_call(rng, monkeypatch, kernels_run):
    """The partner thread really takes its half: awake and spinning (``spinning_partner``), it takes
    a call's as soon as its thread runs, whatever the time between calls; called until it has."""
    reach(monkeypatch, "pair")
    case = one_row(rng, "gru_cell", {"linear_before_reset": True}, size=(257, 129))
    want = prepared_result("gru_cell", case.inputs, case.attrs)

    def call():
        kernels_run.clear()
        assert_same_bits(fastgru.gru_cell(**case.inputs, **case.attrs), want)
        assert [name.rstrip("+") for name in kernels_run] == ["run_direct_pair"]

    with spinning_partner():
        until(lambda: kernels_run == ["run_direct_pair+"], call, "the partner taking its half")


def test_by_default_a_large_call_of_one_direction_is_shared(rng, kernels_run):
    """With the default tuning a 256-unit call of one direction takes the shared driver whenever it
    takes the partner: from the third call of a burst on, the partner asleep before (the second
    wakes it); calls further apart than FASTGRU_SPIN_US run alone and leave it asleep; a call of
    two directions runs alone. The partner's state is the calls' and a clock's, not the host's
    speed (``partner_on_a_clock``: under emulation the calls of a burst were once further apart
    than the partner's 1 ms spin, and the last call ran alone)."""
    case = one_row(rng, "gru_cell", {}, size=(256, 256))
    if not _partner.PARTNER.enabled:
        for _ in range(3):
            fastgru.gru_cell(**case.inputs)
        assert kernels_run == ["run_direct"] * 3
        return
    with partner_on_a_clock() as (partner, clock):
        for _ in range(3):  # spaced: each alone, none wakes the partner
            clock.advance(2 * _partner.SPIN_US * 1e-6)
            fastgru.gru_cell(**case.inputs)
        assert kernels_run == ["run_direct"] * 3 and partner.asleep
        kernels_run.clear()
        clock.advance(2 * _partner.SPIN_US * 1e-6)
        for _ in range(5):  # a burst: the second call wakes the partner, the third takes it
            fastgru.gru_cell(**case.inputs)
        assert [name.rstrip("+") for name in kernels_run] == ["run_direct"] * 2 + ["run_direct_pair"] * 3
        kernels_run.clear()
        case = one_row(rng, "gru_sequence", {"direction": "bidirectional"}, size=(256, 256))
        fastgru.gru_sequence(**case.inputs, **case.attrs)
        assert kernels_run == ["run_direct"]  # two directions: on the calling thread, the partner awake


def test_weights_changed_in_place_between_calls_are_seen(rng, direct_calls):
    case = make_case(rng, op="gru_cell", batch=1, input_size=40, hidden_size=36)
    inputs = dict(case.inputs)
    kept = list(_packs._kept)
    first = fastgru.gru_cell(**inputs)
    for name, where in (("W", (5, 39)), ("R", (107, 0)), ("B", (70,))):
        inputs[name][where] += np.float32(0.25)  # in place: the same array, other values
        got = fastgru.gru_cell(**inputs)
        assert_same_bits(got, prepared_result("gru_cell", inputs, {}))
        assert not np.array_equal(got, first)
        first = got
    inputs["W"][0, 0] = np.nan
    assert np.isnan(fastgru.gru_cell(**inputs)).any()
    assert len(direct_calls) == 5
    assert list(_packs._kept) == kept  # nothing packed or kept


def test_larger_calls_still_pack(rng, direct_calls):
    case = make_case(rng, op="gru_sequence", batch=1, seq_len=2)
    fastgru.gru_sequence(**case.inputs, **case.attrs)
    case = make_case(rng, op="gru_cell", batch=2)
    fastgru.gru_cell(**case.inputs, **case.attrs)
    assert not direct_calls


def test_non_contiguous_weights_are_read_as_their_values(rng):
    case = make_case(rng, op="gru_cell", batch=1, input_size=20, hidden_size=24)
    inputs = dict(case.inputs)
    want = fastgru.gru_cell(**inputs)
    inputs["W"] = np.asfortranarray(inputs["W"])
    inputs["R"] = np.concatenate([inputs["R"], inputs["R"]], axis=1)[:, :24]  # strided rows
    assert_same_bits(fastgru.gru_cell(**inputs), want)


def one_row(rng, op, options, dtype=np.float32, size=(17, 33)):
    """A call of one row and one step: new arrays and values at each call, the same shapes."""
    return make_case(rng, op=op, batch=1, seq_len=1, input_size=size[0], hidden_size=size[1], dtype=dtype, **options)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op, options", CASES)
def test_repeated_calls_take_the_short_path_with_the_same_bits(rng, full_checks, direct_calls, op, options, dtype):
    case = one_row(rng, op, options, dtype)
    assert_same_bits(function_result(op, case.inputs, case.attrs), prepared_result(op, case.inputs, case.attrs))
    for _ in range(3):
        case = one_row(rng, op, options, dtype)
        before = {name: a.copy() for name, a in case.inputs.items()}
        got = function_result(op, case.inputs, case.attrs)
        assert_same_bits(got, prepared_result(op, case.inputs, case.attrs))
        for name, a in case.inputs.items():
            np.testing.assert_array_equal(a, before[name])  # only read
    assert len(full_checks) == 1  # the first call's
    assert len(direct_calls) == 4


def _bad(name, value):
    def change(inputs, attrs):
        if name in inputs:
            inputs[name] = value(inputs[name]) if callable(value) else value
        else:
            attrs[name] = value

    return change


#: Calls that differ from a short path's in one input or attribute, and that the full checks refuse.
REFUSED = [
    ("gru_cell", {}, _bad("initial_hidden_state", lambda h: h[:, :-1])),
    ("gru_cell", {}, _bad("X", lambda x: x.astype(np.float64))),
    ("gru_cell", {}, _bad("B", lambda b: b[:-1])),
    ("gru_cell", {"clip": 1}, _bad("clip", True)),
    ("gru_cell", {"activations_alpha": [1.0]}, _bad("activations_alpha", [True])),
    ("gru_cell", {"call_attrs": {"hidden_size": 33}}, _bad("hidden_size", 33.0)),
    ("gru_cell", {}, _bad("linear_before_reset", 2)),
    ("gru_sequence", {"lengths": [1]}, _bad("sequence_lengths", np.array([2]))),
    ("gru_sequence", {"lengths": [1]}, _bad("sequence_lengths", np.array([-1], np.int32))),
    ("gru_sequence", {"lengths": [1]}, _bad("sequence_lengths", np.array([1.0]))),
    ("gru_sequence", {"direction": "bidirectional"}, _bad("initial_hidden_state", lambda h: h[:, :1])),
    ("augru_sequence", {}, _bad("A", lambda a: a[:, :, 0])),
    ("augru_sequence", {}, _bad("A", lambda a: a.astype(np.float64))),
]


@pytest.mark.parametrize("op, options, change", REFUSED)
def test_calls_unlike_the_short_paths_get_the_full_checks_errors(rng, full_checks, op, options, change):
    options = dict(options)
    call_attrs = options.pop("call_attrs", {})  # attributes make_case does not take

    def call(refuse):
        case = one_row(rng, op, options)
        inputs, attrs = dict(case.inputs), {**case.attrs, **call_attrs}
        if not refuse:
            return function_result(op, inputs, attrs)
        change(inputs, attrs)
        with pytest.raises((TypeError, ValueError)) as error:
            function_result(op, inputs, attrs)
        return error.type, str(error.value)

    want = call(refuse=True)  # no short path yet: the full checks
    call(refuse=False)  # leaves one
    assert call(refuse=True) == want
    assert len(full_checks) == 3


#: Arrays that the kernels do not take as they are: the full path converts them.
CONVERTED = [
    ("W", lambda w: np.asfortranarray(w)),
    ("R", lambda r: np.concatenate([r, r], axis=1)[:, : r.shape[1]]),
    ("B", lambda b: _read_only(b)),
    ("X", lambda x: x.view(_Subclass)),
    ("initial_hidden_state", lambda h: h.astype(">f4")),
]


class _Subclass(np.ndarray):
    pass


def _read_only(a):
    a = a.copy()
    a.flags.writeable = False
    return a


@pytest.mark.parametrize("name, convert", CONVERTED, ids=[name for name, _ in CONVERTED])
def test_arrays_unlike_the_short_paths_are_converted_as_before(rng, full_checks, name, convert):
    case = one_row(rng, "gru_cell", {})
    fastgru.gru_cell(**case.inputs)  # leaves a short path
    inputs = dict(case.inputs)
    inputs[name] = convert(inputs[name])
    assert_same_bits(fastgru.gru_cell(**inputs), fastgru.gru_cell(**case.inputs))
    # the first call's and the converted one's; an ndarray subclass's data is what the kernels read
    # of an ndarray (the entry takes it as one), and the full path's view of it: no conversion
    assert len(full_checks) == (1 if name == "X" else 2)


def test_a_sequence_length_of_another_integer_type_is_read_as_its_value(rng, full_checks):
    case = one_row(rng, "gru_sequence", {"lengths": [1]})
    want = fastgru.gru_sequence(**case.inputs)
    for lengths in (np.array([1], np.int32), np.array([1], np.int16), [1]):
        assert_same_bits(fastgru.gru_sequence(**{**case.inputs, "sequence_lengths": lengths}), want)
    # the first call; int32, which its plan (of int64 lengths) does not take: the full checks, and a
    # plan of int32 lengths; int16 and the list, which no plan takes
    assert len(full_checks) == 4
    assert_same_bits(fastgru.gru_sequence(**{**case.inputs, "sequence_lengths": np.array([1], np.int32)}), want)
    assert len(full_checks) == 4
