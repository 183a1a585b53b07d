"""The matrix tiles' twins (fastgru/_kernels/tiles.py): the instruction against exact arithmetic,
the tile schedule (packing, the loops, the tails of M, N and K) against the instruction applied
element by element, and the products' error bounds, on every CPU."""

import math
from fractions import Fraction

import llvmlite.binding as llvm
import numpy as np
import pytest

from fastgru import _isa, reference
from fastgru._cli import info
from fastgru._compact import rounded_to_bfloat16
from fastgru._kernels import tiles
from fastgru._validate import FastGRUError

_MIN_NORMAL = Fraction(2) ** -126


def _rounded_to_float32(q):
    """The rational q rounded once to float32, to nearest even (subnormals on their grid, overflow
    to infinity), then flushed to zero when below float32's smallest normal: the tile's rule."""
    if q == 0:
        return np.float32(0.0)
    exponent = max(math.floor(math.log2(abs(q))), -126)
    if Fraction(2) ** exponent > abs(q):  # log2's float rounding
        exponent -= 1
    elif Fraction(2) ** (exponent + 1) <= abs(q):
        exponent += 1
    ulp = Fraction(2) ** (max(exponent, -126) - 23)
    value = round(q / ulp) * ulp  # Fraction rounds half to even
    if abs(value) >= Fraction(2) ** 128:
        return np.float32(math.copysign(math.inf, q))
    if abs(value) < _MIN_NORMAL:
        return np.float32(math.copysign(0.0, q))
    return np.float32(float(value))


def _bf16(bits):
    """bfloat16 bits as float32, a denormal as zero of its sign."""
    bits = int(bits) & 0xFFFF
    if bits & 0x7F80 == 0:
        bits &= 0x8000
    return np.uint32(bits << 16).view(np.float32)


def _random_bf16(rng, n, low=-133, high=127):
    """n bfloat16 bit patterns with exponents spread over [low, high] (denormals and zeros among them)."""
    sign = rng.integers(0, 2, n) << 15
    exponent = np.clip(rng.integers(low, high + 1, n) + 127, 0, 254) << 7
    return (sign | exponent | rng.integers(0, 128, n)).astype(np.uint16)


@np.errstate(over="ignore", invalid="ignore")  # NumPy's warnings where the kernels run as Python
def test_accumulate_rounds_once_and_flushes_denormals():
    rng = np.random.default_rng(1)
    a, b = _random_bf16(rng, 4000), _random_bf16(rng, 4000)
    c = np.concatenate([_random_bf16(rng, 4000, -150, 127).astype(np.uint32) << 16]).view(np.float32)
    c[::7] = rng.standard_normal(c[::7].size).astype(np.float32)  # full float32 significands
    c[::11] = np.uint32(0x00400000).view(np.float32)  # a denormal C counts as zero
    checked = 0
    for ci, ai, bi in zip(c, a, b):
        if not (math.isfinite(ci) and math.isfinite(_bf16(ai)) and math.isfinite(_bf16(bi))):
            continue
        product = Fraction(float(_bf16(ai))) * Fraction(float(_bf16(bi)))
        flushed_c = Fraction(0) if abs(Fraction(float(ci))) < _MIN_NORMAL else Fraction(float(ci))
        got = np.float32(tiles.accumulate(tiles.flushed(ci), ai, bi))
        want = _rounded_to_float32(flushed_c + product)
        if flushed_c + product == 0:  # an exact zero: its sign is IEEE's, not checked here
            assert got == 0
        else:
            assert got.view(np.uint32) == want.view(np.uint32), (ci, ai, bi)
        checked += 1
    assert checked > 3000


def test_accumulate_near_halfway_cases():
    # c + a·b exactly halfway between two float32 (ties to even) and just off it: a product with
    # bits far below c's last one, where rounding twice could go wrong.
    one = np.float32(1.0)
    for c, a, b in [
        (one, 0x3380, 0x3F80),  # 1 + 2**-24: a tie, to even (1)
        (np.float32(1.0000001), 0x3380, 0x3F80),  # 1 + 2**-23 + 2**-24: a tie, to even (1 + 2**-22)
        (one, 0x3381, 0x3F80),  # just above the tie: up
        (one, 0x2F80, 0x3F80),  # 1 + 2**-32: down
        (np.float32(-1.0), 0x3381, 0x3F80),
    ]:
        product = Fraction(float(_bf16(a))) * Fraction(float(_bf16(b)))
        assert np.float32(tiles.accumulate(c, a, b)) == _rounded_to_float32(Fraction(float(c)) + product)


@np.errstate(over="ignore", invalid="ignore")  # NumPy's warnings where the kernels run as Python
def test_accumulate_specials():
    inf, nan = 0x7F80, 0x7FC0
    assert tiles.accumulate(np.float32(1), inf, 0x3F80) == np.inf
    assert np.isnan(tiles.accumulate(np.float32(1), inf, 0))
    assert np.isnan(tiles.accumulate(np.float32(1), nan, 0x3F80))
    assert tiles.accumulate(np.float32(3e38), 0x7F00, 0x4000) == np.inf  # overflow
    assert tiles.accumulate(np.float32(0), 0x0040, 0x3F80) == 0  # a denormal operand counts as zero
    tiny = tiles.accumulate(np.float32(0), 0x0100, 0x3F00)  # 2**-125 · 0.5 = 2**-126: normal
    assert tiny == np.float32(2.0**-126)
    assert tiles.accumulate(np.float32(0), 0x0080, 0x3F00) == 0  # 2**-127: flushed
    assert np.signbit(tiles.accumulate(np.float32(0), 0x8080, 0x3F00))  # to zero of its sign


def test_split_keeps_sixteen_bits():
    rng = np.random.default_rng(2)
    a = (rng.standard_normal((5, 300)) * np.exp2(rng.integers(-100, 100, (5, 300)))).astype(np.float32)
    hi, lo = tiles.split_rows(a, 302)
    assert not hi[:, 300:].any() and not lo[:, 300:].any()
    hi_v = np.vectorize(_bf16)(hi[:, :300]).astype(np.float64)
    lo_v = np.vectorize(_bf16)(lo[:, :300]).astype(np.float64)
    np.testing.assert_array_equal(hi_v.astype(np.float32), rounded_to_bfloat16(a))
    assert (np.abs(hi_v + lo_v - a) <= 2.0**-17 * np.abs(a)).all()


def test_split_specials():
    big = np.float32(3.4e38)  # rounds to infinity as a bfloat16: truncated instead
    a = np.array([[np.inf, -np.inf, np.nan, big, -0.0, 0.0]], np.float32)
    hi, lo = tiles.split_rows(a, 6)
    assert list(hi[0, :2]) == [0x7F80, 0xFF80] and np.isnan(_bf16(hi[0, 2]))
    assert not lo[0, :3].any()
    assert np.isfinite(_bf16(hi[0, 3])) and abs(float(_bf16(hi[0, 3])) + float(_bf16(lo[0, 3])) - big) <= 2.0**-16 * big
    assert list(hi[0, 4:]) == [0x8000, 0]


def test_pack_layout():
    bits = np.arange(7 * 37, dtype=np.uint16).reshape(7, 37)
    packed = tiles.pack(bits)
    assert packed.shape == (3, 4, 16, 2)
    for t, p, j, e in np.ndindex(packed.shape):
        k, n = 2 * p + e, 16 * t + j
        assert packed[t, p, j, e] == (bits[k, n] if k < 7 and n < 37 else 0)


def _schedule_reference(c, terms, k_len):
    """What ``tiles.product`` must compute, element by element: for each tile of 16 pairs of K, each
    term's instruction in turn on C's incoming value, from the unpacked operands."""
    out = c.copy()
    pairs = -(-k_len // 2)
    for r, j in np.ndindex(c.shape):
        acc = out[r, j]
        for p0 in range(0, pairs, 16):
            for a, b in terms:  # a (M, 2·pairs) bits, b (K padded to 2·pairs, N) bits
                acc = tiles.flushed(acc)
                for k in range(2 * p0, 2 * min(p0 + 16, pairs)):
                    acc = tiles.accumulate(acc, a[r, k], b[k, j])
        out[r, j] = acc
    return out


@pytest.mark.parametrize(
    ("rows", "columns", "k_len"), [(1, 1, 1), (16, 16, 32), (17, 15, 33), (33, 40, 65), (5, 33, 2)]
)
def test_product_schedule_and_tails(rows, columns, k_len):
    rng = np.random.default_rng(rows * 1000 + columns * 10 + k_len)
    a = rng.standard_normal((rows, k_len)).astype(np.float32)
    w = rng.standard_normal((k_len, columns)).astype(np.float32)
    c = rng.standard_normal((rows, columns)).astype(np.float32)
    pairs = -(-k_len // 2)
    hi, lo = tiles.split_rows(a, 2 * pairs)
    w_hi, w_lo = (np.pad(half.T, ((0, 2 * pairs - k_len), (0, 0))) for half in tiles.split_rows(w.T, k_len))
    got = c.copy()
    tiles.product(got, ((hi, tiles.pack(w_hi)), (hi, tiles.pack(w_lo)), (lo, tiles.pack(w_hi))))
    want = _schedule_reference(c, ((hi, w_hi), (hi, w_lo), (lo, w_hi)), k_len)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_rows_do_not_depend_on_the_rows_beside_them():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((40, 70)).astype(np.float32)
    w = rounded_to_bfloat16(rng.standard_normal((70, 50)).astype(np.float32))
    whole = tiles.matmul(a, w, 2)
    for start, stop in [(0, 1), (3, 20), (17, 40)]:
        np.testing.assert_array_equal(tiles.matmul(a[start:stop], w, 2), whole[start:stop])


def _bound(a, w, terms_per_k, split_error):
    """|A·W - tiles| ≤ (split_error + (terms_per_k·K + 2)·2⁻²⁴·(1 + 2⁻⁸))·|A|·|W|: the operands'
    splits, then one rounding per accumulation (the sums of at most terms_per_k·K terms)."""
    k = a.shape[1]
    return (split_error + (terms_per_k * k + 2) * 2.0**-24 * (1 + 2.0**-8)) * (np.abs(a) @ np.abs(w))


@pytest.mark.parametrize("scale", [1.0, 3.0, 1e-3])
def test_product_bounds(scale):
    rng = np.random.default_rng(4)
    a = rng.standard_normal((20, 300)).astype(np.float32)
    w = (rng.uniform(-1, 1, (300, 40)) * scale / math.sqrt(300)).astype(np.float32)
    exact = a.astype(np.float64) @ w.astype(np.float64)
    three = tiles.matmul(a, w, 3)
    # A and W each to 2⁻¹⁷ of themselves, and lo·lo (2⁻⁹·2⁻⁹) left out.
    assert (np.abs(three - exact) <= _bound(a, w, 3, 2 * 2.0**-17 + 2.0**-18 + 2.0**-34)).all()
    w_bf16 = rounded_to_bfloat16(w)
    two = tiles.matmul(a, w_bf16, 2)
    exact_bf16 = a.astype(np.float64) @ w_bf16.astype(np.float64)
    assert (np.abs(two - exact_bf16) <= _bound(a, w_bf16, 2, 2.0**-17)).all()


def test_matmul_refuses_what_it_cannot_do():
    a, w = np.ones((2, 3), np.float32), np.full((3, 2), 1.1, np.float32)
    with pytest.raises(ValueError, match="passes=2 needs B rounded to bfloat16"):
        tiles.matmul(a, w, 2)
    with pytest.raises(ValueError, match="passes is 4; expected 2 or 3"):
        tiles.matmul(a, w, 4)


def _tile_product(passes):
    """reference._product replaced by the tiles' (rows as 2-D, in float32)."""

    def product(x, w):
        x2 = np.atleast_2d(x).astype(np.float32)
        return tiles.matmul(x2, np.asarray(w, np.float32), passes).reshape(np.shape(x)[:-1] + (w.shape[1],))

    return product


def gru_errors(n, steps, inputs, hidden, scale=1.0, seed=0):
    """max |Ho - exact| of a forward GRUSequence (weights and bias uniform in ±scale/√H, X standard
    normal, H0 zero) for float32, the tiles' three-pass mode, bfloat16 weights as the vector kernels
    compute them, and bfloat16 weights on the tiles (two passes); exact: the float64 sequence.
    (benchmarks/tile_errors.py measures the benchmark's shapes with it.)"""
    rng = np.random.default_rng(seed)
    bound = scale / math.sqrt(hidden)
    X = rng.standard_normal((n, steps, inputs)).astype(np.float32)
    W, R = (rng.uniform(-bound, bound, (1, 3 * hidden, k)).astype(np.float32) for k in (inputs, hidden))
    B = rng.uniform(-bound, bound, (1, 3 * hidden)).astype(np.float32)
    H0 = np.zeros((n, 1, hidden), np.float32)
    lengths = np.full(n, steps, np.int64)
    compact = (X, H0, lengths, rounded_to_bfloat16(W), rounded_to_bfloat16(R), B)
    wide = [a.astype(np.float64) for a in (X, H0, W, R, B)]
    exact = reference.gru_sequence(*wide[:2], lengths, *wide[2:])[1]
    results = {
        "float32": reference.gru_sequence(X, H0, lengths, W, R, B)[1],
        "bfloat16": reference.gru_sequence(*compact)[1],
    }
    try:
        reference._product = _tile_product(3)
        results["three-pass tiles"] = reference.gru_sequence(X, H0, lengths, W, R, B)[1]
        reference._product = _tile_product(2)
        results["bfloat16 tiles"] = reference.gru_sequence(*compact)[1]
    finally:
        reference._product = np.matmul
    return {name: float(np.abs(y - exact).max()) for name, y in results.items()}


def test_three_pass_gru_stays_near_float32():
    """The three-pass mode carried through a GRU's gates, on the benchmark's kind of data: within 64
    times float32's own deviation from the exact sequence (22-54 times in
    benchmarks/results/zen4-avx512/tile_errors_results.md) and a hundredth of bfloat16 weights';
    bfloat16 weights on the tiles (A kept to 16 bits) within 1.5 times their deviation on the
    vector kernels (A in float32)."""
    error = gru_errors(2, 20, 24, 32)
    assert 0 < error["three-pass tiles"] <= 64 * error["float32"]
    assert error["three-pass tiles"] <= error["bfloat16"] / 100
    assert error["bfloat16 tiles"] <= 1.5 * error["bfloat16"]


def _never():
    raise AssertionError("permission asked although the tiles cannot be used")


@pytest.mark.parametrize(
    ("switch", "host", "targets_host", "native", "permission", "why"),
    [
        ("off", dict.fromkeys(_isa.AMX_FEATURES, True), True, True, _never, "off (FASTGRU_TILES=off)"),
        ("", {"amx-tile": True}, True, True, _never, "this CPU has no amx-bf16, amx-int8"),
        ("auto", dict.fromkeys(_isa.AMX_FEATURES, True), False, True, _never, "compile for another CPU"),
        (" Auto ", dict.fromkeys(_isa.AMX_FEATURES, True), True, False, _never, "twins only"),
        ("", dict.fromkeys(_isa.AMX_FEATURES, True), True, True, lambda: False, "Linux refused"),
        ("", dict.fromkeys(_isa.AMX_FEATURES, True), True, True, lambda: True, ""),
        ("twin", {}, False, False, _never, "the twins (FASTGRU_TILES=twin)"),
    ],
)
def test_tile_status(switch, host, targets_host, native, permission, why):
    kernels, note = _isa.tile_status(switch, host, targets_host, native, permission)
    assert kernels == ("twin" if switch == "twin" else "native" if why == "" else None) and why in note


def test_tile_switch_refuses_other_values():
    with pytest.raises(FastGRUError, match="FASTGRU_TILES is 'on'; expected auto, off or twin"):
        _isa.tile_status("on", {}, True, True, _never)


def test_this_process_tiles():
    """This CPU's answer: no AMX, no permission from Linux and no tiles; with AMX, no tiles either
    while the version has no native kernels (``info`` says why)."""
    host = llvm.get_host_cpu_features()
    assert _isa.TILE_KERNELS is None
    if not all(host.get(feature) for feature in _isa.AMX_FEATURES):
        assert "this CPU has no" in _isa.TILES_NOTE
        assert _isa.tile_permission() is False
    assert "matrix tiles:" in info() and _isa.TILES_NOTE in info()


def _int8_tile_runner(mr, n_panels):
    """``tile_fma`` on one tile of ``mr`` rows and ``n_panels`` int8 panels (the vector kernels)."""
    from numba import njit

    from fastgru._kernels.microkernel import tile_fma

    nv, zero = _isa.GEOMETRY.panel_vectors, np.int64(0)
    return njit(lambda c, ldc, a, b, stride, k: tile_fma(c, a, b, (zero, ldc, zero, zero, stride, k), mr, n_panels, nv))


@pytest.mark.parametrize("k_len", [1, 2, 6, 7, 36, 65, 257, 258, 600])
@pytest.mark.parametrize("special", [None, np.inf, np.nan])
def test_int8_tiles_give_the_byte_dot_products_bits(k_len, special):
    """int8 weights on the tiles (``tiles.int8_product``: TDPBUSD's sums of hi and lo bytes per block)
    against the vector kernels' byte dot products (``microkernel.tile_fma``) bit for bit, rows of
    an infinite or NaN element, a last odd row of K and partial tiles included."""
    if not _isa.INT8_VNNI:
        pytest.skip("the vector kernels widen int8 weights to float32 on this target: no integer bits to equal")
    from fastgru._kernels.microkernel import int8_head, int8_panels, lanes

    nr = _isa.GEOMETRY.panel_vectors * lanes(np.dtype(np.float32))
    mr, n_panels = _isa.GEOMETRY.tiles[0]
    run = _int8_tile_runner(mr, n_panels)
    rng = np.random.default_rng(k_len)
    rows, columns = 2 * mr + mr // 2, n_panels * nr  # partial tiles of 16 rows and columns
    q = rng.integers(-127, 128, (k_len, columns)).astype(np.int8)
    scales = rng.uniform(1e-3, 1e-2, columns).astype(np.float32)
    a = (rng.standard_normal((rows, k_len)) * rng.uniform(0.1, 10, (rows, 1))).astype(np.float32)
    if special is not None and k_len > 1:
        a[rng.integers(0, rows, 3), rng.integers(0, k_len - k_len % 2, 3)] = special
    a[1] = 0  # a row of zeros
    c0 = rng.standard_normal((rows, columns)).astype(np.float32)
    tiles_c = tiles.int8_matmul(a, q, scales, c0.copy())
    panels = q.reshape(k_len, n_panels, nr).transpose(1, 0, 2).reshape(n_panels, -1)
    b = int8_panels(panels, scales.reshape(n_panels, nr), k_len, nr)
    stride = int8_head(k_len) * nr + k_len * nr
    vector_c = np.vstack([c0, np.zeros((-rows % mr, columns), np.float32)])
    padded_a = np.vstack([a, np.zeros((-rows % mr, k_len), np.float32)])
    for r0 in range(0, rows, mr):
        tile = vector_c[r0 : r0 + mr].copy()
        run(
            tile.reshape(-1),
            columns,
            np.ascontiguousarray(padded_a[r0 : r0 + mr].T).reshape(-1),
            b.reshape(-1),
            stride,
            k_len,
        )
        vector_c[r0 : r0 + mr] = tile
    np.testing.assert_array_equal(tiles_c.view(np.uint32), vector_c[:rows].view(np.uint32))


_COMPILE_FOR_AMX = """
import collections, re
import llvmlite.binding as llvm
from fastgru._kernels import amx
llvm.initialize_native_target()
llvm.initialize_native_asmprinter()
module = llvm.parse_assembly(str(amx.module_for()))
module.verify()
machine = llvm.Target.from_triple(module.triple).create_target_machine(cpu="sapphirerapids", features="", opt=2)
code = machine.emit_assembly(module)
for name in ("fastgru_tile_bf16_2", "fastgru_tile_bf16_3", "fastgru_tile_int8"):
    body = code.split(name + ":", 1)[1].split(".Lfunc_end", 1)[0]
    found = collections.Counter(re.findall(r"\\b(ldtilecfg|tilezero|tdpbf16ps|tdpbusd|tilerelease)\\b", body))
    print(name, *sorted(found.items()))
features = "+amx-tile,+amx-bf16,+amx-int8,+avx512f,+avx512bw,+avx512vl"
print("addresses", *(amx.address(name, "sapphirerapids", features) != 0 for name in ("bf16_2", "bf16_3", "int8")))
"""


def test_native_tile_kernels_compile_for_a_cpu_with_amx():
    """The native tile kernels (``_kernels/amx.py``) as LLVM compiles them for Sapphire Rapids, in a
    process of its own (LLVM stops a process whose target lacks AMX): each configures its tiles,
    multiplies as many times as its loops say (one per term in the loop over whole tiles of K and
    in the partial last tile) and releases them; LLVM's JIT makes them callable (``amx.address``),
    not called here. No CPU of the sessions so far has run them."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _COMPILE_FOR_AMX], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line.split(" ", 1)[1] for line in done.stdout.splitlines()}
    assert lines == {
        "fastgru_tile_bf16_2": "('ldtilecfg', 1) ('tdpbf16ps', 4) ('tilerelease', 1)",
        "fastgru_tile_bf16_3": "('ldtilecfg', 1) ('tdpbf16ps', 6) ('tilerelease', 1)",
        "fastgru_tile_int8": "('ldtilecfg', 1) ('tdpbusd', 4) ('tilerelease', 1) ('tilezero', 2)",
        "addresses": "True True True",
    }
