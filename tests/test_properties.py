"""Invariants of fastgru over drawn shapes and attributes (hypothesis): a prefix of a longer
sequence, batch permutation, AUGRU with A = 0 is GRU, bidirectional is forward and reverse
stacked, and the same bits on one and on two threads. Every element is computed by the same
operations whatever the batch, the steps, the directions and the threads, so each invariant holds
to the bit."""

import numba
import numpy as np
import pytest
from conftest import make_case, watch_entries
from hypothesis import example, given, settings
from hypothesis import strategies as st

import fastgru
from fastgru import _tuning

SEEDS = st.integers(0, 2**32 - 1)
ACTIVATIONS = st.tuples(*[st.sampled_from(["relu", "sigmoid", "tanh"])] * 2)
SHAPES = st.fixed_dictionaries(
    {
        "batch": st.integers(1, 6),
        "seq_len": st.integers(1, 7),
        "input_size": st.integers(1, 5),
        "hidden_size": st.integers(1, 20),
        "linear_before_reset": st.booleans(),
        "dtype": st.sampled_from([np.dtype(np.float32), np.dtype(np.float64)]),
    }
)


def assert_same_computation(got, want):
    """fastgru against fastgru: the same bits (NaN where the other has NaN)."""
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


@settings(max_examples=30, deadline=None)
@given(shapes=SHAPES, seed=SEEDS, k=st.integers(0, 7), activations=ACTIVATIONS)
def test_a_prefix_runs_like_the_start_of_a_longer_run(shapes, seed, k, activations):
    case = make_case(np.random.default_rng(seed), direction="forward", activations=activations, **shapes)
    k = min(k, shapes["seq_len"])
    lengths = case.inputs["sequence_lengths"]
    Y, Ho = fastgru.gru_sequence(**case.inputs, **case.attrs)
    prefix = {**case.inputs, "X": case.inputs["X"][:, :k], "sequence_lengths": np.minimum(lengths, k)}
    Yk, Hok = fastgru.gru_sequence(**prefix, **case.attrs)
    done = lengths <= k  # rows that end within the prefix have the same last state
    assert_same_computation((Yk, Hok[done]), (Y[:, :, :k], Ho[done]))


@settings(max_examples=30, deadline=None)
@given(
    shapes=SHAPES,
    seed=SEEDS,
    direction=st.sampled_from(["forward", "reverse", "bidirectional"]),
    activations=ACTIVATIONS,
)
def test_permuting_the_batch_permutes_the_outputs(shapes, seed, direction, activations):
    rng = np.random.default_rng(seed)
    case = make_case(rng, direction=direction, activations=activations, **shapes)
    order = rng.permutation(shapes["batch"])
    permuted = {
        name: (value[order] if name in ("X", "initial_hidden_state", "sequence_lengths") else value)
        for name, value in case.inputs.items()
    }
    Y, Ho = fastgru.gru_sequence(**case.inputs, **case.attrs)
    Yp, Hop = fastgru.gru_sequence(**permuted, **case.attrs)
    assert_same_computation((Yp, Hop), (Y[order], Ho[order]))


@settings(max_examples=30, deadline=None)
@given(shapes=SHAPES, seed=SEEDS, layout=st.sampled_from(["documented", "openvino"]))
def test_augru_with_zero_attention_is_gru(shapes, seed, layout):
    shapes = {**shapes, "linear_before_reset": False}
    case = make_case(np.random.default_rng(seed), op="augru_sequence", layout=layout, **shapes)
    case.inputs["A"][:] = 0
    Y, Ho = fastgru.augru_sequence(**case.inputs)
    gru = {name: value for name, value in case.inputs.items() if name != "A"}
    if layout == "documented":  # GRUSequence's ranks, num_directions = 1
        gru = {
            **gru,
            "initial_hidden_state": gru["initial_hidden_state"][:, None],
            **{name: gru[name][None] for name in ("W", "R", "B")},
        }
        Y, Ho = Y[:, None], Ho[:, None]
    Yg, Hog = fastgru.gru_sequence(**gru, direction="forward", activations=("sigmoid", "tanh"))
    assert_same_computation((Y, Ho), (Yg, Hog))


@settings(max_examples=30, deadline=None)
@given(shapes=SHAPES, seed=SEEDS, activations=ACTIVATIONS, clip=st.sampled_from([0.0, 0.5, 3.0]))
def test_bidirectional_is_forward_and_reverse_stacked(shapes, seed, activations, clip):
    case = make_case(
        np.random.default_rng(seed), direction="bidirectional", activations=activations, clip=clip, **shapes
    )
    Y, Ho = fastgru.gru_sequence(**case.inputs, **case.attrs)
    for d, direction in enumerate(["forward", "reverse"]):
        one = {
            **case.inputs,
            "initial_hidden_state": case.inputs["initial_hidden_state"][:, d : d + 1],
            **{name: case.inputs[name][d : d + 1] for name in ("W", "R", "B")},
        }
        Yd, Hod = fastgru.gru_sequence(**one, **{**case.attrs, "direction": direction})
        assert_same_computation((Yd, Hod), (Y[:, d : d + 1], Ho[:, d : d + 1]))


#: Shapes that two threads share (with _tuning.SERIAL_BELOW_FLOPS at 0 in the test); the @example
#: below takes a path that splits a single row (the partner thread's, PAIR_WAKE_FLOPS at 0 too,
#: else Numba's).
PARALLEL_SHAPES = st.fixed_dictionaries(
    {
        "batch": st.integers(4, 10),
        "seq_len": st.integers(8, 12),
        "input_size": st.integers(1, 8),
        "hidden_size": st.integers(32, 72),
        "linear_before_reset": st.booleans(),
        "dtype": st.sampled_from([np.dtype(np.float32), np.dtype(np.float64)]),
    }
)


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="Numba has a single thread here")
@settings(max_examples=15, deadline=None)
@given(shapes=PARALLEL_SHAPES, seed=SEEDS, op=st.sampled_from(["forward", "reverse", "bidirectional", "augru"]))
@example(
    shapes={
        "batch": 1,
        "seq_len": _tuning.SPLIT_FROM_STEPS,
        "input_size": 3,
        "hidden_size": _tuning.SPLIT_FROM_HIDDEN,
        "linear_before_reset": False,
        "dtype": np.dtype(np.float32),
    },
    seed=1,
    op="forward",
)
def test_the_same_bits_for_one_and_two_threads(shapes, seed, op):
    rng = np.random.default_rng(seed)
    if op == "augru":
        case = make_case(rng, op="augru_sequence", layout="openvino", **shapes)
        run = fastgru.augru_sequence
    else:
        case = make_case(rng, direction=op, **shapes)
        run = fastgru.gru_sequence
    ran = []
    with pytest.MonkeyPatch.context() as patch:
        watch_entries(patch, lambda kinds, answer: ran.append("run_" + kinds[0]))
        patch.setattr(_tuning, "SERIAL_BELOW_FLOPS", 0)
        patch.setattr(_tuning, "PAIR_WAKE_FLOPS", 0)
        with fastgru.threads(1):
            one = run(**case.inputs, **case.attrs)
        with fastgru.threads(2):
            two = run(**case.inputs, **case.attrs)
    assert ran[0] == "run_serial" and ran[1] != "run_serial", ran  # two threads really shared the work
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)
