"""float32 sigmoid and tanh within 4 ulp of the correctly rounded value, over every float32 input.

An error in ulp is the distance between the result and the float64 value rounded to float32 in
steps from one float32 to the next, so that below 2**-126 a unit is 2**-149, the subnormals'
spacing.

- ``test_every_float32`` runs the kernels' own ``activate`` over all 2**32 bit patterns, in chunks on
  two Python threads (``activate`` releases the GIL), and checks each result in a compiled checker.
- ``test_through_the_ops`` runs gru_cell, gru_sequence and augru_sequence with weights that make
  their outputs exactly sigmoid or tanh of their inputs, and checks those on a sample.
- ``test_without_the_jit`` checks the pure-Python form (what runs with NUMBA_DISABLE_JIT=1) on a
  sample.

``python tests/test_activations.py`` prints the exhaustive table for whichever fastgru is on the path.
"""

import math
import time
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
import pytest
from conftest import show_lines

import fastgru
from fastgru import _config
from fastgru._kernels import activations
from fastgru._kernels.activations import SIGMOID, TANH, activate

#: The bound the float32 activations promise, in ulp.
MAX_ULP = 4

#: Positive bit patterns per chunk of the exhaustive test; each chunk also covers their negatives.
CHUNK = 1 << 16

#: The functions checked, in the order of the checker's tables.
FUNCTIONS = ("sigmoid", "tanh")

#: The exhaustive checker's table has one slot per biased float32 exponent of the input, and this
#: one more for the inputs whose correctly rounded result is subnormal or zero.
TINY_RESULTS = 256

#: The checker's compilation: as the kernels' (no GIL, cached where fastgru caches), without fast-math.
_jit = _config.kernel(exact=True)
needs_jit = pytest.mark.skipif(numba.config.DISABLE_JIT, reason="2**32 inputs take hours without the JIT")


def reference(x):
    """(sigmoid(x), tanh(x)) of a float32 array, in float64, each a few float64 units from the exact value."""
    x = np.asarray(x, np.float64)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1, e) / (1 + e), np.tanh(x)


def ulp_errors(got, want):
    """|got - want| in float32 steps, elementwise: got a float32 array, want a float64 one (rounded
    to float32 here)."""
    return np.abs(_positions(np.asarray(got, np.float32)) - _positions(np.asarray(want).astype(np.float32)))


def _positions(x):
    """Each float32's position on the number line, as int64 (+0 and -0 both at 0)."""
    bits = x.view(np.uint32).astype(np.int64)
    return np.where(bits < 0x80000000, bits, 0x80000000 - bits)


@_jit
def _fill(x, sig, tnh, start):
    """x[i] = the float32 of bit pattern start + i; sig and tnh = x followed by -x."""
    n = x.size
    u, s, t = x.view(np.uint32), sig.view(np.uint32), tnh.view(np.uint32)
    for i in range(n):
        b = np.uint32(start + i)
        u[i] = s[i] = t[i] = b
        s[n + i] = t[n + i] = b | np.uint32(0x80000000)


@_jit
def _position(bits):
    """_positions for one float32's bits."""
    b = np.int64(bits)
    return b if b < 0x80000000 else 0x80000000 - b


@_jit
def _reference(a):
    """(sigmoid(a), sigmoid(-a), tanh(a)) in float64 for a float64 a in [2**-12, 104), each within a
    few float64 units of the exact value, far below the float32 rounding applied to them."""
    e = math.exp(-a)
    return 1.0 / (1.0 + e), e / (1.0 + e), math.tanh(a)


@_jit
def _references(x, want_s, want_t):
    """want_s, want_t = sigmoid and tanh of x followed by -x, correctly rounded from float64, for
    finite x >= 0 in one binade (a chunk of _fill).

    Below 2**-12, Taylor polynomials (remainders under 2**-52 relative, written out so that the
    loop vectorises); from 104 on, the values, which round to 1, 0 and 1 in float32 (e**-104 is
    below 2**-150, half the least subnormal; tanh(a) rounds to 1 from 13 ln 2 = 9.01); libm in between.
    """
    n = x.size
    if x[n - 1] < 2.0**-12:
        for i in range(n):
            a = np.float64(x[i])
            e = 1.0 - a * (1.0 - a * (0.5 - a * (1.0 / 6.0)))  # e**-a; remainder a**4 / 24
            t = a * (1.0 - a * a * ((1.0 / 3.0) - a * a * (2.0 / 15.0)))  # remainder 17 a**7 / 315
            want_s[i], want_s[n + i] = np.float32(1.0 / (1.0 + e)), np.float32(e / (1.0 + e))
            want_t[i], want_t[n + i] = np.float32(t), np.float32(-t)
        return
    for i in range(n):
        if x[i] < 104:
            sp, sn, t = _reference(np.float64(x[i]))
        else:
            sp, sn, t = 1.0, 0.0, 1.0
        want_s[i], want_s[n + i] = np.float32(sp), np.float32(sn)
        want_t[i], want_t[n + i] = np.float32(t), np.float32(-t)


@_jit
def _error(got, want):
    """|got - want| in ulp, for float32 bits (uint32)."""
    return abs(_position(got) - _position(want))


@_jit
def _largest_errors(s, t, ws, wt):
    """The largest errors in ulp of a chunk (see _fill and _references; float32 bits): sigmoid at
    x >= 0, at x < 0, tanh at x >= 0, at x < 0, and sigmoid at x < 0 where its value is below
    2**-126. One pass, which LLVM vectorises."""
    n = s.size // 2
    sp = sn = tp = tn = tiny = 0
    for i in range(n):
        sp = max(sp, _error(s[i], ws[i]))
        err = _error(s[n + i], ws[n + i])
        sn = max(sn, err)
        tiny = max(tiny, 0 if ws[n + i] & 0x7F800000 else err)
        tp = max(tp, _error(t[i], wt[i]))
        tn = max(tn, _error(t[n + i], wt[n + i]))
    return sp, sn, tp, tn, tiny


@_jit
def _first(got, want, lo, hi, err, tiny):
    """The first index in [lo, hi) with this error (and a value below 2**-126 with ``tiny``)."""
    for i in range(lo, hi):
        if _error(got[i], want[i]) == err and not (tiny and want[i] & 0x7F800000):
            return i
    return lo


@_jit
def _check(start, x, sig, tnh, want_s, want_t, worst, where, broken):
    """Compare one chunk's activate results (see _fill) with the references.

    worst[f, sign, slot] is the largest error in ulp of function f (0 sigmoid, 1 tanh) over the
    inputs of that sign (0 for +) and biased float32 exponent (the slot), or over those with a
    subnormal or zero correctly rounded result (slot TINY_RESULTS, sigmoid only); where[f, sign,
    slot] holds the bits of an input with that error. broken[f] counts the results that miss an
    exact value: NaN for NaN, sigmoid(-inf) = 0, sigmoid(inf) = 1, tanh(+-inf) = +-1, tanh(+-0) = +-0.
    """
    n = x.size
    s, t = sig.view(np.uint32), tnh.view(np.uint32)
    exponent = start >> 23  # one binade per chunk
    if exponent == 255:  # inf, then NaN
        for i in range(n):
            if x[i] == np.inf:
                broken[0] += (s[i] != 0x3F800000) + (s[n + i] != 0)
                broken[1] += (t[i] != 0x3F800000) + (t[n + i] != 0xBF800000)
            else:
                broken[0] += (sig[i] == sig[i]) + (sig[n + i] == sig[n + i])
                broken[1] += (tnh[i] == tnh[i]) + (tnh[n + i] == tnh[n + i])
        return
    if start == 0:
        broken[1] += (t[0] != 0) + (t[n] != 0x80000000)
    _references(x, want_s, want_t)
    ws, wt = want_s.view(np.uint32), want_t.view(np.uint32)
    largest = _largest_errors(s, t, ws, wt)
    for k in range(5):
        f, sign, slot = (k // 2, k % 2, exponent) if k < 4 else (0, 1, TINY_RESULTS)
        if largest[k] > worst[f, sign, slot]:
            got, want = (s, ws) if f == 0 else (t, wt)
            i = _first(got, want, sign * n, sign * n + n, largest[k], slot == TINY_RESULTS)
            worst[f, sign, slot] = largest[k]
            where[f, sign, slot] = (start + i - sign * n) | (sign << 31)


def sweep(first=0, last=1 << 31, threads=2):
    """Run activate over the positive bit patterns [first, last) and their negatives, in chunks on
    ``threads`` Python threads; returns (worst, where, broken) as _check fills them, merged."""
    starts = range(first, last, CHUNK)

    def run(part):
        x = np.empty(CHUNK, np.float32)
        sig, tnh = np.empty(2 * CHUNK, np.float32), np.empty(2 * CHUNK, np.float32)
        want_s, want_t = np.empty_like(sig), np.empty_like(tnh)
        worst, where = np.zeros((2, 2, TINY_RESULTS + 1), np.int64), np.zeros((2, 2, TINY_RESULTS + 1), np.int64)
        broken = np.zeros(2, np.int64)
        for start in starts[part::threads]:
            n = min(CHUNK, last - start)
            _fill(x[:n], sig[: 2 * n], tnh[: 2 * n], start)
            activate(sig, 0, 2 * n, SIGMOID)
            activate(tnh, 0, 2 * n, TANH)
            _check(start, x[:n], sig[: 2 * n], tnh[: 2 * n], want_s[: 2 * n], want_t[: 2 * n], worst, where, broken)
        return worst, where, broken

    with ThreadPoolExecutor(threads) as pool:
        parts = list(pool.map(run, range(threads)))
    worst = np.max([p[0] for p in parts], axis=0)
    where = np.zeros_like(worst)
    for w, at, _ in reversed(parts):
        where = np.where(w == worst, at, where)
    return worst, where, sum(p[2] for p in parts)


#: Rows of the table: (label, first exponent slot, last exponent slot + 1).
RANGES = [
    ("|x| < 2**-126 (subnormal)", 0, 1),
    ("2**-126 <= |x| < 2**-12", 1, 115),
    ("2**-12 <= |x| < 1", 115, 127),
    ("1 <= |x| < 16", 127, 131),
    ("16 <= |x| < 128", 131, 134),
    ("|x| >= 128", 134, 255),
]


def table(worst, where):
    """Lines: the largest error in ulp per function, sign and range of x, with the first x that has it."""

    def line(name, label, text, f, sign, slot):
        at = np.uint32(where[f, sign, slot]).view(np.float32)
        seen = f"max {worst[f, sign, slot]} ulp, at x = {at:.9g}" if worst[f, sign, slot] else "exact"
        return f"{name:8} {label:7} {text:33} {seen}"

    lines = []
    for f, name in enumerate(FUNCTIONS):
        for sign, label in ((1, "x < 0"), (0, "x >= 0")):
            for text, lo, hi in RANGES:
                lines.append(line(name, label, text, f, sign, lo + int(np.argmax(worst[f, sign, lo:hi]))))
            if f == 0 and sign == 1:
                lines.append(line(name, label, "sigmoid(x) < 2**-126 (x < -87.3)", f, sign, TINY_RESULTS))
    return lines


@needs_jit
def test_every_float32(request):
    began = time.perf_counter()
    worst, where, broken = sweep()
    seconds = time.perf_counter() - began
    lines = table(worst, where)
    show_lines(request, [f"float32 activations over all 2**32 inputs, in {seconds:.1f} s:", *lines])
    for f, name in enumerate(FUNCTIONS):
        assert broken[f] == 0, f"{name}: {broken[f]} results miss an exact limit, NaN or signed zero"
        assert worst[f].max() <= MAX_ULP, "\n".join(lines)


def sample(rng, n):
    """About n float32 and their negatives, for the sampled tests: random bit patterns (finite),
    every range of the exhaustive table, sigmoid's subnormal results (87.3 < |x| < 104), and the
    formulas' boundaries (where n, 2**n - 1 or 2**n + 1 change, the clamps)."""
    bits = rng.integers(0, 1 << 32, n // 4, dtype=np.uint64).astype(np.uint32).view(np.float32)
    parts = [
        bits[np.isfinite(bits)],
        rng.uniform(-110, 110, n // 4),
        rng.standard_normal(n // 4) * 4,
        rng.uniform(-104, -87, n // 8),
        np.ldexp(rng.uniform(-1, 1, n // 8), rng.integers(-149, 2, n // 8)),
        [0, 0.1733, 0.3466, 8.32, 9.01, 10, 16.6, 87.34, 103.97, 104, 2.0**-149],
    ]
    x = np.concatenate([np.asarray(p, np.float32) for p in parts])
    return np.concatenate([x, -x])


def _gate_weights(hidden_size, lbr=False):
    """W, R, B that make an op's output g(X): the z gate's pre-activation is -200 (f = sigmoid gives
    z = 0 exactly), the r gate's and the recurrence's contributions are zero, and the h gate's
    pre-activation is X itself (input_size = hidden_size), so that H' = (1 - z) h + z H = h = g(X)
    to the bit."""
    H = hidden_size
    W = np.zeros((3 * H, H), np.float32)
    W[2 * H :] = np.eye(H, dtype=np.float32)
    B = np.zeros((4 if lbr else 3) * H, np.float32)
    B[:H] = -200
    return W, np.zeros((3 * H, H), np.float32), B


#: Time steps of the sequences in test_through_the_ops.
STEPS = 4


def _outputs(op, g, x):
    """``op``'s outputs for the rows of ``x`` (hidden_size values each, a multiple of STEPS rows),
    with _gate_weights: g(x), computed by the op's kernels, in the same shape."""
    rows, H = x.shape
    lbr = op.endswith("-lbr")
    W, R, B = _gate_weights(H, lbr)
    g_of = {"activations": ("sigmoid", g)}
    if op == "gru_cell-batch1":
        return np.concatenate([fastgru.gru_cell(row[None], np.zeros_like(row[None]), W, R, B, **g_of) for row in x])
    if op == "gru_cell":
        return fastgru.gru_cell(x, np.zeros_like(x), W, R, B, **g_of)
    X = x.reshape(-1, STEPS, H)
    n = X.shape[0]
    lengths = np.full(n, STEPS)
    if op == "augru_sequence":  # sigmoid and tanh; z' = (1 - a) z = 0
        A = np.full((n, STEPS, 1), 0.5, np.float32)
        Y, _ = fastgru.augru_sequence(X, np.zeros((n, H), np.float32), lengths, W, R, B, A)
    else:
        h0 = np.zeros((n, 1, H), np.float32)
        Y, _ = fastgru.gru_sequence(X, h0, lengths, W[None], R[None], B[None], linear_before_reset=lbr, **g_of)
    return Y.reshape(rows, H)


@pytest.mark.parametrize(
    ("op", "g"),
    [(op, g) for op in ("gru_cell-batch1", "gru_cell", "gru_sequence", "gru_sequence-lbr") for g in FUNCTIONS]
    + [("augru_sequence", "tanh")],
)
def test_through_the_ops(op, g, rng):
    """The ops' kernels compute the activations to the same bound (on a sample)."""
    H = 8 if numba.config.DISABLE_JIT else 512  # pure Python: small and few
    x = sample(rng, 8 * H if numba.config.DISABLE_JIT else 64 * H)
    x = np.concatenate([x, np.zeros(-x.size % (STEPS * H), np.float32)]).reshape(-1, H)
    if op == "gru_cell-batch1":
        x = x[:STEPS]
    got = _outputs(op, g, x)
    err = ulp_errors(got, reference(x)[FUNCTIONS.index(g)])
    worst = np.unravel_index(err.argmax(), err.shape)
    assert err.max() <= MAX_ULP, f"{err.max()} ulp at x = {x[worst]!r}: {g} = {got[worst]!r}"


def test_exact_values_through_the_kernel():
    x = np.array([-np.inf, np.inf, np.nan, -np.nan, -0.0, 0.0, -1e30, 1e30, -104, 104], np.float32)
    s, t = x.copy(), x.copy()
    activate(s, 0, x.size, SIGMOID)
    activate(t, 0, x.size, TANH)
    np.testing.assert_array_equal(s, [0, 1, np.nan, np.nan, 0.5, 0.5, 0, 1, 0, 1])
    np.testing.assert_array_equal(t, [-1, 1, np.nan, np.nan, 0, 0, -1, 1, -1, 1])
    assert np.signbit(t[4]) and not np.signbit(t[5])
    # z = sigmoid(-inf) = 0 exactly: H' = (1 - z) h + z H forgets even the largest state.
    H = 4
    W, R, B = np.zeros((3 * H, 1), np.float32), np.zeros((3 * H, H), np.float32), np.zeros(3 * H, np.float32)
    B[:H] = -np.inf
    Ho = fastgru.gru_cell(np.zeros((1, 1), np.float32), np.full((1, H), 3e38, np.float32), W, R, B)
    np.testing.assert_array_equal(Ho, 0)


def test_without_the_jit(rng):
    """The pure-Python form, which NUMBA_DISABLE_JIT=1 runs: within the bound, same limits."""
    x = sample(rng, 4000)
    want_s, want_t = reference(x)
    for fn, want in ((activations.sigmoid, want_s), (activations.tanh, want_t)):
        got = np.array([fn(v) for v in x], np.float32)
        assert ulp_errors(got, want).max() <= MAX_ULP, fn.__name__
    special = np.array([-np.inf, np.inf, np.nan, -0.0], np.float32)
    np.testing.assert_array_equal([activations.sigmoid(v) for v in special], [0, 1, np.nan, 0.5])
    np.testing.assert_array_equal([activations.tanh(v) for v in special], [-1, 1, np.nan, -0.0])
    assert np.signbit(activations.tanh(np.float32(-0.0)))


if __name__ == "__main__":
    began = time.perf_counter()
    worst, where, broken = sweep()
    print("\n".join(table(worst, where)))
    print(f"exact values missed: sigmoid {broken[0]}, tanh {broken[1]}; {time.perf_counter() - began:.1f} s")
