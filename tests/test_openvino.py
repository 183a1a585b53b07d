"""fastgru against OpenVINO itself (docs/semantics.md, "Where fastgru differs from OpenVINO"):
same inputs, same answers up to float rounding.

OpenVINO's CPU plugin runs each case compiled with an f32 inference precision hint
(tests/openvino_oracle.py). Not run here, for the reasons of docs/semantics.md, "Where fastgru
differs from OpenVINO": batch 0 (OpenVINO crashes) and ragged AUGRU lengths (the CPU plugin has
no implementation). float64 is compared with the float32 tolerance, since OpenVINO computes float64 models in float32.

The largest |fastgru - OpenVINO| seen per dtype is printed at the end of the module.
"""

import math
from collections import defaultdict

import numpy as np
import pytest

openvino = pytest.importorskip("openvino")

try:  # tests/ is on sys.path under pytest's default (prepend) import mode
    import openvino_oracle as oracle
except ImportError:  # tests/ as a package, or --import-mode=importlib from the repository root
    from tests import openvino_oracle as oracle

from conftest import make_lengths, show_lines  # noqa: E402

import fastgru  # noqa: E402

try:
    import ml_dtypes
except ImportError:  # pragma: no cover
    ml_dtypes = None

BF16 = pytest.param(
    ml_dtypes.bfloat16 if ml_dtypes else None,
    id="bfloat16",
    marks=pytest.mark.skipif(ml_dtypes is None, reason="ml_dtypes is not installed"),
)

# rtol, atol of |fastgru - OpenVINO| per dtype. float16/bfloat16: fastgru computes in float32 and
# rounds each output once. OpenVINO's bfloat16 is 1 unit in the last place off the correctly rounded
# answer now and then even for one GRUCell step (fastgru gives the correctly rounded one), and these
# differences can grow by a few units over a sequence.
TOLERANCE = {
    "float32": (1e-5, 2e-6),
    "float64": (1e-5, 2e-6),  # OpenVINO's float64 is float32 (docs/semantics.md, "Where fastgru differs from OpenVINO")
    "float16": (2e-3, 1e-3),
    "bfloat16": (2e-2, 1e-2),
}

MAX_DEVIATION = defaultdict(float)  # "<dtype>" or "AUGRU <dtype>" -> max |fastgru - OpenVINO|


@pytest.fixture(scope="module", autouse=True)
def deviation_summary(request):
    """Print the largest deviation seen per dtype after the module's last test (shown even without -s)."""
    yield
    if not MAX_DEVIATION:
        return
    lines = ["", "fastgru vs OpenVINO, max |difference| per dtype:"]
    lines += [f"  {key:<16} {value:.3g}" for key, value in sorted(MAX_DEVIATION.items())]
    show_lines(request, lines)


def dtype_name(dtype):
    return np.dtype(dtype).name


def assert_matches(got, want, dtype, request, label=None):
    """Compare fastgru's outputs with OpenVINO's elementwise within TOLERANCE[dtype]; record the deviation."""
    name = dtype_name(dtype)
    rtol, atol = TOLERANCE[name]
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    worst = 0.0
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape
        assert g.dtype == np.dtype(dtype) and w.dtype == np.dtype(dtype)
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        assert np.all(np.isfinite(w64)), "OpenVINO returned a non-finite value; the case is too large"
        if g.size:
            worst = max(worst, float(np.max(np.abs(g64 - w64))))
        np.testing.assert_allclose(g64, w64, rtol=rtol, atol=atol)
    key = f"{label} {name}" if label else name
    MAX_DEVIATION[key] = max(MAX_DEVIATION[key], worst)
    request.node.user_properties.append((f"max_abs_deviation_{name}", worst))


def randn(rng, shape, dtype, scale=1.0):
    return (rng.uniform(-scale, scale, size=shape)).astype(dtype)


def sequence_case(
    seed,
    *,
    batch=4,
    seq_len=5,
    input_size=3,
    hidden_size=5,
    dtype=np.float32,
    direction="forward",
    linear_before_reset=False,
    ragged=True,
):
    rng = np.random.default_rng(seed)
    D = 2 if direction == "bidirectional" else 1
    G = 4 if linear_before_reset else 3
    scale = 1.0 / math.sqrt(hidden_size) + 0.5
    inputs = dict(
        X=randn(rng, (batch, seq_len, input_size), dtype),
        initial_hidden_state=randn(rng, (batch, D, hidden_size), dtype),
        sequence_lengths=(
            make_lengths(rng, batch, seq_len).astype(np.int32) if ragged else np.full(batch, seq_len, dtype=np.int32)
        ),
        W=randn(rng, (D, 3 * hidden_size, input_size), dtype, scale),
        R=randn(rng, (D, 3 * hidden_size, hidden_size), dtype, scale),
        B=randn(rng, (D, G * hidden_size), dtype, 0.5),
    )
    return inputs


def run_sequence(inputs, request, dtype, **attrs):
    got = fastgru.gru_sequence(**inputs, **attrs)
    want = oracle.gru_sequence(**inputs, **attrs)
    assert_matches(got, want, dtype, request)
    return got, want


# --- GRUCell-3 ------------------------------------------------------------------------------------

CELL_ACTIVATIONS = [("sigmoid", "tanh"), ("relu", "tanh"), ("tanh", "relu"), ("sigmoid", "sigmoid")]


@pytest.mark.parametrize("activations", CELL_ACTIVATIONS, ids="-".join)
@pytest.mark.parametrize("with_B", [True, False], ids=["B", "noB"])
@pytest.mark.parametrize("linear_before_reset", [False, True], ids=["lbr0", "lbr1"])
def test_gru_cell_float32(linear_before_reset, with_B, activations, request):
    seed = 100 + 8 * CELL_ACTIVATIONS.index(activations) + 2 * with_B + linear_before_reset
    rng = np.random.default_rng(seed)
    N, In, Hs = 3, 4, 5
    G = 4 if linear_before_reset else 3
    X, H = randn(rng, (N, In), np.float32), randn(rng, (N, Hs), np.float32)
    W, R = randn(rng, (3 * Hs, In), np.float32), randn(rng, (3 * Hs, Hs), np.float32)
    B = randn(rng, (G * Hs,), np.float32) if with_B else None
    attrs = dict(activations=activations, linear_before_reset=linear_before_reset)
    got = fastgru.gru_cell(X, H, W, R, B, **attrs)
    want = oracle.gru_cell(X, H, W, R, B, **attrs)
    assert_matches(got, want, np.float32, request)


@pytest.mark.parametrize(
    ("batch", "input_size", "hidden_size", "clip"),
    [
        (1, 1, 1, math.inf),
        (2, 1, 3, 0.0),
        (5, 7, 17, 0.25),
        (3, 4, 3, 1.5),
    ],
)
@pytest.mark.parametrize("linear_before_reset", [False, True], ids=["lbr0", "lbr1"])
def test_gru_cell_sizes_and_clip(batch, input_size, hidden_size, clip, linear_before_reset, request):
    rng = np.random.default_rng(hidden_size * 1000 + input_size * 10 + batch + linear_before_reset)
    G = 4 if linear_before_reset else 3
    X, H = randn(rng, (batch, input_size), np.float32, 2.0), randn(rng, (batch, hidden_size), np.float32)
    W = randn(rng, (3 * hidden_size, input_size), np.float32, 2.0)
    R = randn(rng, (3 * hidden_size, hidden_size), np.float32, 2.0)
    B = randn(rng, (G * hidden_size,), np.float32)
    attrs = dict(clip=clip, linear_before_reset=linear_before_reset)
    got = fastgru.gru_cell(X, H, W, R, B, **attrs)
    want = oracle.gru_cell(X, H, W, R, B, **attrs)
    assert_matches(got, want, np.float32, request)


@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float64], ids=dtype_name)
@pytest.mark.parametrize("linear_before_reset", [False, True], ids=["lbr0", "lbr1"])
def test_gru_cell_other_dtypes(dtype, linear_before_reset, request):
    rng = np.random.default_rng(7 + linear_before_reset)
    N, In, Hs = 4, 3, 6
    G = 4 if linear_before_reset else 3
    X, H = randn(rng, (N, In), dtype), randn(rng, (N, Hs), dtype)
    W, R = randn(rng, (3 * Hs, In), dtype), randn(rng, (3 * Hs, Hs), dtype)
    B = randn(rng, (G * Hs,), dtype)
    got = fastgru.gru_cell(X, H, W, R, B, linear_before_reset=linear_before_reset)
    want = oracle.gru_cell(X, H, W, R, B, linear_before_reset=linear_before_reset)
    assert_matches(got, want, dtype, request)


# --- GRUSequence-5 --------------------------------------------------------------------------------

DIRECTIONS = ["forward", "reverse", "bidirectional"]


@pytest.mark.parametrize("linear_before_reset", [False, True], ids=["lbr0", "lbr1"])
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_gru_sequence_float32(direction, linear_before_reset, request):
    seed = 200 + 2 * DIRECTIONS.index(direction) + linear_before_reset
    inputs = sequence_case(seed, batch=5, seq_len=6, direction=direction, linear_before_reset=linear_before_reset)
    assert 0 in inputs["sequence_lengths"] and 6 in inputs["sequence_lengths"]
    (Y, Ho), _ = run_sequence(inputs, request, np.float32, direction=direction, linear_before_reset=linear_before_reset)
    # docs/semantics.md, "Sequences", checked against OpenVINO's answer above: length 0 gives Ho = 0
    # and an all-zero Y row.
    empty = inputs["sequence_lengths"] == 0
    assert not Ho[empty].any() and not Y[empty].any()


@pytest.mark.parametrize(
    "activations",
    [("relu", "tanh"), ("tanh", "relu"), ("relu", "relu"), ("tanh", "sigmoid"), ("sigmoid", "relu")],
    ids="-".join,
)
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_gru_sequence_activations(direction, activations, request):
    seed = 300 + 3 * sum(map(len, activations)) + DIRECTIONS.index(direction)
    inputs = sequence_case(
        seed, batch=3, seq_len=4, hidden_size=4, direction=direction, linear_before_reset=seed % 2 == 1
    )
    run_sequence(
        inputs, request, np.float32, direction=direction, activations=activations, linear_before_reset=seed % 2 == 1
    )


@pytest.mark.parametrize("clip", [math.inf, 0.0, 0.3, 1.0])
@pytest.mark.parametrize("linear_before_reset", [False, True], ids=["lbr0", "lbr1"])
def test_gru_sequence_clip(clip, linear_before_reset, request):
    inputs = sequence_case(
        400 + linear_before_reset, direction="bidirectional", linear_before_reset=linear_before_reset
    )
    inputs["X"] *= 3  # pre-activations well beyond the clip
    got, _ = run_sequence(
        inputs, request, np.float32, direction="bidirectional", clip=clip, linear_before_reset=linear_before_reset
    )
    if clip in (0.3, 1.0):  # the clip is active: the answer differs from the unclipped one
        unclipped = fastgru.gru_sequence(**inputs, direction="bidirectional", linear_before_reset=linear_before_reset)
        assert not np.allclose(got[0], unclipped[0], rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize(
    ("batch", "seq_len", "input_size", "hidden_size"),
    [
        (1, 1, 1, 1),
        (2, 7, 1, 3),
        (3, 5, 2, 17),
        (17, 3, 5, 8),
        (4, 9, 6, 1),
    ],
)
@pytest.mark.parametrize("direction", ["reverse", "bidirectional"])
def test_gru_sequence_sizes(batch, seq_len, input_size, hidden_size, direction, request):
    seed = 500 + batch * 31 + seq_len * 7 + hidden_size + (direction == "reverse")
    inputs = sequence_case(
        seed,
        batch=batch,
        seq_len=seq_len,
        input_size=input_size,
        hidden_size=hidden_size,
        direction=direction,
        linear_before_reset=batch % 2 == 1,
    )
    run_sequence(inputs, request, np.float32, direction=direction, linear_before_reset=batch % 2 == 1)


def test_gru_sequence_int64_lengths_and_junk_padding(request):
    """Values in X past a row's length (here NaN) reach neither OpenVINO's nor fastgru's outputs."""
    inputs = sequence_case(600, batch=4, seq_len=6, direction="bidirectional")
    lengths = inputs["sequence_lengths"].astype(np.int64)
    inputs["sequence_lengths"] = lengths
    for b, n in enumerate(lengths):
        inputs["X"][b, n:] = np.nan
    run_sequence(inputs, request, np.float32, direction="bidirectional")


@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float64], ids=dtype_name)
@pytest.mark.parametrize("linear_before_reset", [False, True], ids=["lbr0", "lbr1"])
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_gru_sequence_other_dtypes(direction, linear_before_reset, dtype, request):
    seed = 700 + 2 * DIRECTIONS.index(direction) + linear_before_reset
    inputs = sequence_case(
        seed,
        batch=4,
        seq_len=5,
        hidden_size=6,
        dtype=dtype,
        direction=direction,
        linear_before_reset=linear_before_reset,
    )
    run_sequence(inputs, request, dtype, direction=direction, linear_before_reset=linear_before_reset)


@pytest.mark.parametrize("dtype", [np.float16, BF16], ids=dtype_name)
def test_gru_sequence_low_precision_clip_relu(dtype, request):
    inputs = sequence_case(
        800, batch=3, seq_len=4, hidden_size=3, dtype=dtype, direction="bidirectional", linear_before_reset=True
    )
    run_sequence(
        inputs,
        request,
        dtype,
        direction="bidirectional",
        activations=("relu", "tanh"),
        clip=0.5,
        linear_before_reset=True,
    )


# --- AUGRUSequence (ie_internal_opset, through the CPU plugin's extensions) -------------------------


def augru_case(seed, batch, seq_len, input_size, hidden_size, dtype=np.float32, a_range=(0.0, 1.0)):
    rng = np.random.default_rng(seed)
    scale = 1.0 / math.sqrt(hidden_size) + 0.5
    return dict(
        X=randn(rng, (batch, seq_len, input_size), dtype),
        initial_hidden_state=randn(rng, (batch, 1, hidden_size), dtype),
        sequence_lengths=np.full(batch, seq_len, dtype=np.int32),  # OpenVINO: full lengths only
        W=randn(rng, (1, 3 * hidden_size, input_size), dtype, scale),
        R=randn(rng, (1, 3 * hidden_size, hidden_size), dtype, scale),
        B=randn(rng, (1, 3 * hidden_size), dtype, 0.5),
        A=rng.uniform(*a_range, size=(batch, seq_len, 1)).astype(dtype),
    )


@pytest.mark.parametrize(
    ("batch", "seq_len", "input_size", "hidden_size", "a_range"),
    [
        (3, 5, 4, 6, (0.0, 1.0)),
        (1, 1, 1, 1, (0.0, 1.0)),
        (2, 7, 1, 3, (0.0, 1.0)),
        (4, 6, 5, 17, (0.0, 1.0)),
        # batch >= 16: where OpenVINO's bf16 path goes wrong (docs/semantics.md, "Where fastgru
        # differs from OpenVINO")
        (17, 4, 3, 8, (0.0, 1.0)),
        # a outside [0, 1] is used as given, not clamped (docs/semantics.md, "The gates")
        (3, 5, 4, 6, (-1.0, 2.0)),
    ],
)
def test_augru_sequence_float32(batch, seq_len, input_size, hidden_size, a_range, request):
    inputs = augru_case(900 + batch * 13 + hidden_size, batch, seq_len, input_size, hidden_size, a_range=a_range)
    got = fastgru.augru_sequence(**inputs)
    want = oracle.augru_sequence(**inputs)
    assert_matches(got, want, np.float32, request, label="AUGRU")
    # a matters: with a = 0 the answer is the plain GRU's, which differs here.
    gru = fastgru.augru_sequence(**{**inputs, "A": np.zeros_like(inputs["A"])})
    assert not np.allclose(got[0], gru[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float64], ids=dtype_name)
def test_augru_sequence_other_dtypes(dtype, request):
    inputs = augru_case(950, 17, 5, 4, 6, dtype=dtype)
    got = fastgru.augru_sequence(**inputs)
    want = oracle.augru_sequence(**inputs)
    assert_matches(got, want, dtype, request, label="AUGRU")
