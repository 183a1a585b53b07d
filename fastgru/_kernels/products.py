"""Matrix products over packed weight panels, in the geometry's register tiles (``microkernel``).

C[i, columns of panels p0..p1] += A_i · panels, for rows A_i packed tile by tile (``pack``): a
tile of ``rows`` rows is k-major (element (k, r) at k*rows + r), as ``tile_fma`` reads it. Every
element of C receives c = fma(a[k], w[k], c) for k = 0, 1, ... whatever the tile, so tiling, the
number of rows and the thread that runs them never change a result's bits.
"""

import numpy as np
from numba import types
from numba.extending import overload

from .._config import JIT_OPTIONS, kernel
from .._isa import GEOMETRY
from .activations import bits_float, fma
from .atomics import address_of
from .callbacks import call_int8_tile, call_tile
from .layout import panel_size
from .memory import load, load_as, store
from .microkernel import tile_fma
from .tiles import BLOCK_QUADS, TILE_COLUMNS, TILE_ROWS, block_value, finite_pairs, halves, quantise_row, record_bytes

#: The geometry's tiles (rows, panels), largest first; the last has one row. Read when the
#: kernels compile: tile_fma takes them as literals.
(ROWS_0, PANELS_0), (ROWS_1, PANELS_1), (ROWS_2, PANELS_2) = GEOMETRY.tiles
PANEL_VECTORS = GEOMETRY.panel_vectors


@kernel()
def tile_rows(n):
    """Rows of the next tile when ``n`` rows are left."""
    return ROWS_0 if n >= ROWS_0 else (ROWS_1 if n >= ROWS_1 else ROWS_2)


def _panels_in_tiles(c, a, panels, at, rows, group):
    """C[:rows, (q - p0)*NR ...] += Aᵀ · panel q for the panels q = p, p + 1, ... in tiles of ``group``
    panels while a whole group fits before p1; returns the first panel left. ``at`` = (c0, ldc, a0,
    base, stride, k_len, p, p0, p1, NR): C's row r at c0 + r*ldc in ``c``, the tile A (k_len, rows)
    at a0 in ``a``, panel q at base + q*stride in ``panels``. The offsets travel as one tuple of
    integers, the arrays on their own: a tuple holding an array costs a reference count per call."""
    c0, ldc, a0, base, stride, k_len, p, p0, p1, nr = at
    while p + group <= p1:
        tile_fma(
            c, a, panels, (c0 + (p - p0) * nr, ldc, a0, base + p * stride, stride, k_len), rows, group, PANEL_VECTORS
        )
        p += group
    return p


@overload(_panels_in_tiles, prefer_literal=True, jit_options=JIT_OPTIONS)
def _panels_in_tiles_literal(c, a, panels, at, rows, group):
    # Compiled once per (rows, group) pair, which stay literals: tile_fma unrolls its tile by them.
    return _panels_in_tiles


@kernel()
def product(c, a, panels, rows, at):
    """C[:rows, (p - p0)*NR ...] += Aᵀ · panel p for panels p0..p1, ``at`` = (c0, ldc, a0, base, k_len,
    p0, p1, NR): C's row r at c0 + r*ldc in ``c``, the tile A (k_len, rows) at a0 in ``a``, the panels
    from ``base`` in ``panels``; ``rows`` one of tile_rows'. The geometry's tile of ``rows`` rows
    takes its number of panels at a time, then one."""
    c0, ldc, a0, base, k_len, p0, p1, nr = at
    stride = panel_size(k_len, nr, panels)
    if rows == ROWS_0:
        p = _panels_in_tiles(c, a, panels, (c0, ldc, a0, base, stride, k_len, p0, p0, p1, nr), ROWS_0, PANELS_0)
        _panels_in_tiles(c, a, panels, (c0, ldc, a0, base, stride, k_len, p, p0, p1, nr), ROWS_0, 1)
    elif rows == ROWS_1:
        p = _panels_in_tiles(c, a, panels, (c0, ldc, a0, base, stride, k_len, p0, p0, p1, nr), ROWS_1, PANELS_1)
        _panels_in_tiles(c, a, panels, (c0, ldc, a0, base, stride, k_len, p, p0, p1, nr), ROWS_1, 1)
    else:
        p = _panels_in_tiles(c, a, panels, (c0, ldc, a0, base, stride, k_len, p0, p0, p1, nr), ROWS_2, PANELS_2)
        _panels_in_tiles(c, a, panels, (c0, ldc, a0, base, stride, k_len, p, p0, p1, nr), ROWS_2, 1)


@kernel()
def product_row(w, weights, iwork, src, to, a, n, panels):
    """``product`` of one row, as ``step.py``'s ``product`` (a split row's): C's row (at to[0] in ``w``)
    += A's (at ``a``) · the panels [p0, p1) of the packed Rᵀ in ``weights`` (``src`` = (Rᵀ's first
    panel, k's length, NR)). A kernel of its own, so that the one-row tile is all its body, as
    ``product`` called with literal ``rows`` and ``ldc`` would be compiled once more for them."""
    base, k_len, nr = src
    c0, (p0, p1) = to[0], panels
    stride, ldc = panel_size(k_len, nr, weights), np.int64(0)  # one row: no row after it
    p = _panels_in_tiles(w, w, weights, (c0, ldc, a, base, stride, k_len, p0, p0, p1, nr), ROWS_2, PANELS_2)
    _panels_in_tiles(w, w, weights, (c0, ldc, a, base, stride, k_len, p, p0, p1, nr), ROWS_2, 1)


@kernel()
def pack(a, a0, src, iwork, offsets, n, k_len):
    """Pack n rows of k_len elements into ``a`` from a0, tile by tile (the tile of rows i0.. at
    a0 + i0*k_len, k-major); row i starts at src[iwork[offsets + i]]."""
    i0 = 0
    while i0 < n:
        rows = tile_rows(n - i0)
        for r in range(rows):
            base = a0 + i0 * k_len + r
            row = load(iwork, offsets + i0 + r)
            for k in range(k_len):
                store(a, base + k * rows, load(src, row + k))
        i0 += rows


@kernel()
def product_rows(c, a, panels, n, at):
    """C[i, (p - p0)*NR ...] += A_i · panel p for rows i < n (packed by ``pack``) and panels p0..p1;
    ``at`` = (c0, ldc, a0, base, k_len, p0, p1, NR): C's row i at c0 + i*ldc in ``c``, the packed rows
    at a0 in ``a``, the panels from ``base`` in ``panels``. Panels run outermost, four at a time, and
    every tile of rows uses them while they are in cache."""
    c0, ldc, a0, base, k_len, p0, p1, nr = at
    p = p0
    while p < p1:
        group = min(4, p1 - p)
        i0 = 0
        while i0 < n:
            rows = tile_rows(n - i0)
            product(
                c, a, panels, rows, (c0 + i0 * ldc + (p - p0) * nr, ldc, a0 + i0 * k_len, base, k_len, p, p + group, nr)
            )
            i0 += rows
        p += group


def on_tiles(c, a, src, iwork, weights, n, at, tiles):
    """C[i, (p - p0)*NR ...] += row i of ``src`` · panel p on the matrix tiles, for the n rows whose
    offsets in ``src`` ``iwork`` holds from ``offsets`` and the panels p0..p1; ``at`` = (c0, ldc, a0,
    base, k_len, p0, p1, NR, offsets), as ``product_rows``'; ``tiles`` from ``layout.tile_starts``.
    The drivers with tiles run it (``drivers.FORMATS``), for calls that take them
    (``_compact.TILE_MIN_ROWS`` rows or more), for every product of the call: ``_int8_on_tiles`` for
    int8 weights, else ``_bf16_on_tiles``, chosen by the weights' type when it compiles."""
    product = _int8_on_tiles if weights.dtype == np.int8 else _bf16_on_tiles  # pure Python (no JIT)
    product(c, a, src, iwork, weights, n, at, tiles)


@overload(on_tiles, jit_options=JIT_OPTIONS)
def _on_tiles_of(c, a, src, iwork, weights, n, at, tiles):
    product = _int8_on_tiles if weights.dtype == types.int8 else _bf16_on_tiles
    return lambda c, a, src, iwork, weights, n, at, tiles: product(c, a, src, iwork, weights, n, at, tiles)


@kernel()
def _bf16_on_tiles(c, a, src, iwork, weights, n, at, tiles):
    """``on_tiles`` of bfloat16 weights and of the three-pass mode; ``tiles`` = (the tile kernel's
    address, where its copy of this matrix starts in ``weights``, in bytes, the low terms' distance;
    ``layout.tile_starts``). Each row is split into two bfloat16 terms, hi + lo (``tiles.halves``),
    written to ``a`` from a0 as rows of ceil(k_len / 2) pairs, hi's rows then lo's; then for each
    tile of 16 columns of C, each tile of 16 rows (the last partial) goes to the tile kernel, which
    adds hi·B + lo·B (and hi·B_lo, the three-pass mode's) tile of K by tile of K. A row's result
    depends on nothing else of the call. Float32 only: ``a``'s elements hold a pair of bfloat16
    each."""
    c0, ldc, a0, base, k_len, p0, p1, nr, offsets = at
    call, b_at, lo = tiles
    pairs = (k_len + 1) // 2
    lo0 = a0 + n * pairs
    for i in range(n):
        row = load(iwork, offsets + i)
        for p in range(pairs):
            even_hi, even_lo = halves(load(src, row + 2 * p))
            odd_hi, odd_lo = halves(load(src, row + 2 * p + 1)) if 2 * p + 1 < k_len else (0, 0)
            store(a, a0 + i * pairs + p, bits_float(even_hi | (odd_hi << 16)))
            store(a, lo0 + i * pairs + p, bits_float(even_lo | (odd_lo << 16)))
    lda, c_row = 4 * pairs, ldc * c.itemsize  # bytes between rows of A and of C
    c_at, a_at = address_of(c) + c0 * c.itemsize, address_of(a) + a0 * a.itemsize
    b0 = address_of(weights) + b_at + p0 * nr // TILE_COLUMNS * pairs * 64
    for t in range((p1 - p0) * nr // TILE_COLUMNS):
        b = b0 + t * pairs * 64
        for m0 in range(0, n, TILE_ROWS):
            c_tile, a_tile = c_at + m0 * c_row + t * TILE_COLUMNS * c.itemsize, a_at + m0 * lda
            m, k_tiles, last = min(TILE_ROWS, n - m0), pairs // 16, pairs % 16 * 4
            call_tile(call, c_tile, c_row, a_tile, a_tile + n * lda, lda, b, b + lo, m, 64, k_tiles, last)


@kernel(exact=True)
def _int8_on_tiles(c, a, src, iwork, weights, n, at, tiles):
    """``on_tiles`` of int8 weights, as ``tiles.int8_product`` computes it: ``tiles`` = (the int8 tile
    kernel's address, where the matrix's records (``tiles.int8_records``) start in ``weights``, in
    bytes, unused). Each row is quantised (``tiles.quantise_row``) into ``a`` from a0: the rows' high
    bytes, then their low bytes, 4·ceil(K'/4) a row (K' = 2·(k_len // 2)), then the rows' steps, then
    two int32 tiles of 16 × 16 (``layout.TILE_SCRATCH``). For each tile of 16 columns of C, each tile
    of 16 rows and each block of K, the tile kernel writes the sums of the rows' high and low bytes
    by the block's quads, and C = fma(``tiles.block_value``, scale, C); then each row's float32
    rest: its pairs' rows where it has an infinite or NaN element, a last odd row of K. A row's
    result depends on nothing else of the call: it has the vector kernels' bits."""
    c0, ldc, a0, base, k_len, p0, p1, nr, offsets = at
    call, b_at, _ = tiles
    even = k_len - k_len % 2
    quads, area = (even + 3) // 4, TILE_ROWS * TILE_COLUMNS
    lda, steps = 4 * quads, a0 + 2 * n * quads  # bytes of a row of A; where the rows' steps are in ``a``
    view, at_bytes = a.view(np.uint8), a0 * a.itemsize
    for i in range(n):
        rows_at = (at_bytes + i * lda, at_bytes + (n + i) * lda, lda)
        store(a, steps + i, quantise_row(src, load(iwork, offsets + i), k_len, view, view, rows_at))
    sums = a[steps + n : steps + n + 2 * area].view(np.int32)  # the tile kernel's two tiles: high, low
    sums_at, a_at, record = address_of(sums), address_of(a) + at_bytes, record_bytes(k_len)
    for t in range((p1 - p0) * nr // TILE_COLUMNS):
        first = b_at + (p0 * nr // TILE_COLUMNS + t) * record  # the tile of columns' record
        column_sums = weights[first + 64 * quads : first + record - 128].view(np.int32)
        scales = weights[first + record - 128 : first + record - 64].view(np.float32)
        odd = weights[first + record - 64 : first + record].view(np.float32)
        b, c_at = address_of(weights) + first, c0 + t * TILE_COLUMNS
        for m0 in range(0, n, TILE_ROWS):
            m = min(TILE_ROWS, n - m0)
            for block in range(-(-quads // BLOCK_QUADS)):
                q0 = block * BLOCK_QUADS  # the block's first quad, and its number of quads
                q, a_block = min(BLOCK_QUADS, quads - q0), a_at + m0 * lda + 4 * q0
                call_int8_tile(
                    call, sums_at, sums_at + 4 * area, 64, a_block, a_block + n * lda, lda, b + 64 * q0, m, 64, q // 16,
                    q % 16 * 4,
                )  # fmt: skip
                for r in range(m):
                    step, row = load(a, steps + m0 + r), c_at + (m0 + r) * ldc
                    for j in range(TILE_COLUMNS):
                        e = r * TILE_COLUMNS + j
                        value = block_value(sums[e], sums[area + e], column_sums[block * TILE_COLUMNS + j], step)
                        store(c, row + j, fma(value, scales[j], load(c, row + j)))
        for i in range(n):  # the float32 rest
            src_at, row = load(iwork, offsets + i), c_at + i * ldc
            finite = load(a, steps + i) != 0 or finite_pairs(src, src_at, even)
            for j in range(TILE_COLUMNS):
                acc = np.float32(0)
                if not finite:
                    for k in range(even):
                        acc = fma(load(src, src_at + k), np.float32(weights[first + k // 4 * 64 + 4 * j + k % 4]), acc)
                if k_len % 2:
                    acc = fma(load(src, src_at + even), odd[j], acc)
                store(c, row + j, fma(acc, scales[j], load(c, row + j)))


@kernel()
def project(X, iwork, weights, out, a, at, tiles):
    """The input gates X·Wᵀ + bias of n ≤ CHUNK_ROWS rows, for the columns of panels p0..p1; ``at`` =
    (offsets, n, w_base, bias_at, n_inputs, n_hidden, o0, ldc, a0, p0, p1, NR): row i at
    X[iwork[offsets + i]], n_inputs long; Wᵀ's panels at w_base and the bias [Bz, Br, Bh|Wbh] at
    bias_at in ``weights``; row i to out[o0 + i*ldc + col]; the packed rows at a0 in ``a``. ``tiles``
    None, or ``on_tiles``' for Wᵀ in a driver with tiles: compiled for each, the code without tiles
    is the vector tiles' alone. The padding past 3H is zero."""
    offsets, n, w_base, bias_at, n_inputs, n_hidden, o0, ldc, a0, p0, p1, nr = at
    gate_cols = 3 * n_hidden
    c0, c1 = p0 * nr, p1 * nr
    for i in range(n):
        row = o0 + i * ldc
        for col in range(c0, min(c1, gate_cols)):
            store(out, row + col, load_as(weights, bias_at + col, out))
        for col in range(max(c0, gate_cols), c1):
            store(out, row + col, 0)  # padding: computed, never read
    if tiles is None:
        pack(a, a0, X, iwork, offsets, n, n_inputs)
        product_rows(out, a, weights, n, (o0 + c0, ldc, a0, w_base, n_inputs, p0, p1, nr))
    else:
        on_tiles(out, a, X, iwork, weights, n, (o0 + c0, ldc, a0, w_base, n_inputs, p0, p1, nr, offsets), tiles)
