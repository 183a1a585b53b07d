"""Compact weights (``weight_dtype='bfloat16'`` or ``'int8'``): every op, path and attribute against
the NumPy reference run on the weights the op computes with; the same bits on every path; the
stated error bounds, per weight (over the whole float32 domain for bfloat16) and per step; the
default unchanged; bad values refused with clear errors."""

import functools
import itertools
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import TOLERANCES, assert_close, on_every_path
from hypothesis import given, settings
from hypothesis import strategies as st

import fastgru
from fastgru import reference
from fastgru._compact import dequantized, quantized_int8, rounded_to_bfloat16
from fastgru._isa import INT8_VNNI

FORMATS = ("bfloat16", "int8")


def _weights(rng, d, h, i, lbr, scale=None):
    scale = 1 / np.sqrt(h) if scale is None else scale
    return (
        rng.uniform(-scale, scale, (d, 3 * h, i)).astype(np.float32),
        rng.uniform(-scale, scale, (d, 3 * h, h)).astype(np.float32),
        rng.uniform(-scale, scale, (d, (4 if lbr else 3) * h)).astype(np.float32),
    )


#: int8 ops quantise each product's A per row to 16 bits where INT8_VNNI (|Δa| <= max|a| / 65534): on
#: these tests' shapes (Σ|w'| <= 10, |a| <= 5, <= 7 steps) a few 1e-4 at most, beside float32's rounding.
INT8_ACTIVATIONS_ATOL = 1e-3


def _assert_matches(fmt, got, want, what):
    """fastgru's results against the reference on the op's weights: float32's tolerance, and for
    int8's integer products (INT8_VNNI) the quantised activations' too."""
    if fmt != "int8" or not INT8_VNNI:
        assert_close(got, want, what=what)
        return
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        assert g.shape == w.shape and g.dtype == w.dtype, what
        rtol, atol = TOLERANCES[w.dtype.name]
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol + INT8_ACTIVATIONS_ATOL, equal_nan=True, err_msg=what)


def _on_weights_of(op, W, R):
    """W' and R' that a compact op computes with, in W's and R's shapes."""
    Wq, Rq = dequantized("test", op.weight_dtype, W.reshape(-1, *W.shape[-2:]), R.reshape(-1, *R.shape[-2:]))
    return Wq.reshape(W.shape), Rq.reshape(R.shape)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    "direction, lbr, clip, t1",
    [
        ("forward", False, 0.0, np.float32),
        ("reverse", True, 0.7, np.float32),
        ("bidirectional", False, 0.0, np.float32),
        ("bidirectional", True, 0.0, np.float16),
    ],
)
def test_sequences_match_the_reference_on_their_weights(fmt, direction, lbr, clip, t1):
    rng = np.random.default_rng(1)
    d, n, s, i, h = 1 + (direction == "bidirectional"), 5, 7, 6, 37
    W, R, B = _weights(rng, d, h, i, lbr)
    attrs = {"direction": direction, "linear_before_reset": lbr, "clip": clip}
    op = fastgru.GRUSequence(W.astype(t1), R.astype(t1), B.astype(t1), **attrs, weight_dtype=fmt)
    X, h0 = rng.standard_normal((n, s, i)).astype(t1), rng.standard_normal((n, d, h)).astype(t1)
    lengths = np.array([7, 0, 3, 7, 1])
    f32 = [a.astype(t1).astype(np.float32) for a in (W, R, B, X, h0)]  # what the op sees, computed in float32
    Wq, Rq = _on_weights_of(op, *f32[:2])
    want = reference.gru_sequence(f32[3], f32[4], lengths, Wq, Rq, f32[2], **attrs)
    want = tuple(w.astype(t1) for w in want)  # rounded once, as the op rounds its float32 results
    _assert_matches(fmt, op(X, h0, lengths), want, f"{fmt} {direction} lbr={lbr}")


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("lbr", [False, True])
def test_cells_and_augru_match_the_reference_on_their_weights(fmt, lbr):
    rng = np.random.default_rng(2)
    n, i, h = 4, 9, 24
    W, R, B = _weights(rng, 1, h, i, lbr)
    cell = fastgru.GRUCell(W[0], R[0], B[0], linear_before_reset=lbr, weight_dtype=fmt)
    Wq, Rq = _on_weights_of(cell, W[0], R[0])
    X, H = rng.standard_normal((n, i)).astype(np.float32), rng.standard_normal((n, h)).astype(np.float32)
    _assert_matches(fmt, cell(X, H), reference.gru_cell(X, H, Wq, Rq, B[0], linear_before_reset=lbr), "cell")
    if not lbr:
        augru = fastgru.AUGRUSequence(W[0], R[0], B[0], weight_dtype=fmt)
        Xs, A = rng.standard_normal((n, 5, i)).astype(np.float32), rng.uniform(0, 1, (n, 5, 1)).astype(np.float32)
        lengths = np.array([5, 2, 0, 4])
        want = reference.augru_sequence(Xs, H, lengths, Wq, Rq, B[0], A)
        _assert_matches(fmt, augru(Xs, H, lengths, A), want, "augru")


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("n, h, lbr", [(1, 70, False), (1, 64, True), (9, 33, True)])
def test_every_path_gives_the_same_bits(monkeypatch, kernels_run, fmt, n, h, lbr):
    rng = np.random.default_rng(n + h)
    W, R, B = _weights(rng, 1, h, 5, lbr)
    op = fastgru.GRUSequence(W, R, B, linear_before_reset=lbr, weight_dtype=fmt)
    X, h0 = rng.standard_normal((n, 6, 5)).astype(np.float32), rng.standard_normal((n, 1, h)).astype(np.float32)
    lengths = rng.integers(0, 7, n) if n > 1 else np.array([6])
    results = on_every_path(monkeypatch, kernels_run, lambda: op(X, h0, lengths), n == 1)
    for (a_name, a), (b_name, b) in itertools.pairwise(results.items()):
        for got, want in zip(a, b, strict=True):
            np.testing.assert_array_equal(got, want, err_msg=f"{a_name} vs {b_name}")


@pytest.mark.parametrize("fmt", FORMATS)
def test_plans_streams_pools_and_stacks_give_the_bits_of_a_call(fmt):
    rng = np.random.default_rng(4)
    h, i, s = 20, 6, 8
    ops = [
        fastgru.GRUSequence(*_weights(rng, 1, h, i if k == 0 else h, True), linear_before_reset=True, weight_dtype=fmt)
        for k in range(2)
    ]
    X, h0 = rng.standard_normal((1, s, i)).astype(np.float32), np.zeros((1, 1, h), np.float32)
    want = ops[0](X, h0, [s])
    for _ in range(3):  # the plan's calls
        for got, w in zip(ops[0](X, h0, [s]), want, strict=True):
            np.testing.assert_array_equal(got, w)
    stream = ops[0].stream(h0)
    chunks = [stream(X[:, :3]), stream(X[:, 3:])]
    np.testing.assert_array_equal(np.concatenate(chunks, axis=2), want[0])
    pool = fastgru.StatePool(ops[0], capacity=2)
    stream_id = pool.open()
    for t in range(s):
        pool.step([stream_id], X[:, t : t + 1])
    np.testing.assert_array_equal(pool.state(stream_id).reshape(-1), want[1].reshape(-1))
    stack = fastgru.GRUStack(ops)
    layer_1 = ops[1](want[0][:, 0], h0, [s])
    Y, Ho = stack(X, np.zeros((1, 2 * h), np.float32), [s])
    np.testing.assert_array_equal(Y, layer_1[0])
    np.testing.assert_array_equal(Ho[:, h:], layer_1[1][:, 0])


def test_bfloat16_rounding_over_every_float32_high_half():
    """Every bfloat16 (the high half of a float32) with low halves around the rounding point: ties
    to even, |w' - w| <= 2**-8 |w| for normal w (else 2**-134), infinities and NaN kept, overflow only past
    bfloat16's largest finite value plus half its unit."""
    high = np.arange(1 << 16, dtype=np.uint32) << 16
    for low in (0, 1, 0x7FFF, 0x8000, 0x8001, 0xC000, 0xFFFF):
        w = (high | np.uint32(low)).view(np.float32)
        got = rounded_to_bfloat16(w)
        assert not (got.view(np.uint32) & 0xFFFF).any()
        nan = np.isnan(w)
        assert np.isnan(got[nan]).all() and not np.isnan(got[~nan]).any()
        finite = np.isfinite(w)
        w64, g64 = w[finite].astype(np.float64), got[finite].astype(np.float64)
        normal = np.abs(w64) >= 2.0**-126
        with np.errstate(invalid="ignore"):
            err = np.abs(g64 - w64)
        assert (err[normal & np.isfinite(g64)] <= 2.0**-8 * np.abs(w64[normal & np.isfinite(g64)])).all()
        overflow = ~np.isfinite(g64)
        assert (np.abs(w64[overflow]) >= 3.3961775292304e38).all()  # (2 - 2**-8) * 2**127
        assert (np.abs(g64[~normal]) <= 2.0**-126).all() and (err[~normal] <= 2.0**-134).all()
        if low == 0x8000:  # ties: to the even one of the two neighbours
            assert not ((got.view(np.uint32)[finite] >> 16) & 1).any()
        assert (got[np.isinf(w)] == w[np.isinf(w)]).all()


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 6),
    k=st.integers(1, 40),
    exponent=st.integers(-140, 120),
    seed=st.integers(0, 2**32 - 1),
)
def test_int8_rounding_error_is_half_a_scale(rows, k, exponent, seed):
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((rows, k)) * 2.0**exponent).astype(np.float32)
    w[rng.uniform(size=w.shape) < 0.1] = 0
    q, scales = quantized_int8("test", "W", w)
    assert (np.abs(q) <= 127).all() and (q == np.rint(q)).all()
    err = np.abs(q.astype(np.float64) * scales[:, None] - w.astype(np.float64))
    peak = np.abs(w.astype(np.float64)).max(axis=1)
    # s/2, float32's rounding of w/s, and of a subnormal s (127 times its half unit, 2**-150)
    bound = np.where(scales > 0, scales * (0.5 + 2.0**-16) + 2.0**-143, peak)  # s == 0: stored as zeros
    assert (err <= bound[:, None]).all()
    assert (peak[scales == 0] <= 127 * 2.0**-149).all()


def _step_bound(x, H, W, R, B, Wq, Rq, lbr, quantised=False):
    """The stated bound of |H' - H'_exact| for one step with sigmoid and tanh (Lipschitz 1/4 and 1),
    from the weight errors |W' - W| and |R' - R| and, ``quantised`` (int8), the products' A rounded
    to 16 bits per row, |Δa| <= max|a| / 65534 (float64; the units of the step in the last axis)."""
    h = H.shape[-1]
    dW, dR = np.abs(Wq - W), np.abs(Rq - R)
    ax, aH = np.abs(x), np.abs(H)
    steps = (ax.max(initial=0) / 65534, aH.max(initial=0) / 65534) if quantised else (0.0, 0.0)
    qx, qH = (step * (1 + 1e-3) for step in steps)  # and float32's rounding of a / s
    sx, sH = qx * np.abs(Wq).sum(axis=1), qH * np.abs(Rq).sum(axis=1)  # |Σ_k w' Δa_k| per gate unit
    pre = x @ W.T + B[: 3 * h]
    rec = H @ R.T
    z = 1 / (1 + np.exp(-(pre[:h] + rec[:h])))
    r = 1 / (1 + np.exp(-(pre[h : 2 * h] + rec[h : 2 * h])))
    e_zr = ax @ dW[: 2 * h].T + aH @ dR[: 2 * h].T + sx[: 2 * h] + sH[: 2 * h]
    dz, dr = e_zr[:h] / 4, e_zr[h:] / 4
    if lbr:
        rbh = B[3 * h :]
        hh = H @ R[2 * h :].T + rbh
        d_hh = aH @ dR[2 * h :].T + sH[2 * h :]
        d_pre = ax @ dW[2 * h :].T + sx[2 * h :] + r * d_hh + dr * (np.abs(hh) + d_hh)
        cand = np.tanh(pre[2 * h :] + r * hh)
    else:
        rh = r * H  # |r·H| <= |H|: its rounding step is at most H's
        d_pre = ax @ dW[2 * h :].T + (dr * aH) @ (np.abs(R[2 * h :]) + dR[2 * h :]).T + np.abs(rh) @ dR[2 * h :].T
        d_pre += sx[2 * h :] + sH[2 * h :]
        cand = np.tanh(pre[2 * h :] + rh @ R[2 * h :].T)
    exact = (1 - z) * cand + z * H
    return dz * np.abs(H - cand) + (1 - z + dz) * d_pre, exact


@settings(max_examples=40, deadline=None)
@given(
    fmt=st.sampled_from(FORMATS),
    lbr=st.booleans(),
    h=st.integers(1, 48),
    i=st.integers(1, 40),
    scale=st.sampled_from([0.05, 0.3, 1.0, 3.0]),
    seed=st.integers(0, 2**32 - 1),
)
def test_one_step_stays_within_the_stated_bound(fmt, lbr, h, i, scale, seed):
    """|H' - H'_exact| <= the bound of the weights' errors (and int8's quantised activations:
    ``_step_bound``) + float32's own tolerance, on random weights of every scale, against float64
    with the exact weights."""
    rng = np.random.default_rng(seed)
    W, R, B = (a[0] for a in _weights(rng, 1, h, i, lbr, scale))
    x, H = rng.standard_normal((3, i)).astype(np.float32), rng.standard_normal((3, h)).astype(np.float32)
    cell = fastgru.GRUCell(W, R, B, linear_before_reset=lbr, weight_dtype=fmt)
    Wq, Rq = _on_weights_of(cell, W, R)
    got = cell(x, H).astype(np.float64)
    for b in range(3):
        arrays = (a.astype(np.float64) for a in (x[b], H[b], W, R, B, Wq, Rq))
        bound, exact = _step_bound(*arrays, lbr, quantised=fmt == "int8" and INT8_VNNI)
        assert (np.abs(got[b] - exact) <= bound + 2e-6 + 1e-5 * np.abs(exact)).all()


@pytest.mark.parametrize("fmt, limit", [("bfloat16", 1e-2), ("int8", 4e-2)])
def test_a_hundred_steps_on_torch_initialised_weights(fmt, limit):
    """The contract's 100-step figure: torch's initialisation (uniform ±1/sqrt(H)), N(0, 1) inputs,
    batch 4, max |Ho - exact| against float64 on the exact weights."""
    rng = np.random.default_rng(7)
    h, i, s = 256, 256, 100
    W, R, B = _weights(rng, 1, h, i, True)
    op = fastgru.GRUSequence(W, R, B, linear_before_reset=True, weight_dtype=fmt)
    X, h0 = rng.standard_normal((4, s, i)).astype(np.float32), np.zeros((4, 1, h), np.float32)
    lengths = np.full(4, s)
    _, Ho = op(X, h0, lengths)
    _, exact = reference.gru_sequence(
        X.astype(np.float64), h0.astype(np.float64), lengths, W.astype(np.float64), R.astype(np.float64),
        B.astype(np.float64), linear_before_reset=True,
    )  # fmt: skip
    error = np.abs(Ho - exact).max()
    assert 0 < error <= limit


def test_the_default_is_exact_and_says_so():
    rng = np.random.default_rng(5)
    W, R, B = _weights(rng, 1, 16, 8, False)
    plain, explicit = fastgru.GRUSequence(W, R, B), fastgru.GRUSequence(W, R, B, weight_dtype=None)
    X, h0 = rng.standard_normal((2, 4, 8)).astype(np.float32), np.zeros((2, 1, 16), np.float32)
    for a, b in zip(plain(X, h0, [4, 4]), explicit(X, h0, [4, 4]), strict=True):
        np.testing.assert_array_equal(a, b)
    assert plain.weight_dtype == "float32" and "weight_dtype" not in repr(plain)


@pytest.mark.parametrize("fmt, factor", [("bfloat16", 2), ("int8", 4)])
def test_compact_weights_take_fewer_bytes_and_say_so(fmt, factor):
    rng = np.random.default_rng(6)
    W, R, B = _weights(rng, 1, 256, 256, True)
    exact = fastgru.GRUSequence(W, R, B, linear_before_reset=True)
    op = fastgru.GRUSequence(W, R, B, linear_before_reset=True, weight_dtype=fmt)
    assert op.weight_dtype == fmt
    assert exact.weight_bytes / op.weight_bytes == pytest.approx(factor, rel=0.05)
    assert f"weight_dtype={fmt!r}" in repr(op) and "less than float32" in repr(op)
    before = [a.copy() for a in (W, R, B)]
    fastgru.GRUSequence(W, R, B, linear_before_reset=True, weight_dtype=fmt)
    for a, b in zip((W, R, B), before, strict=True):  # the caller's arrays are only read
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "weight_dtype, message",
    [
        ("float16", "weight_dtype must be None, 'bfloat16', 'int8' or 'bfloat16x3'; got 'float16'"),
        (8, "weight_dtype must be None, 'bfloat16', 'int8' or 'bfloat16x3'; got 8"),
    ],
)
def test_bad_weight_dtypes_are_refused(weight_dtype, message):
    W, R, B = _weights(np.random.default_rng(0), 1, 4, 3, False)
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        fastgru.GRUSequence(W, R, B, weight_dtype=weight_dtype)


def test_float64_and_non_finite_int8_weights_are_refused():
    W, R, B = _weights(np.random.default_rng(0), 1, 4, 3, False)
    with pytest.raises(ValueError, match="weight_dtype='bfloat16' computes in float32; the weights are float64"):
        fastgru.GRUCell(W[0].astype(np.float64), R[0].astype(np.float64), weight_dtype="bfloat16")
    R[0, 5, 1] = np.nan
    with pytest.raises(ValueError, match="weight_dtype='int8' needs finite weights; R has 1 infinite or NaN"):
        fastgru.GRUSequence(W, R, B, weight_dtype="int8")
    op = fastgru.GRUSequence(W, R, B, weight_dtype="bfloat16")  # bfloat16 keeps NaN, as float32 does
    assert np.isnan(op(np.ones((1, 2, 3), np.float32), np.zeros((1, 1, 4), np.float32), [2])[1]).any()


_WARMUP = textwrap.dedent("""
    import numpy as np, fastgru
    from fastgru._kernels import drivers
    def weights():  # the drivers' callbacks compiled or loaded, by weights dtype
        done = drivers.compiled()
        return [sorted(w for d, w in done if d == driver) for driver in ("serial", "parallel", "split", "pair")]
    before = weights()
    fastgru.warmup(ops="gru_sequence", weight_dtypes=["bfloat16", "int8", None])
    print(before, weights())
""")


def test_warmup_compiles_the_kernels_of_compact_weights():
    """In a fresh process: every path's kernel for bfloat16 (uint16) and int8 weights, and float32's."""
    done = subprocess.run([sys.executable, "-c", _WARMUP], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    every = "['float32', 'int8', 'uint16']"
    assert done.stdout.strip() == f"[[], [], [], []] [{every}, {every}, {every}, {every}]"


@functools.cache
def _tile_runner(mr, n_panels):
    """``tile_fma`` on one tile of ``mr`` rows and ``n_panels`` panels, compiled once per tile for all
    the cases (the tile's sizes are constants of the compiled function, as tile_fma needs)."""
    from numba import njit

    from fastgru._isa import GEOMETRY
    from fastgru._kernels.microkernel import tile_fma

    nv = GEOMETRY.panel_vectors
    zero = np.int64(0)
    return njit(lambda c, ldc, a, b, stride, k: tile_fma(c, a, b, (zero, ldc, zero, zero, stride, k), mr, n_panels, nv))


@pytest.mark.parametrize("k_len", [1, 2, 6, 7, 36, 257, 258, 600])
@pytest.mark.parametrize("special", [None, np.inf, np.nan])
def test_int8_products_quantise_each_row_as_stated(k_len, special):
    """The micro-kernel's int8 products, tile by tile, against NumPy doing what ``tile_fma`` states:
    A's rows quantised to 16 bits by their own peak over the pairs of rows, integer sums of at most
    INT8_PAIRS_PER_SUM pairs, a last odd row in float32, and float32 throughout for a row with an
    infinite or NaN element (inside the pairs), the other rows of its tile unchanged."""
    if not INT8_VNNI:
        pytest.skip("int8 weights are widened to float32 on this target (INT8_VNNI is for AVX-512 with VNNI)")

    from fastgru._isa import GEOMETRY
    from fastgru._kernels.microkernel import INT8_PAIRS_PER_SUM, int8_head, int8_panels, lanes

    nv = GEOMETRY.panel_vectors
    nr = nv * lanes(np.dtype(np.float32))
    rng = np.random.default_rng(k_len)
    for mr, n_panels in GEOMETRY.tiles:
        run = _tile_runner(mr, n_panels)
        q = rng.integers(-127, 128, (n_panels, k_len, nr)).astype(np.int8)
        scales = rng.uniform(1e-3, 1e-2, (n_panels, nr)).astype(np.float32)
        stride = int8_head(k_len) * nr + k_len * nr
        b = int8_panels(q.reshape(n_panels, -1), scales, k_len, nr)
        assert b.shape == (n_panels, stride)
        a = (rng.standard_normal((k_len, mr)) * rng.uniform(0.1, 10, mr)).astype(np.float32)
        if special is not None and k_len > 1:
            a[rng.integers(0, k_len - k_len % 2), rng.integers(0, mr)] = special
        c0 = rng.standard_normal((mr, n_panels * nr)).astype(np.float32)
        c = c0.copy()
        run(c.reshape(-1), n_panels * nr, a.reshape(-1), b.reshape(-1), stride, k_len)
        even = k_len - k_len % 2
        weights = q.transpose(1, 0, 2).reshape(k_len, -1).astype(np.float64)
        want = c0.astype(np.float64)
        peaks = np.abs(a[:even]).max(axis=0) if even else np.zeros(mr, np.float32)
        for r in range(mr):
            if np.isfinite(peaks[r]):
                inverse = np.float32(32767) / peaks[r] if peaks[r] > 0 else np.float32(0)
                qa = np.rint(a[:even, r] * inverse).astype(np.int64)
                step = peaks[r] / np.float32(32767)
                for u0 in range(0, even // 2, INT8_PAIRS_PER_SUM):
                    rows = slice(2 * u0, min(even, 2 * (u0 + INT8_PAIRS_PER_SUM)))
                    want[r] += (qa[rows] @ weights[rows].astype(np.int64)) * np.float64(step) * scales.reshape(-1)
                products = a[even:, r].astype(np.float64) @ weights[even:]
            else:
                with np.errstate(invalid="ignore"):  # inf times a zero weight
                    products = a[:, r].astype(np.float64) @ weights
            with np.errstate(invalid="ignore"):
                want[r] += products * scales.reshape(-1)
        # float32's rounding of the sums, relative to their terms' magnitudes
        with np.errstate(invalid="ignore"):
            size = np.abs(c0) + (np.abs(a.T).astype(np.float64) @ np.abs(weights)) * scales.reshape(-1)
        assert np.array_equal(np.isnan(c), np.isnan(want)), f"tile {mr}x{n_panels}: NaN elsewhere"
        finite = np.isfinite(want)
        assert np.array_equal(c[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)]), f"tile {mr}x{n_panels}"
        assert (np.abs(c[finite] - want[finite]) <= 1e-6 * size[finite]).all(), f"tile {mr}x{n_panels}"


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_row_with_an_infinity_leaves_the_other_rows_bits_alone(fmt):
    """A row's result depends on that row alone, whatever tile it shares: with an infinite input in
    one row of the batch, every other row gives the bits it gives on its own (int8 multiplies a
    non-finite row in float32, and only that row)."""
    rng = np.random.default_rng(11)
    h, i, s, n = 24, 10, 5, 9
    W, R, B = _weights(rng, 1, h, i, False)
    op = fastgru.GRUSequence(W, R, B, weight_dtype=fmt)
    X, h0 = rng.standard_normal((n, s, i)).astype(np.float32), rng.standard_normal((n, 1, h)).astype(np.float32)
    X[3, 2, 4] = np.inf
    Y, Ho = op(X, h0, np.full(n, s))
    for b in (0, 2, 4, 8):
        Yb, Hob = op(X[b : b + 1], h0[b : b + 1], [s])
        np.testing.assert_array_equal(Y[b : b + 1], Yb, err_msg=f"row {b}")
        np.testing.assert_array_equal(Ho[b : b + 1], Hob, err_msg=f"row {b}")
