"""Matrix tiles (Intel AMX) in plain Numba: the twins of the tile products.

On a CPU with AMX one instruction multiplies a tile of A (at most 16 rows of 64 bytes) by a tile
of B (at most 16 rows of 64 bytes) into a tile of C (at most 16 rows of 16 float32 or int32).
This module computes what TDPBF16PS and TDPBUSD compute, element by element, and runs the tile
schedule of a product with them: the weights packed once into B's layout (``pack``, ``pack_int8``;
the ops' int8 copies: ``int8_records``), A split into two bfloat16 terms (``split``) or quantised
into two bytes (``quantise``, ``quantise_row``), and the loops over the tiles of M, N and K with
their tails (``product``, ``int8_product``). It is the specification of the native tile kernels
(``amx.py``), which must equal it bit for bit, and it tests the schedule on every CPU. It is slow
(scalar code): calls run it only under ``FASTGRU_TILES=twin`` (``twin_address``: the twin of a
native kernel as a C callback of its signature), which tests the road of the tile products on any
CPU.

TDPBF16PS, as Intel's manual describes it: each 32-bit element of A's and B's tiles holds a pair
of bfloat16 (the even element of K in the low half); C[m, n] receives, for each pair p of K in
turn, c = c + A[m, p].even·B[p, n].even, then c = c + A[m, p].odd·B[p, n].odd, each rounded once
to float32, to nearest even ("round to nearest even is used when doing each accumulation of the
FMA"). Denormal inputs count as zero and denormal results become zero: the bfloat16 operands, C's
incoming value (read as an input) and each accumulation's result. The product of two bfloat16 (8
significant bits each) is exact in float64, and the sum of a float32 and such a product, rounded
to float64 and then to float32, is the sum rounded once to float32 (float64 has more than twice
float32's bits): ``accumulate`` computes it so, in compiled code and in Python alike.

The products:
- bfloat16 weights W' (two passes): A = hi + lo (``split``: about 16 of A's bits); for each tile
  of K, C += hi·W', then C += lo·W'.
- float32 weights (the three-pass mode): W = Whi + Wlo as A is split; for each tile of K,
  C += hi·Whi, then hi·Wlo, then lo·Whi (lo·Wlo, at most 2⁻¹⁸ of |a·w|, is left out).
- int8 weights (``int8_product``): TDPBUSD adds to each int32 of C the four products of unsigned
  bytes of A by signed bytes of B (a column's four weights, a quad of K), with wrap-around. A is
  quantised per row to 16 bits and offset as the vector kernels' byte dot products do it
  (``microkernel._Int8Products``): u = a + 32768 = 256·hi + lo, two tiles of sums (hi and lo) per
  block of 256 rows of K, Σ a·w = 256·Σ hi·w + Σ lo·w − 32768·Σ w, the same integers, then the
  same float32 operations: int8 weights give the same bits on tiles as on AVX-512 with VNNI.
"""

import numpy as np
from numba import carray, types

from .._config import kernel
from .activations import bits_float, float_bits, fma
from .memory import load
from .microkernel import INT8_PAIRS_PER_SUM

#: Rows of a tile (of A and C; of B: pairs of K), float32 columns of C's tile, pairs of K in
#: A's tile (64 bytes: 16 pairs of bfloat16 per row).
TILE_ROWS = 16
TILE_COLUMNS = 16
TILE_PAIRS = 16

#: Quads of K (4 bytes) in an int8 tile of A (64 bytes a row).
TILE_QUADS = 16
#: Quads of K per block whose int32 sums the int8 products add up before they go to float32: the
#: vector kernels' 2·INT8_PAIRS_PER_SUM rows.
BLOCK_QUADS = 2 * INT8_PAIRS_PER_SUM // 4

_SMALLEST_NORMAL = np.float32(2.0**-126)


@kernel(exact=True)
def bfloat16_value(bits):
    """The float32 that bfloat16 ``bits`` (the low 16 bits) stand for; a denormal counts as zero."""
    bits = np.int64(bits) & 0xFFFF
    if (bits & 0x7F80) == 0:
        bits &= 0x8000
    return bits_float(bits << 16)


@kernel(exact=True)
def flushed(x):
    """float32 x, or zero of its sign where x is denormal."""
    x = np.float32(x)
    if x != 0 and abs(x) < _SMALLEST_NORMAL:
        return bits_float(float_bits(x) & np.int32(-(2**31)))
    return x


@kernel(exact=True)
def accumulate(c, a_bits, b_bits):
    """c + a·b for bfloat16 ``a_bits`` and ``b_bits``, rounded once to float32, as a tile's
    accumulation: denormal operands count as zero, a denormal result becomes zero."""
    product = np.float64(bfloat16_value(a_bits)) * np.float64(bfloat16_value(b_bits))
    return flushed(np.float32(np.float64(c) + product))


@kernel(exact=True)
def dpbf16ps(c, a, b, m, n, pairs):
    """TDPBF16PS: C[r, j] += Σ_p A[r, p]·B[p, j] for r < m, j < n, p < pairs, the pairs in order and
    each pair's even element first. c (≥ m, ≥ n) float32; a (≥ m, ≥ 2·pairs) uint16, row r's pair p
    at a[r, 2p], a[r, 2p + 1]; b (≥ pairs, ≥ n, 2) uint16, B's row p (64 bytes) at b[p]."""
    for r in range(m):
        for j in range(n):
            acc = flushed(c[r, j])
            for p in range(pairs):
                acc = accumulate(acc, a[r, 2 * p], b[p, j, 0])
                acc = accumulate(acc, a[r, 2 * p + 1], b[p, j, 1])
            c[r, j] = acc


@kernel(exact=True)
def bfloat16_bits(x):
    """The bits of float32 x rounded to bfloat16, to nearest even, as an int64 of 16 bits; NaN stays
    a (quiet) NaN, and a finite x that would round to infinity is truncated instead."""
    bits = np.int64(float_bits(x)) & 0xFFFFFFFF
    if x != x:
        return ((bits >> 16) | 0x40) & 0xFFFF
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF
    if (rounded & 0x7FFF) == 0x7F80 and abs(x) != np.inf:
        return bits >> 16
    return rounded


@kernel(exact=True)
def halves(x):
    """(hi, lo): float32 x as two bfloat16 terms (bits as int64), hi = bfloat16_bits(x), lo =
    bfloat16_bits(x - hi), or zero where x is not finite. x - hi is exact, so hi + lo differs from
    x by at most 2⁻⁹ of x - hi, 2⁻¹⁷ of |x| (2⁻¹⁶ where x, near float32's largest, is truncated)."""
    x = np.float32(x)
    high = bfloat16_bits(x)
    if abs(x) != np.inf and x == x:
        return high, bfloat16_bits(x - bfloat16_value(high))
    return high, np.int64(0)


@kernel(exact=True)
def split(a, hi, lo):
    """A (M, K) float32 as two bfloat16 terms, ``halves`` of each element, into hi and lo (M, ≥ K
    uint16; the rest of each row is set to zero)."""
    rows, k = a.shape
    for i in range(rows):
        for j in range(hi.shape[1]):
            hi[i, j] = 0
            lo[i, j] = 0
        for j in range(k):
            hi[i, j], lo[i, j] = halves(a[i, j])


@kernel(exact=True)
def product(c, terms):
    """C (M, N) float32 += Σ_t A_t·B_t, in tiles: ``terms`` a tuple of (A_t, B_t), A_t (M, 2·KP)
    uint16 (``split``'s), B_t (NT, KP, 16, 2) uint16 (``pack``'s), all B_t of one shape. For each
    tile of C (16 columns outermost, then 16 rows; the last of each may be partial), C's tile is
    read, then for each tile of K (16 pairs; the last may be partial) each term in turn adds its
    A_t·B_t by ``dpbf16ps``, and the tile is written back."""
    rows, columns = c.shape
    pairs = terms[0][1].shape[1]
    tile = np.empty((TILE_ROWS, TILE_COLUMNS), np.float32)
    for n0 in range(0, columns, TILE_COLUMNS):
        n = min(TILE_COLUMNS, columns - n0)
        for m0 in range(0, rows, TILE_ROWS):
            m = min(TILE_ROWS, rows - m0)
            tile[:m, :n] = c[m0 : m0 + m, n0 : n0 + n]
            for p0 in range(0, pairs, TILE_PAIRS):
                k = min(TILE_PAIRS, pairs - p0)
                for a, b in terms:
                    dpbf16ps(tile, a[m0:, 2 * p0 :], b[n0 // TILE_COLUMNS, p0:], m, n, k)
            c[m0 : m0 + m, n0 : n0 + n] = tile[:m, :n]


def pack(bits):
    """B (K, N) of bfloat16 bits (uint16) in the tiles' layout, (ceil(N/16), ceil(K/2), 16, 2):
    element [t, p, j, e] is B[2p + e, 16t + j], zero past K and N. NumPy; once per op."""
    k, n = bits.shape
    pairs, tiles = -(-k // 2), -(-n // TILE_COLUMNS)
    padded = np.zeros((2 * pairs, tiles * TILE_COLUMNS), np.uint16)
    padded[:k, :n] = bits
    return np.ascontiguousarray(padded.reshape(pairs, 2, tiles, TILE_COLUMNS).transpose(2, 0, 3, 1))


def split_rows(a, width):
    """``split`` of A (M, K) float32 into new (hi, lo) arrays of (M, width ≥ K) uint16."""
    a = np.ascontiguousarray(a, np.float32)
    hi = np.empty((a.shape[0], width), np.uint16)
    lo = np.empty_like(hi)
    split(a, hi, lo)
    return hi, lo


def matmul(a, b, passes):
    """A (M, K) · B (K, N), both float32, as the tiles compute it: ``passes`` 2 for B rounded to
    bfloat16 (bfloat16 weights: B's values must be bfloat16's already), 3 for the three-pass mode
    (B split as A is). NumPy in and out, for tests and measurements."""
    (rows, k), (_, columns) = a.shape, b.shape
    hi, lo = split_rows(a, 2 * -(-k // 2))
    b_hi, b_lo = (pack(half.T) for half in split_rows(np.asarray(b).T, k))
    c = np.zeros((rows, columns), np.float32)
    if passes == 2:
        if b_lo.any():
            raise ValueError("matmul: passes=2 needs B rounded to bfloat16 already")
        product(c, ((hi, b_hi), (lo, b_hi)))
    elif passes == 3:
        product(c, ((hi, b_hi), (hi, b_lo), (lo, b_hi)))
    else:
        raise ValueError(f"matmul: passes is {passes!r}; expected 2 or 3")
    return c


@kernel(exact=True)
def dpbusd(c, a, b, m, n, quads):
    """TDPBUSD: C[r, j] += Σ_p Σ_e A[r, 4p + e]·B[p, j, e] for r < m, j < n, p < quads, unsigned bytes
    of A by signed bytes of B, in int32 with wrap-around. c (≥ m, ≥ n) int32; a (≥ m, ≥ 4·quads)
    uint8; b (≥ quads, ≥ n, 4) int8, B's row p (64 bytes) at b[p]."""
    for r in range(m):
        for j in range(n):
            acc = np.int64(c[r, j])
            for p in range(quads):
                for e in range(4):
                    acc += np.int64(a[r, 4 * p + e]) * np.int64(b[p, j, e])
            c[r, j] = (acc + 2**31) % 2**32 - 2**31


@kernel(exact=True)
def quantise(a, high, low, steps):
    """A (M, K) float32 quantised per row for the int8 products (``quantise_row`` of each row) into
    ``high`` and ``low`` (M, ≥ K uint8) and ``steps`` (M,)."""
    for r in range(a.shape[0]):
        steps[r] = quantise_row(a[r], 0, a.shape[1], high[r], low[r], (0, 0, high.shape[1]))


@kernel(exact=True)
def quantise_row(src, at, k_len, high, low, to):
    """Returns the step of A's row at ``at`` in ``src`` (flat offsets, ``memory.load``) quantised for
    the int8 products, as the vector kernels do it, and writes its bytes: over the pairs' rows k <
    2·(K // 2), peak = max |A[k]|, step = peak / 32767, a = rint(A·32767 / peak), u = a + 32768 =
    256·high + low, to high[hi_at + k] and low[lo_at + k] (uint8; zero from the pairs' end to width;
    ``to`` = (hi_at, lo_at, width)). The step is 0 where the row is all zeros or has an infinite or
    NaN element (whose a are then 0): such a row, with a non-finite peak, is the float32 path's."""
    hi_at, lo_at, width = to
    even = k_len - k_len % 2
    peak = np.float32(0)
    finite = True
    for k in range(even):
        x = abs(load(src, at + k))
        if not x <= np.float32(3.4028235e38):
            finite = False
        elif x > peak:
            peak = x
    scaled = finite and peak > 0
    inverse = np.float32(32767) / peak if scaled else np.float32(0)
    for k in range(even):
        u = np.int64(np.rint(np.float32(load(src, at + k) * inverse) if finite else np.float32(0))) + 32768
        high[hi_at + k] = u >> 8
        low[lo_at + k] = u & 255
    for k in range(even, width):
        high[hi_at + k] = 0
        low[lo_at + k] = 0
    return peak / np.float32(32767) if scaled else np.float32(0)


@kernel(exact=True)
def block_value(hi, lo, column_sum, step):
    """A block's float32 sum of a row by a column from the tiles' int32 sums of A's high and low
    bytes by the column's weights: S = 256·hi + lo − 32768·Σ w (int32, with wrap-around),
    float32(S)·step."""
    total = np.int64(hi) * 256 + np.int64(lo) - (np.int64(column_sum) << 15)
    total = (total + 2**31) % 2**32 - 2**31
    return np.float32(np.float32(total) * step)


def pack_int8(q):
    """int8 weights q (K, N) for the tiles: (quads (ceil(N/16), ceil(K'/4), 16, 4), column sums
    (ceil(N/16), blocks, 16) int32), over the pairs' rows K' = 2·(K // 2) only (zero past them and
    past N); a block is 2·INT8_PAIRS_PER_SUM rows. NumPy; once per op."""
    k_len, n = q.shape
    even, tiles = k_len - k_len % 2, -(-n // TILE_COLUMNS)
    quads, block = -(-even // 4), 4 * BLOCK_QUADS
    padded = np.zeros((4 * quads, tiles * TILE_COLUMNS), np.int8)
    padded[:even, :n] = q[:even]
    packed = np.ascontiguousarray(padded.reshape(quads, 4, tiles, TILE_COLUMNS).transpose(2, 0, 3, 1))
    blocks = [padded[k : k + block].sum(axis=0, dtype=np.int32) for k in range(0, even, block)]
    sums = np.stack(blocks or [np.zeros(tiles * TILE_COLUMNS, np.int32)])
    return packed, np.ascontiguousarray(sums.reshape(len(sums), tiles, TILE_COLUMNS).transpose(1, 0, 2))


def int8_records(q, scales):
    """int8 weights q (K, N) and their column scales (N,) float32 as the records that an op's int8
    products on the tiles read (``products._int8_on_tiles``), as bytes: per tile of 16 columns,
    ``record_bytes(K)`` of them, its quads (``pack_int8``'s: ceil(K'/4) rows of 64 bytes, the pairs'
    rows K' = 2·(K // 2)), its column sums (int32, 64 bytes per block of K), its scales (float32, 64
    bytes), and the last odd row of K as float32 (64 bytes, zero where K is even). NumPy; once per
    op."""
    k_len, n = q.shape
    packed, sums = pack_int8(q)
    tiles = packed.shape[0]
    tail = np.zeros((2, tiles * TILE_COLUMNS), np.float32)
    tail[0, :n] = scales
    if k_len % 2:
        tail[1, :n] = q[-1]
    tail = np.ascontiguousarray(tail.reshape(2, tiles, TILE_COLUMNS).transpose(1, 0, 2))
    parts = [part.reshape(tiles, -1).view(np.uint8) for part in (packed, sums, tail)]
    return np.concatenate(parts, axis=1).reshape(-1)


@kernel()
def record_bytes(k_len):
    """Bytes of a tile's record of ``int8_records`` for K = k_len: its quads, its blocks' column sums,
    its scales and its odd row, 64 bytes each."""
    quads = (k_len - k_len % 2 + 3) // 4
    return (quads + max(1, -(-quads // BLOCK_QUADS)) + 2) * 64


@kernel(exact=True)
def int8_product(c, a, high, low, steps, packed, sums, q, scales):
    """C (M, N) float32 += A (M, K) · (q (K, N) int8 ⊙ scales (N,) float32) as the int8 tiles compute
    it: ``quantise``'s bytes and steps, ``pack_int8``'s packed quads and column sums. For each tile of
    C (16 columns outermost, then 16 rows), per block of 256 rows of K: the hi and lo sums (two
    int32 tiles from zero, ``dpbusd`` per tile of 16 quads), S = 256·hi + lo − 32768·Σ w (int32),
    C = fma(float32(S)·step, scale, C). Then per element, in float32 from zero, fma(A[r, k], q, acc)
    over the pairs' rows of a row with an infinite or NaN element, then over a last odd row of K,
    and C = fma(acc, scale, C): the vector kernels' operations, in their order."""
    rows, columns = c.shape
    k_len = a.shape[1]
    even = k_len - k_len % 2
    quads = packed.shape[1]
    hi = np.empty((TILE_ROWS, TILE_COLUMNS), np.int32)
    lo = np.empty((TILE_ROWS, TILE_COLUMNS), np.int32)
    for n0 in range(0, columns, TILE_COLUMNS):
        t, n = n0 // TILE_COLUMNS, min(TILE_COLUMNS, columns - n0)
        for m0 in range(0, rows, TILE_ROWS):
            m = min(TILE_ROWS, rows - m0)
            for block in range(-(-quads // BLOCK_QUADS)):
                hi[:] = 0
                lo[:] = 0
                for p0 in range(block * BLOCK_QUADS, min(quads, (block + 1) * BLOCK_QUADS), TILE_QUADS):
                    k = min(TILE_QUADS, quads - p0, (block + 1) * BLOCK_QUADS - p0)
                    dpbusd(hi, high[m0:, 4 * p0 :], packed[t, p0:], m, n, k)
                    dpbusd(lo, low[m0:, 4 * p0 :], packed[t, p0:], m, n, k)
                for r in range(m):
                    for j in range(n):
                        value = block_value(hi[r, j], lo[r, j], sums[t, block, j], steps[m0 + r])
                        c[m0 + r, n0 + j] = fma(value, scales[n0 + j], c[m0 + r, n0 + j])
    for r in range(rows):
        finite = steps[r] != 0 or finite_pairs(a[r], 0, even)
        for j in range(columns):
            acc = np.float32(0)
            if not finite:
                for k in range(even):
                    acc = fma(a[r, k], np.float32(q[k, j]), acc)
            for k in range(even, k_len):
                acc = fma(a[r, k], np.float32(q[k, j]), acc)
            c[r, j] = fma(acc, scales[j], c[r, j])


@kernel(exact=True)
def finite_pairs(src, at, even):
    """Whether A's row at ``at`` in ``src`` (flat offsets) is finite over the pairs' rows k < even."""
    for k in range(even):
        if not abs(load(src, at + k)) <= np.float32(3.4028235e38):
            return False
    return True


def int8_matmul(a, q, scales, c=None):
    """C + A (M, K) float32 · (q (K, N) int8 ⊙ scales (N,)), as the int8 tiles compute it; C (M, N)
    float32, zeros by default, is updated in place and returned. NumPy in and out."""
    a, q = np.ascontiguousarray(a, np.float32), np.ascontiguousarray(q, np.int8)
    packed, sums = pack_int8(q)
    high = np.empty((a.shape[0], max(4 * packed.shape[1], 1)), np.uint8)
    low, steps = np.empty_like(high), np.empty(a.shape[0], np.float32)
    quantise(a, high, low, steps)
    c = np.zeros((a.shape[0], q.shape[1]), np.float32) if c is None else c
    int8_product(c, a, high, low, steps, packed, sums, q, np.ascontiguousarray(scales, np.float32))
    return c


# ---------------------------------------------------------------------------- the twins by address
#: The C signature of a bfloat16 tile kernel, the native one's (``amx.bf16_tile``): (c, ldc, a0, a1,
#: lda, b0, b1, m, n_bytes, k_tiles, last_bytes), strides in bytes. The drivers call it by address
#: (``callbacks.call_tile``), whichever of the native kernel and the twin it is.
TILE_SIGNATURE = types.void(
    types.voidptr, types.int64, types.voidptr, types.voidptr, types.int64, types.voidptr, types.voidptr,
    types.int16, types.int16, types.int64, types.int16,
)  # fmt: skip

#: The terms of each tile kernel: (which A, which B) per TDPBF16PS of a tile of K, in order. Two for
#: bfloat16 weights (hi·W', lo·W'), three for the three-pass mode (hi·Whi, hi·Wlo, lo·Whi).
TWO_TERMS, THREE_TERMS = ((0, 0), (1, 0)), ((0, 0), (0, 1), (1, 0))


@kernel(exact=True, inline=True)
def _tile_twin(c, ldc, a0, a1, lda, b0, b1, m, n_bytes, k_tiles, last_bytes, terms):
    """What ``amx.bf16_tile`` computes, by ``dpbf16ps``'s arithmetic: C's tile (m rows of n_bytes,
    ldc bytes apart) += for each tile of K (16 pairs, the last ``last_bytes`` wide), each term's
    A tile (m rows, lda bytes apart; a pair per 4 bytes) by its B tile (a row of 16 pairs per 64
    bytes)."""
    columns, pairs = np.int64(n_bytes) // 4, np.int64(k_tiles) * TILE_PAIRS + np.int64(last_bytes) // 4
    rows, a_row, c_row = np.int64(m), lda // 2, ldc // 4
    span = (rows - 1) * a_row + 2 * pairs
    cs = carray(c, ((rows - 1) * c_row + columns,), np.float32)
    a = (carray(a0, (span,), np.uint16), carray(a1, (span,), np.uint16))
    b = (carray(b0, (pairs * 32,), np.uint16), carray(b1, (pairs * 32,), np.uint16))
    for r in range(rows):
        for j in range(columns):
            acc = flushed(cs[r * c_row + j])
            for p0 in range(0, pairs, TILE_PAIRS):
                for ai, bi in terms:
                    for p in range(p0, min(p0 + TILE_PAIRS, pairs)):
                        acc = accumulate(acc, a[ai][r * a_row + 2 * p], b[bi][p * 32 + 2 * j])
                        acc = accumulate(acc, a[ai][r * a_row + 2 * p + 1], b[bi][p * 32 + 2 * j + 1])
            cs[r * c_row + j] = acc


def _twin_bf16_2(c, ldc, a0, a1, lda, b0, b1, m, n_bytes, k_tiles, last_bytes):
    _tile_twin(c, ldc, a0, a1, lda, b0, b1, m, n_bytes, k_tiles, last_bytes, TWO_TERMS)


def _twin_bf16_3(c, ldc, a0, a1, lda, b0, b1, m, n_bytes, k_tiles, last_bytes):
    _tile_twin(c, ldc, a0, a1, lda, b0, b1, m, n_bytes, k_tiles, last_bytes, THREE_TERMS)


#: The C signature of the int8 tile kernel, the native one's (``amx.int8_block``): (hi_out, lo_out,
#: ld_out, a_hi, a_lo, lda, b, m, n_bytes, k_tiles, last_bytes), strides in bytes
#: (``callbacks.call_int8_tile``).
INT8_TILE_SIGNATURE = types.void(
    types.voidptr, types.voidptr, types.int64, types.voidptr, types.voidptr, types.int64, types.voidptr,
    types.int16, types.int16, types.int64, types.int16,
)  # fmt: skip


def _twin_int8(hi_out, lo_out, ld_out, a_hi, a_lo, lda, b, m, n_bytes, k_tiles, last_bytes):
    """What ``amx.int8_block`` computes, by ``dpbusd``'s arithmetic: two int32 tiles (m rows of n_bytes,
    ld_out bytes apart) from zero, the sums of A_hi's and of A_lo's bytes (m rows, lda bytes apart)
    by B's quads (a row of 16 quads per 64 bytes) over k_tiles tiles of 16 quads and a last one
    ``last_bytes`` wide."""
    columns, quads = np.int64(n_bytes) // 4, np.int64(k_tiles) * TILE_QUADS + np.int64(last_bytes) // 4
    rows, out_row = np.int64(m), ld_out // 4
    weights = carray(b, (quads, TILE_COLUMNS, 4), np.int8)
    for out, a in ((hi_out, a_hi), (lo_out, a_lo)):
        sums = carray(out, (rows, out_row), np.int32)
        sums[:, :columns] = 0
        dpbusd(sums, carray(a, (rows, lda), np.uint8), weights, rows, columns, quads)


#: Each tile kernel (``amx.KERNELS``' names) as its twin, with its C signature.
_TWINS = {
    "bf16_2": (_twin_bf16_2, TILE_SIGNATURE),
    "bf16_3": (_twin_bf16_3, TILE_SIGNATURE),
    "int8": (_twin_int8, INT8_TILE_SIGNATURE),
}
_twin_callbacks = {}


def twin_address(name):
    """The address of the twin of the tile kernel ``name`` ("bf16_2", "bf16_3": bfloat16 of two or
    three terms, "int8"), a C callback of its native kernel's signature compiled (or loaded from the
    cache) on first use: scalar code, for tests."""
    if name not in _twin_callbacks:
        function, signature = _TWINS[name]
        _twin_callbacks[name] = kernel(exact=True, callback=signature)(function)
    return _twin_callbacks[name].address
