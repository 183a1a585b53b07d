"""Every error of the error contract (docs/semantics.md): the exception class, and a message naming
the op, the input or attribute, what was expected and what came."""

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastgru
from fastgru import FastGRUError

N, S, I, H = 2, 5, 32, 32
f32 = np.float32


def _sequence(**change):
    inputs = {
        "X": np.zeros((N, S, I), f32),
        "initial_hidden_state": np.zeros((N, 1, H), f32),
        "sequence_lengths": np.array([S, 3]),
        "W": np.zeros((1, 3 * H, I), f32),
        "R": np.zeros((1, 3 * H, H), f32),
        "B": np.zeros((1, 3 * H), f32),
    }
    attrs = {k: change.pop(k) for k in list(change) if k not in inputs}
    inputs.update(change)
    return lambda: fastgru.gru_sequence(*inputs.values(), **attrs)


def _cell(**change):
    inputs = {
        "X": np.zeros((N, I), f32),
        "initial_hidden_state": np.zeros((N, H), f32),
        "W": np.zeros((3 * H, I), f32),
        "R": np.zeros((3 * H, H), f32),
        "B": np.zeros(3 * H, f32),
    }
    attrs = {k: change.pop(k) for k in list(change) if k not in inputs}
    inputs.update(change)
    return lambda: fastgru.gru_cell(*inputs.values(), **attrs)


def _augru(ov_layout=False, **change):
    d = (1,) if ov_layout else ()
    inputs = {
        "X": np.zeros((N, S, I), f32),
        "initial_hidden_state": np.zeros((N, *d, H), f32),
        "sequence_lengths": np.array([S, 3]),
        "W": np.zeros((*d, 3 * H, I), f32),
        "R": np.zeros((*d, 3 * H, H), f32),
        "B": np.zeros((*d, 3 * H), f32),
        "A": np.zeros((N, S, 1), f32),
    }
    attrs = {k: change.pop(k) for k in list(change) if k not in inputs}
    inputs.update(change)
    return lambda: fastgru.augru_sequence(*inputs.values(), **attrs)


def _raises(call, exc, *fragments):
    with pytest.raises(exc) as info:
        call()
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return message


def test_fastgru_error_is_a_value_error():
    assert issubclass(FastGRUError, ValueError)


def test_valid_baselines_do_not_raise():
    _sequence()()
    _cell()()
    _augru()()
    _augru(ov_layout=True)()


# ------------------------------------------------------------------------------------- attributes


@pytest.mark.parametrize("value", [0, -3, 2.5, True, "32", np.float32(32)])
def test_hidden_size_must_be_a_positive_integer(value):
    _raises(
        _sequence(hidden_size=value),
        FastGRUError,
        "gru_sequence: hidden_size is",
        repr(value)[:6],
        "expected a positive integer",
    )


def test_hidden_size_accepts_numpy_integers():
    _sequence(hidden_size=np.int64(H))()


@pytest.mark.parametrize("op, factory", [("gru_sequence", _sequence), ("gru_cell", _cell)])
def test_hidden_size_must_agree_with_R(op, factory):
    _raises(
        factory(hidden_size=16),
        FastGRUError,
        f"{op}: initial_hidden_state has shape",
        "hidden_size=16",
        "hidden_size from the hidden_size attribute",
    )


def test_direction_must_be_one_of_three():
    _raises(
        _sequence(direction="sideways"),
        FastGRUError,
        "gru_sequence: direction is 'sideways'",
        "expected 'forward', 'reverse' or 'bidirectional'",
    )


def test_direction_is_case_insensitive():
    _sequence(direction="FORWARD")()


@pytest.mark.parametrize("value", ["sigmoid", ("sigmoid",), ("sigmoid", "tanh", "relu"), 3])
def test_activations_must_be_two_names(value):
    _raises(_sequence(activations=value), FastGRUError, f"gru_sequence: activations is {value!r}", "expected two names")


def test_activations_names_are_checked():
    _raises(
        _cell(activations=("sigmoid", "elu")),
        FastGRUError,
        "gru_cell: activations[1] is 'elu'",
        "expected one of 'relu', 'sigmoid', 'tanh'",
    )


@pytest.mark.parametrize("name", ["activations_alpha", "activations_beta"])
def test_activations_alpha_beta_take_at_most_two_floats(name):
    _raises(
        _sequence(**{name: [1.0, 2.0, 3.0]}),
        FastGRUError,
        f"gru_sequence: {name} is [1.0, 2.0, 3.0]",
        "at most two floats",
    )
    _raises(_sequence(**{name: ["x"]}), FastGRUError, f"gru_sequence: {name}[0] is 'x'", "expected a float")
    _raises(_sequence(**{name: 1.0}), FastGRUError, f"gru_sequence: {name} is 1.0", "expected a list")


def test_an_accepted_list_does_not_vouch_for_an_equal_one_of_other_types():
    _sequence(activations_alpha=[1.0])()  # accepted, and remembered
    _raises(_sequence(activations_alpha=[True]), FastGRUError, "activations_alpha[0] is True", "expected a float")
    W, R = np.zeros((3 * H, I), f32), np.zeros((3 * H, H), f32)
    fastgru.GRUCell(W, R, activations_beta=(2.0,))
    _raises(lambda: fastgru.GRUCell(W, R, activations_beta=(True,)), FastGRUError, "activations_beta[0] is True")


@pytest.mark.parametrize("value", [-1.0, math.nan, -math.inf, "3", None])
def test_clip_must_be_a_non_negative_number(value):
    _raises(_sequence(clip=value), FastGRUError, f"gru_sequence: clip is {value!r}", "expected a number >= 0")


@pytest.mark.parametrize("value", [2, -1, "yes", None, 0.5])
def test_linear_before_reset_must_be_a_bool(value):
    _raises(
        _cell(linear_before_reset=value),
        FastGRUError,
        f"gru_cell: linear_before_reset is {value!r}",
        "expected True or False",
    )


def test_augru_attributes_are_fixed():
    with pytest.raises(TypeError, match="direction"):
        _augru(direction="reverse")()


# ----------------------------------------------------------------------------------------- dtypes


@pytest.mark.parametrize("dtype", [np.int64, np.int8, np.complex64, np.bool_, object])
@pytest.mark.parametrize("name", ["X", "initial_hidden_state", "W", "R", "B"])
def test_t1_must_be_floating(name, dtype):
    shape = {
        "X": (N, S, I),
        "initial_hidden_state": (N, 1, H),
        "W": (1, 3 * H, I),
        "R": (1, 3 * H, H),
        "B": (1, 3 * H),
    }[name]
    _raises(
        _sequence(**{name: np.zeros(shape, dtype)}),
        TypeError,
        f"gru_sequence: {name} is {np.dtype(dtype).name}",
        "expected float16, float32, float64 or bfloat16",
    )


def test_augru_A_dtype_is_checked():
    _raises(_augru(A=np.zeros((N, S, 1), np.int32)), TypeError, "augru_sequence: A is int32")


def test_t1_must_be_one_dtype():
    _raises(
        _sequence(W=np.zeros((1, 3 * H, I), np.float64)),
        TypeError,
        "gru_sequence: W is float64 but X is float32",
        "must share one floating dtype (T1)",
    )
    _raises(_augru(A=np.zeros((N, S, 1), np.float16)), TypeError, "augru_sequence: A is float16 but X is float32")


def test_byte_order_does_not_make_a_different_t1():
    _sequence(W=np.zeros((1, 3 * H, I), ">f4"))()


def test_required_B_cannot_be_none():
    _raises(_sequence(B=None), TypeError, "gru_sequence: B is None")


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.bool_, np.complex64])
def test_t2_must_be_integer(dtype):
    _raises(
        _sequence(sequence_lengths=np.array([S, 3], dtype)),
        TypeError,
        f"gru_sequence: sequence_lengths is {np.dtype(dtype).name}",
        "expected an integer dtype (T2)",
    )


# ----------------------------------------------------------------------------------------- shapes


@pytest.mark.parametrize(
    "name, bad, rank",
    [
        ("X", np.zeros((N, I), f32), 3),
        ("initial_hidden_state", np.zeros((N, H), f32), 3),
        ("sequence_lengths", np.array([[S, 3]]), 1),
        ("W", np.zeros((3 * H, I), f32), 3),
        ("R", np.zeros((3 * H, H), f32), 3),
        ("B", np.zeros(3 * H, f32), 2),
    ],
)
def test_ranks_are_checked(name, bad, rank):
    _raises(
        _sequence(**{name: bad}), FastGRUError, f"gru_sequence: {name} has rank {bad.ndim}", f"expected rank {rank}"
    )


def test_cell_ranks_are_checked():
    _raises(
        _cell(X=np.zeros((N, 1, I), f32)),
        FastGRUError,
        "gru_cell: X has rank 3",
        "expected rank 2: (batch_size, input_size)",
    )


def test_W_must_match_input_size_of_X():
    message = _raises(_sequence(W=np.zeros((1, 3 * H, 16), f32)), FastGRUError)
    assert message == (
        "gru_sequence: W has shape (1, 96, 16); expected (num_directions=1, 3*hidden_size=96, input_size=32); "
        "num_directions from direction='forward', hidden_size from R.shape[-1], input_size from X.shape[-1]"
    )


@pytest.mark.parametrize(
    "name, bad, expected",
    [
        ("initial_hidden_state", np.zeros((N + 1, 1, H), f32), "(batch_size=2, num_directions=1, hidden_size=32)"),
        ("sequence_lengths", np.array([S, 3, 1]), "(batch_size=2)"),
        ("R", np.zeros((1, 3 * H + 1, H), f32), "(num_directions=1, 3*hidden_size=96, hidden_size=32)"),
        ("B", np.zeros((1, 4 * H), f32), "(num_directions=1, 3*hidden_size=96) (linear_before_reset=False)"),
    ],
)
def test_shapes_are_checked(name, bad, expected):
    _raises(
        _sequence(**{name: bad}), FastGRUError, f"gru_sequence: {name} has shape {bad.shape}", f"expected {expected}"
    )


def test_bidirectional_needs_two_directions_everywhere():
    _raises(
        _sequence(direction="bidirectional"),
        FastGRUError,
        "initial_hidden_state has shape (2, 1, 32)",
        "num_directions=2",
        "direction='bidirectional'",
    )


def test_B_rows_follow_linear_before_reset():
    _raises(
        _sequence(linear_before_reset=True),
        FastGRUError,
        "gru_sequence: B has shape (1, 96)",
        "4*hidden_size=128",
        "linear_before_reset=True",
    )
    _raises(_cell(B=np.zeros(4 * H, f32)), FastGRUError, "gru_cell: B has shape (128,)", "3*hidden_size=96")


def test_hidden_size_zero_in_R():
    _raises(_cell(R=np.zeros((0, 0), f32)), FastGRUError, "gru_cell: R has shape (0, 0)", "must be positive")


@pytest.mark.parametrize("bad", [[S + 1, 3], [-1, 3]])
def test_sequence_lengths_must_lie_in_0_to_seq_length(bad):
    i = 0
    _raises(
        _sequence(sequence_lengths=np.array(bad)),
        FastGRUError,
        f"gru_sequence: sequence_lengths[{i}] is {bad[i]}",
        "expected 0 <= sequence_lengths <= seq_length=5",
    )


def test_unsigned_sequence_lengths_beyond_seq_length():
    _raises(
        _augru(sequence_lengths=np.array([3, 2**40], np.uint64)),
        FastGRUError,
        "augru_sequence: sequence_lengths[1] is 1099511627776",
    )


def test_augru_layout_is_picked_by_the_rank_of_initial_hidden_state():
    _raises(
        _augru(initial_hidden_state=np.zeros((N, 1, 1, H), f32)),
        FastGRUError,
        "augru_sequence: initial_hidden_state has rank 4",
        "expected rank 2",
        "or, in OpenVINO's layout, rank 3",
    )
    # 2-D state with 3-D weights: the other inputs must follow the layout the state picked.
    _raises(
        _augru(W=np.zeros((1, 3 * H, I), f32)),
        FastGRUError,
        "augru_sequence: W has rank 3",
        "expected rank 2: (3*hidden_size, input_size)",
    )
    _raises(_augru(ov_layout=True, B=np.zeros(3 * H, f32)), FastGRUError, "augru_sequence: B has rank 1")


def test_augru_A_shape():
    _raises(
        _augru(A=np.zeros((N, S, 2), f32)),
        FastGRUError,
        "augru_sequence: A has shape (2, 5, 2)",
        "expected (batch_size=2, seq_length=5, 1)",
    )
    _raises(_augru(ov_layout=True, initial_hidden_state=np.zeros((N, 2, H), f32)), FastGRUError, "num_directions=1")


def test_messages_name_the_op_first():
    for call in (_sequence(direction="x"), _cell(clip=-1), _augru(A=np.zeros(3, f32))):
        with pytest.raises(ValueError) as info:
            call()
        assert re.match(r"^(gru_sequence|gru_cell|augru_sequence): ", str(info.value))


def test_a_clip_beyond_float_range_is_no_clipping_and_its_negative_an_error():
    got = _cell(clip=10**400)()
    np.testing.assert_array_equal(got, _cell()())
    _raises(_cell(clip=-(10**400)), FastGRUError, "gru_cell: clip is -1000", "expected a number >= 0")


#: Attribute values of every kind: huge and odd numbers, NumPy scalars and arrays, containers,
#: strings, None and an object without any protocol.
ODD_VALUES = st.one_of(
    st.integers(-(10**400), 10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=8),
    st.binary(max_size=4),
    st.complex_numbers(allow_nan=True),
    st.lists(st.one_of(st.text(max_size=8), st.integers(), st.floats()), max_size=3).map(tuple),
    st.lists(st.one_of(st.text(max_size=8), st.floats(), st.lists(st.integers(), max_size=2)), max_size=3),
    st.sampled_from(
        [
            np.array(["sigmoid", "tanh"]),
            np.array([1.0, 2.0]),
            np.float32(np.nan),
            np.int64(-3),
            np.bool_(True),
            {"sigmoid": 1},
            {1, 2},
            object(),
            float,
            np.array(3.0),
        ]
    ),
)


@settings(max_examples=300, deadline=None)
@given(
    name=st.sampled_from(
        [
            "hidden_size",
            "direction",
            "activations",
            "activations_alpha",
            "activations_beta",
            "clip",
            "linear_before_reset",
        ]
    ),
    value=ODD_VALUES,
)
def test_any_attribute_value_is_accepted_or_refused_clearly(name, value):
    """Fuzzed attribute values: each call returns, or raises FastGRUError or TypeError naming the op, and
    the attribute when the value itself is refused (a valid value may make a shape wrong: hidden_size,
    direction, linear_before_reset); never another exception (OverflowError, an ambiguous truth value...)."""
    try:
        _sequence(**{name: value})()
    except (FastGRUError, TypeError) as error:
        message = str(error)
        assert message.startswith("gru_sequence: "), message
        assert name in message or name in ("hidden_size", "direction", "linear_before_reset"), message


def _swapped(array):
    """``array``'s values in the other byte order (big-endian on a little-endian machine)."""
    return array.astype(array.dtype.newbyteorder("S"))


def test_out_in_the_other_byte_order_is_named_so():
    """out= is written in place, so it must be in the machine's byte order; the message says that
    the byte order is what is wrong (its type name alone would be the expected one)."""
    op = fastgru.GRUSequence(np.zeros((1, 3 * H, I), f32), np.zeros((1, 3 * H, H), f32), np.zeros((1, 3 * H), f32))
    X, h0 = np.zeros((N, S, I), f32), np.zeros((N, 1, H), f32)
    Y, Ho = np.empty((N, 1, S, H), f32), np.empty((N, 1, H), f32)
    native, other = np.dtype(f32).str, np.dtype(f32).newbyteorder("S").str
    message = (
        rf"^GRUSequence: out Y is float32 in non-native byte order \('{re.escape(other)}'\); expected float32 in "
        rf"the machine's byte order \('{re.escape(native)}'\), the dtype of the inputs: out= arrays are written in "
        r"place and cannot be byte-swapped"
    )
    with pytest.raises(TypeError, match=message):
        op(X, h0, [S, 3], out=(_swapped(Y), Ho))
    cell = fastgru.GRUCell(np.zeros((3 * H, I), f32), np.zeros((3 * H, H), f32))
    with pytest.raises(TypeError, match=r"^GRUCell: out Ho is float32 in non-native byte order"):
        cell(X[:, 0], h0[:, 0], out=_swapped(h0[:, 0]))
    pool = fastgru.StatePool(cell, capacity=2)
    ids = [pool.open(), pool.open()]
    with pytest.raises(TypeError, match=r"^GRUCell pool.step: out is float32 in non-native byte order"):
        pool.step(ids, X[:, 0], out=_swapped(h0[:, 0]))
    with pytest.raises(TypeError, match=r"^GRUSequence: out Y is float64; expected float32, the dtype of the inputs$"):
        op(X, h0, [S, 3], out=(np.zeros(Y.shape, np.float64), Ho))  # another type: named by its type alone


def test_inputs_in_the_other_byte_order_are_accepted_and_their_errors_name_the_type():
    """Byte-swapped inputs are read as their values (docs/semantics.md, "Types"); a wrong one is
    named by its type, which is what is wrong with it."""
    rng = np.random.default_rng(0)
    X, W = rng.standard_normal((N, S, I), dtype=f32), rng.uniform(-0.2, 0.2, (1, 3 * H, I)).astype(f32)
    want = _sequence(X=X, W=W)()
    got = _sequence(X=_swapped(X), W=_swapped(W))()
    assert all(g.dtype == np.dtype(f32) and np.array_equal(g, w) for g, w in zip(got, want))
    _raises(_sequence(X=_swapped(X).astype(">i8")), TypeError, "gru_sequence: X is int64; expected float16")
    _raises(_sequence(W=_swapped(W.astype(np.float64))), TypeError, "gru_sequence: W is float64 but X is float32")
