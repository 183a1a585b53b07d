"""The matrix tiles on the ops' road (``_kernels/products.on_tiles``), through the twins on every CPU:
ops prepared with tiles in use (``_isa.TILE_KERNELS``, 'twin' here) run every product of a call of
16 rows or more on the tile kernel, from the weights' tile copies, with A split into two bfloat16
terms. Checked: a projection on the tiles against the twins' product bit for bit (the copies, their
offsets, the split, the tile loops and their tails); whole ops against the NumPy reference whose
products are the tiles', across attributes, directions, AUGRU and sequence lengths, and against the
same op without tiles (other bits); the same bits on every path, in plans, streams, pools and
stacks (a row's result depends on nothing else of the call); calls of fewer rows, and ops prepared
without tiles, give today's bits; the three-pass mode is float32 bit for bit without tiles."""

import itertools
import math
import os
import subprocess
import sys
import zlib

import numpy as np
import pytest
from conftest import on_every_path
from test_tiles import _tile_product

import fastgru
from fastgru import _isa, reference
from fastgru._compact import TILE_MIN_ROWS, dequantized, quantized_int8, rounded_to_bfloat16
from fastgru._kernels import drivers, tiles
from fastgru._kernels.jobs import JOB
from fastgru._kernels.layout import PANEL_VECTORS, VECTOR_BYTES, bias_start, packed_size, read_call, tile_starts
from fastgru._kernels.products import project

#: |fastgru - the reference on the tiles' products|: the two add the bias, the products and the
#: gates in another order (float32 roundings of values of order 1, carried over a few steps: up to
#: 2.5e-6 measured). It does not tell the tiles from the vector kernels, whose products differ from
#: them by a few 1e-6 at these sizes: ``test_projections_on_tiles_are_the_twins_bit_for_bit`` does.
ATOL = 1e-5


@pytest.fixture
def twins(monkeypatch):
    """Ops prepared in the test run their products on the tiles' twins."""
    monkeypatch.setattr(_isa, "TILE_KERNELS", "twin")


def _weights(rng, d, h, i, lbr):
    bound = 1 / math.sqrt(h)
    shapes = ((d, 3 * h, i), (d, 3 * h, h), (d, (4 if lbr else 3) * h))
    return tuple(rng.uniform(-bound, bound, shape).astype(np.float32) for shape in shapes)


def _on_tiles(passes, function, *args, **kwargs):
    """The reference with its products the tiles' (``passes`` 2 or 3)."""
    try:
        reference._product = _tile_product(passes)
        return function(*args, **kwargs)
    finally:
        reference._product = np.matmul


def _weights_of(weight_dtype, W, R):
    if weight_dtype == "bfloat16x3":
        return W, R
    return dequantized("test", weight_dtype, W, R)


@pytest.mark.parametrize("weight_dtype, passes", [("bfloat16", 2), ("bfloat16x3", 3)])
@pytest.mark.parametrize(
    "direction, lbr, clip, augru",
    [("forward", False, 0.0, False), ("reverse", True, 0.8, False), ("bidirectional", False, 0.0, False),
     ("forward", False, 0.0, True)],
)  # fmt: skip
def test_sequences_on_tiles_match_the_reference_on_tiles(twins, weight_dtype, passes, direction, lbr, clip, augru):
    """17 rows (a whole tile of rows and one more), I = 21 (an odd K: a half pair), H = 24 (3H = 72
    columns: partial tiles of columns, padding), lengths from 0 to S."""
    rng = np.random.default_rng(zlib.crc32(f"{weight_dtype} {direction} {lbr} {augru}".encode()))
    d, n, s, i, h = 2 if direction == "bidirectional" else 1, 17, 4, 21, 24
    W, R, B = _weights(rng, d, h, i, lbr)
    X, h0 = rng.standard_normal((n, s, i)).astype(np.float32), rng.standard_normal((n, d, h)).astype(np.float32)
    lengths = rng.integers(0, s + 1, n)
    attributes = {"direction": direction, "linear_before_reset": lbr, "clip": clip, "weight_dtype": weight_dtype}
    Wq, Rq = _weights_of(weight_dtype, W, R)
    if augru:
        A = rng.uniform(0, 1, (n, s, 1)).astype(np.float32)
        op = fastgru.AUGRUSequence(W, R, B, hidden_size=h, weight_dtype=weight_dtype)
        got = op(X, h0, lengths, A)
        want = _on_tiles(passes, reference.augru_sequence, X, h0, lengths, Wq, Rq, B, A, hidden_size=h)
    else:
        op = fastgru.GRUSequence(W, R, B, hidden_size=h, **attributes)
        got = op(X, h0, lengths)
        kwargs = {k: v for k, v in attributes.items() if k != "weight_dtype"}
        want = _on_tiles(passes, reference.gru_sequence, X, h0, lengths, Wq, Rq, B, hidden_size=h, **kwargs)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=0, atol=ATOL)
    _isa.TILE_KERNELS = None  # the same op without tiles: other bits
    without = type(op)(W, R, B, hidden_size=h, **(attributes if not augru else {"weight_dtype": weight_dtype}))
    assert not np.array_equal(got[1], without(X, h0, lengths, *((A,) if augru else ()))[1])


@pytest.mark.parametrize("weight_dtype", ["bfloat16", "bfloat16x3"])
def test_cells_of_sixteen_rows_run_on_tiles_and_fewer_do_not(twins, weight_dtype):
    rng = np.random.default_rng(7)
    h, i = 24, 32
    W, R, B = _weights(rng, 1, h, i, True)
    X, H = rng.standard_normal((TILE_MIN_ROWS, i)).astype(np.float32), rng.standard_normal((16, h)).astype(np.float32)
    cell = fastgru.GRUCell(W[0], R[0], B[0], hidden_size=h, linear_before_reset=True, weight_dtype=weight_dtype)
    Wq, Rq = _weights_of(weight_dtype, W[0], R[0])
    passes = 2 if weight_dtype == "bfloat16" else 3
    want = _on_tiles(passes, reference.gru_cell, X, H, Wq, Rq, B[0], hidden_size=h, linear_before_reset=True)
    np.testing.assert_allclose(cell(X, H), want, rtol=0, atol=ATOL)
    fewer = TILE_MIN_ROWS - 1
    _isa.TILE_KERNELS = None  # the same op, prepared without tiles
    without = fastgru.GRUCell(W[0], R[0], B[0], hidden_size=h, linear_before_reset=True, weight_dtype=weight_dtype)
    np.testing.assert_array_equal(cell(X[:fewer], H[:fewer]), without(X[:fewer], H[:fewer]))
    assert not np.array_equal(cell(X, H), without(X, H))


def test_the_three_pass_mode_without_tiles_is_float32():
    rng = np.random.default_rng(3)
    W, R, B = _weights(rng, 2, 20, 12, False)
    X, h0 = rng.standard_normal((18, 5, 12)).astype(np.float32), rng.standard_normal((18, 2, 20)).astype(np.float32)
    three = fastgru.GRUSequence(W, R, B, hidden_size=20, direction="bidirectional", weight_dtype="bfloat16x3")
    exact = fastgru.GRUSequence(W, R, B, hidden_size=20, direction="bidirectional")
    assert three.weight_dtype == "bfloat16x3"
    for got, want in zip(three(X, h0, [5] * 18), exact(X, h0, [5] * 18), strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("weight_dtype", ["bfloat16", "bfloat16x3", "int8"])
def test_every_path_gives_the_same_bits_on_tiles(twins, monkeypatch, kernels_run, weight_dtype):
    """A row's result depends on nothing else of the call: the paths' blocks of rows, which may hold
    fewer than 16 rows each, run on the tiles all the same."""
    rng = np.random.default_rng(11)
    n, h = 20, 33
    W, R, B = _weights(rng, 1, h, 5, True)
    op = fastgru.GRUSequence(W, R, B, hidden_size=h, linear_before_reset=True, weight_dtype=weight_dtype)
    X, h0 = rng.standard_normal((n, 6, 5)).astype(np.float32), rng.standard_normal((n, 1, h)).astype(np.float32)
    lengths = rng.integers(0, 7, n)
    results = on_every_path(monkeypatch, kernels_run, lambda: op(X, h0, lengths), False)
    for (a_name, a), (b_name, b) in itertools.pairwise(results.items()):
        for got, want in zip(a, b, strict=True):
            np.testing.assert_array_equal(got, want, err_msg=f"{a_name} vs {b_name}")
    rows = op(X[:16], h0[:16], lengths[:16])
    for got, want in zip(rows, results["serial-True"], strict=True):
        np.testing.assert_array_equal(got, want[:16])


def test_plans_streams_pools_and_stacks_on_tiles_give_the_bits_of_a_call(twins):
    rng = np.random.default_rng(5)
    n, h, i, s = 16, 20, 6, 6
    ops = [
        fastgru.GRUSequence(*_weights(rng, 1, h, i if k == 0 else h, True), hidden_size=h, linear_before_reset=True,
                            weight_dtype="bfloat16")
        for k in range(2)
    ]  # fmt: skip
    X, h0 = rng.standard_normal((n, s, i)).astype(np.float32), np.zeros((n, 1, h), np.float32)
    lengths = np.full(n, s)
    want = ops[0](X, h0, lengths)
    for _ in range(3):  # the plan's calls
        for got, w in zip(ops[0](X, h0, lengths), want, strict=True):
            np.testing.assert_array_equal(got, w)
    stream = ops[0].stream(h0)
    np.testing.assert_array_equal(np.concatenate([stream(X[:, :2]), stream(X[:, 2:])], axis=2), want[0])
    pool = fastgru.StatePool(ops[0], capacity=n)
    ids = [pool.open() for _ in range(n)]
    for t in range(s):
        pool.step(ids, X[:, t : t + 1])
    np.testing.assert_array_equal(np.stack([pool.state(k).reshape(-1) for k in ids]), want[1][:, 0])
    Y, Ho = fastgru.GRUStack(ops)(X, np.zeros((n, 2 * h), np.float32), lengths)
    layer_1 = ops[1](want[0][:, 0], h0, lengths)
    np.testing.assert_array_equal(Y, layer_1[0])
    np.testing.assert_array_equal(Ho[:, h:], layer_1[1][:, 0])


def test_the_twins_are_switched_on_by_their_variable_and_info_says_so():
    env = {**os.environ, "FASTGRU_TILES": "twin"}
    command = [sys.executable, "-m", "fastgru", "info"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "matrix tiles:      used: the twins (FASTGRU_TILES=twin)" in done.stdout


_WARMUP = """
import fastgru
from fastgru._kernels import drivers
fastgru.warmup(ops="gru_sequence", weight_dtypes=["bfloat16x3", "bfloat16"])
print(*sorted(w for d, w in drivers.compiled() if d in ("serial", "parallel")))
"""


def test_warmup_compiles_the_drivers_with_tiles():
    """``warmup`` of the weights that run on tiles compiles their rows' drivers with tiles too."""
    env = {**os.environ, "FASTGRU_TILES": "twin"}
    done = subprocess.run([sys.executable, "-c", _WARMUP], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["float32"] * 2 + ["float32", "tiles"] * 2 + ["uint16"] * 2 + ["uint16", "tiles"] * 2


@pytest.mark.parametrize("weight_dtype", ["bfloat16", "bfloat16x3"])
def test_projections_on_tiles_are_the_twins_bit_for_bit(twins, weight_dtype):
    """``products.project`` on the tiles (the path every product of a call with tiles takes) gives
    the bits of ``tiles.product`` on the bias, the rows split in two bfloat16 terms and the weights'
    copies packed by ``tiles.pack``: the op's tile copies, their offsets, the split and the tile
    loops with their tails (17 rows, I = 21: a half pair, 3H = 72 columns in panels of NR)."""
    rng = np.random.default_rng(17)
    n, i, h = 17, 21, 24
    W, R, B = _weights(rng, 1, h, i, False)
    packed = fastgru.GRUSequence(W, R, B, hidden_size=h, weight_dtype=weight_dtype)._packed
    call = packed._attributes
    nr = PANEL_VECTORS * VECTOR_BYTES // 4
    n_panels, pairs_i, pairs_h = -(-3 * h // nr), -(-i // 2), -(-h // 2)
    ldc = n_panels * nr
    lo = n_panels * nr // 16 * (pairs_i + pairs_h) * 64  # the low terms' copies after the high ones'
    if weight_dtype == "bfloat16":  # bfloat16 panels (2 bytes a weight), then the float32 bias
        bias_at = -(-(n_panels * (i + h) * nr * 2) // 4)
    else:  # float32 panels, then the bias
        bias_at = packed_size(1, i, h, 4) - 4 * h
    X = rng.standard_normal((n, i)).astype(np.float32)
    iwork = np.arange(n, dtype=np.int64) * i
    out, scratch = np.full(n * ldc, np.nan, np.float32), np.zeros(n * (i + 1), np.float32)
    at = (0, n, 0, bias_at, i, h, 0, ldc, 0, 0, n_panels, nr)
    project(X.reshape(-1), iwork, packed.weights, out, scratch, at, (call["tile_call"], call["tiles"], lo))

    Wt = (rounded_to_bfloat16(W) if weight_dtype == "bfloat16" else W)[0]
    columns = np.zeros((ldc, i), np.float32)
    columns[: 3 * h] = Wt
    w_hi, w_lo = (tiles.pack(half.T) for half in tiles.split_rows(columns, i))
    a_hi, a_lo = tiles.split_rows(X, 2 * pairs_i)
    terms = ((a_hi, w_hi), (a_lo, w_hi)) if weight_dtype == "bfloat16" else ((a_hi, w_hi), (a_hi, w_lo), (a_lo, w_hi))
    want = np.zeros((n, ldc), np.float32)
    want[:, : 3 * h] = B[0]
    tiles.product(want, terms)
    np.testing.assert_array_equal(out.reshape(n, ldc).view(np.uint32), want.view(np.uint32))


#: int8 weights run on the tiles only where the vector kernels' products are the tiles' integer ones.
needs_int8_tiles = pytest.mark.skipif(
    not _isa.INT8_VNNI, reason="int8 weights stay on the vector kernels where they widen to float32 (no VNNI)"
)


def _int8_rows(rng, n, k):
    """n rows of k inputs, scaled per row, with a row of zeros and rows holding an infinity or a NaN."""
    X = (rng.standard_normal((n, k)) * rng.uniform(0.1, 10, (n, 1))).astype(np.float32)
    X[2] = 0
    X[5, k // 3] = np.inf
    X[9, k - 2] = np.nan
    return X


@needs_int8_tiles
@pytest.mark.parametrize("n_inputs", [1, 21, 301])
def test_int8_projections_on_tiles_are_the_twins_bit_for_bit(twins, n_inputs):
    """``products.project`` of int8 weights on the tiles gives the bits of ``tiles.int8_product`` (the
    int8 tiles' arithmetic) on the bias, the rows and the op's quantised weights: the records and
    their offsets, the rows' bytes and steps, the blocks of K (I = 301: two, a partial tile of K
    and an odd last row; I = 1: no pairs), 17 rows, 3H = 72 columns in panels of NR, rows of zeros
    and with an infinity or a NaN."""
    rng = np.random.default_rng(n_inputs)
    n, i, h = 17, n_inputs, 24
    W, R, B = _weights(rng, 1, h, i, False)
    packed = fastgru.GRUSequence(W, R, B, hidden_size=h, weight_dtype="int8")._packed
    c = read_call(packed.call(n, 1, False, None, 0))
    nr = PANEL_VECTORS * VECTOR_BYTES // 4
    n_panels = -(-3 * h // nr)
    ldc = n_panels * nr
    X = _int8_rows(rng, n, i)
    iwork = np.arange(n, dtype=np.int64) * i
    out, scratch = np.full(n * ldc, np.nan, np.float32), np.zeros(n * (i + 1) + 512, np.float32)
    at = (0, n, 0, bias_start(c, 0, nr, n_panels, packed.weights, 4), i, h, 0, ldc, 0, 0, n_panels, nr)
    project(X.reshape(-1), iwork, packed.weights, out, scratch, at, tile_starts(c, 0, n_panels, nr, packed.weights)[0])

    q, scales = quantized_int8("test", "W", W)
    columns, column_scales = np.zeros((ldc, i), np.int8), np.zeros(ldc, np.float32)
    columns[: 3 * h], column_scales[: 3 * h] = q[0], scales[0]
    want = np.zeros((n, ldc), np.float32)
    want[:, : 3 * h] = B[0]
    tiles.int8_matmul(X, columns.T, column_scales, want)
    assert np.isnan(want[9]).all() and np.isfinite(want[2]).all()  # the rows' special cases were met
    np.testing.assert_array_equal(out.reshape(n, ldc).view(np.uint32), want.view(np.uint32))


def _ran_with_tiles(packed):
    """Whether the last calls of ``packed`` on this thread ran drivers with tiles (their plans' jobs
    name the callbacks of a format with tiles, ``drivers.FORMATS``' "...T")."""
    ways = [way for plan in packed.plans.__dict__.values() for way in (plan.static, *plan.ways.values()) if way]
    keys = [drivers._CALLBACKS.key_of(int(job[JOB["callback"]])) for way in ways for job in way.jobs]
    return bool(keys) and all(key[1].endswith("T") for key in keys)


@needs_int8_tiles
@pytest.mark.parametrize(
    "direction, lbr, clip, augru",
    [("forward", False, 0.0, False), ("reverse", True, 0.8, False), ("bidirectional", False, 0.0, False),
     ("forward", False, 0.0, True)],
)  # fmt: skip
def test_int8_ops_on_tiles_give_the_vector_kernels_bits(twins, direction, lbr, clip, augru):
    """int8 weights on the tiles give the bits of the same op without tiles (the vector kernels' byte
    dot products): 18 rows, I = 301 (two blocks of K, an odd last row), H = 23 (odd), lengths 0..S,
    rows of zeros and rows with an infinity or a NaN; a cell of 16 rows too."""
    rng = np.random.default_rng(zlib.crc32(f"{direction}{lbr}{clip}{augru}".encode()))
    n, s, i, h = 18, 3, 301, 23
    d = 2 if direction == "bidirectional" else 1
    W, R, B = _weights(rng, d, h, i, lbr)
    X = _int8_rows(rng, n * s, i).reshape(n, s, i)
    h0, lengths = rng.standard_normal((n, d, h)).astype(np.float32), rng.integers(0, s + 1, n)
    lengths[:2] = s
    kwargs = {"hidden_size": h, "weight_dtype": "int8"}
    if augru:
        A = rng.uniform(0, 1, (n, s, 1)).astype(np.float32)
        make, args = fastgru.AUGRUSequence, (X, h0, lengths, A)
    else:
        make, args = fastgru.GRUSequence, (X, h0, lengths)
        kwargs.update(direction=direction, linear_before_reset=lbr, clip=clip)
    on_tiles = make(W, R, B, **kwargs)
    assert on_tiles._packed._attributes["tile_call"] != 0
    tiled = on_tiles(*args)
    assert _ran_with_tiles(on_tiles._packed)
    _isa.TILE_KERNELS = None  # the same op without tiles
    without = make(W, R, B, **kwargs)
    for got, want in zip(tiled, without(*args), strict=True):
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    if not augru and direction == "forward":  # a cell of 16 rows
        cells = []
        for kernels in ("twin", None):
            _isa.TILE_KERNELS = kernels
            cells.append(fastgru.GRUCell(W[0], R[0], B[0], hidden_size=h, weight_dtype="int8"))
        assert cells[0]._packed._attributes["tile_call"] != 0 and cells[1]._packed._attributes.get("tile_call", 0) == 0
        X1, H1 = X[:TILE_MIN_ROWS, 0], h0[:TILE_MIN_ROWS, 0]
        np.testing.assert_array_equal(cells[0](X1, H1).view(np.uint32), cells[1](X1, H1).view(np.uint32))
