"""The function API's calls of one row and one step (fastgru/_kernels/direct.py): computed from the
caller's W, R and B as they are, with the bits of the prepared ops (which pack the weights first),
for every op, attribute, direction, dtype, sequence length and shape; weights changed in place
between calls are seen; nothing is kept, and nothing of the caller's is written."""

import numpy as np
import pytest
from conftest import make_case

import fastgru
from fastgru import _dispatch, _packs

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


@pytest.fixture
def direct_calls(monkeypatch):
    """How many kernel calls ran the direct driver."""
    count = []
    original = _dispatch.run_direct

    def counted(*args):
        count.append(1)
        return original(*args)

    monkeypatch.setattr(_dispatch, "run_direct", counted)
    return count


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
