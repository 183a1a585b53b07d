"""Invariants of the ops over drawn shapes and attributes (hypothesis)."""

import numba
import numpy as np
from conftest import assert_close, make_case
from hypothesis import given, settings
from hypothesis import strategies as st

import fastgru

SETTINGS = settings(max_examples=25, deadline=None)

shapes = st.fixed_dictionaries({
    "batch": st.integers(1, 6),
    "seq_len": st.integers(1, 7),
    "input_size": st.integers(1, 5),
    "hidden_size": st.integers(1, 40),
    "linear_before_reset": st.booleans(),
    "dtype": st.sampled_from([np.float32, np.float64]),
})
activations = st.tuples(*[st.sampled_from(["relu", "sigmoid", "tanh"])] * 2)


@SETTINGS
@given(shapes=shapes, seed=st.integers(0, 2**32 - 1), k=st.integers(0, 7), activations=activations)
def test_a_prefix_runs_like_the_start_of_a_longer_run(shapes, seed, k, activations):
    case = make_case(np.random.default_rng(seed), activations=activations, **shapes)
    k = min(k, shapes["seq_len"])
    Y, Ho = fastgru.gru_sequence(**case.inputs, **case.attrs)
    short = {**case.inputs, "X": case.inputs["X"][:, :k],
             "sequence_lengths": np.minimum(case.inputs["sequence_lengths"], k)}
    Yk, Hok = fastgru.gru_sequence(**short, **case.attrs)
    assert_close(Yk, np.ascontiguousarray(Y[:, :, :k]))
    done = case.inputs["sequence_lengths"] <= k
    assert_close(Hok[done], Ho[done])


@SETTINGS
@given(shapes=shapes, seed=st.integers(0, 2**32 - 1), direction=st.sampled_from(["forward", "reverse",
                                                                                 "bidirectional"]))
def test_permuting_the_batch_permutes_the_outputs(shapes, seed, direction):
    rng = np.random.default_rng(seed)
    case = make_case(rng, direction=direction, **shapes)
    order = rng.permutation(shapes["batch"])
    permuted = {name: (a[order] if name in ("X", "initial_hidden_state", "sequence_lengths") else a)
                for name, a in case.inputs.items()}
    Y, Ho = fastgru.gru_sequence(**case.inputs, **case.attrs)
    Yp, Hop = fastgru.gru_sequence(**permuted, **case.attrs)
    assert_close((Yp, Hop), (Y[order], Ho[order]))


@SETTINGS
@given(shapes=shapes, seed=st.integers(0, 2**32 - 1))
def test_augru_with_zero_attention_is_gru(shapes, seed):
    shapes = {**shapes, "linear_before_reset": False}
    case = make_case(np.random.default_rng(seed), op="augru_sequence", layout="openvino", **shapes)
    case.inputs["A"][:] = 0
    Y, Ho = fastgru.augru_sequence(**case.inputs)
    gru = {name: a for name, a in case.inputs.items() if name != "A"}
    Yg, Hog = fastgru.gru_sequence(**gru)
    np.testing.assert_array_equal(Y, Yg)
    np.testing.assert_array_equal(Ho, Hog)


@SETTINGS
@given(shapes=shapes, seed=st.integers(0, 2**32 - 1), activations=activations)
def test_bidirectional_is_forward_and_reverse_stacked(shapes, seed, activations):
    case = make_case(np.random.default_rng(seed), direction="bidirectional", activations=activations, clip=1.5,
                     **shapes)
    Y, Ho = fastgru.gru_sequence(**case.inputs, **case.attrs)
    for d, direction in enumerate(["forward", "reverse"]):
        one = {name: (a[:, d:d + 1] if name == "initial_hidden_state" else a[d:d + 1] if name in "WRB" else a)
               for name, a in case.inputs.items()}
        Yd, Hod = fastgru.gru_sequence(**one, **{**case.attrs, "direction": direction})
        np.testing.assert_array_equal(Yd, Y[:, d:d + 1])
        np.testing.assert_array_equal(Hod, Ho[:, d:d + 1])


big_shapes = st.fixed_dictionaries({
    "batch": st.integers(1, 12),
    "seq_len": st.integers(1, 9),
    "input_size": st.integers(1, 9),
    "hidden_size": st.integers(16, 80),
    "linear_before_reset": st.booleans(),
    "dtype": st.sampled_from([np.float32, np.float64]),
})


@settings(max_examples=20, deadline=None)
@given(shapes=big_shapes, seed=st.integers(0, 2**32 - 1), direction=st.sampled_from(["forward", "reverse",
                                                                                     "bidirectional"]))
def test_the_same_bits_for_one_and_two_threads(shapes, seed, direction):
    # Shapes mostly above _dispatch.SERIAL_BELOW_FLOPS, so that two threads share the work
    # (tests/test_kernel_paths.py forces every path).
    case = make_case(np.random.default_rng(seed), direction=direction, **shapes)
    op = fastgru.GRUSequence(case.inputs["W"], case.inputs["R"], case.inputs["B"], **case.attrs)
    args = [case.inputs[name] for name in ("X", "initial_hidden_state", "sequence_lengths")]
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = op(*args)
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        two = op(*args)
    finally:
        numba.set_num_threads(before)
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)
