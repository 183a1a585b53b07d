"""Where everything lives: the call descriptor, the packed weights, the panels and the scratch.

Every kernel takes C-contiguous arrays of the compute dtype, X and the states of rank 3, Y of rank
4, att of rank 2, the rest flat, and reads them all by flat offsets: their shapes do not matter,
only a **call descriptor** ``call`` (int64, fields ``CALL_FIELDS``) says how to read them, so
that one compiled kernel serves every layout (the ops', and torch's time-major one). N batch
rows, S steps, I inputs, D directions, H hidden units:

X          input data; row b, step t, input k at ``b*x_row + t*x_step + k``.
h0, ho     initial and final states; row b, direction d, unit j at ``r*s_row + d*s_dir + j``, with
           r = state_rows[b] when ``state_rows`` is not empty (a state pool's streams), else r = b.
           ho may be h0 (states updated in place).
lengths    int64 (N,): sequence_lengths, already checked to lie in [0, S].
state_rows int64: empty, or the state row of each batch row.
att        AUGRU attention scores a, row b, step t at b*S + t; empty for a plain GRU.
y          output; row b, direction d, step t, unit j at ``b*y_row + d*y_dir + t*y_step + j``, every
           element written (zero past each row's length). When S is 1 and y is ho, the cell's case,
           it is written twice with the same values.
weights    ``pack_weights``' flat array: Wᵀ, then Rᵀ, in panels, then the bias (D, 4, H); for
           the matrix tiles, then their copies of Wᵀ and Rᵀ (``tile_starts``).
call       the descriptor: sizes, attributes (reverse: bit d set when direction d runs t = L-1,
           ..., 0; lbr; f and g activation codes; keep: a row of length 0 keeps its initial state in
           ho, for streams and pools, instead of zero; hoist: a task computes X·Wᵀ + bias for all its
           rows and steps first), strides, and a stack's wavefront (``entry.py``): wait, the
           address of an int64 counter that step s waits to exceed s before it reads X (0: none);
           post, that of one it sets to s + 1 once step s's Y is written (0: none); the matrix
           tiles: tiles, the byte offset in ``weights`` of their copies of the weights (0: none),
           and tile_call, the address of the tile kernel that multiplies by them (``tile_starts``).
clip       float: clip (0: none).
work,iwork the task's float and int64 scratch (``rows_scratch``, ``split_scratch``).

Gate columns are laid out z, r, h without padding (gate g, unit j at column g*H + j). A **panel**
is NR columns (the geometry's panel width); the 3H columns are padded once to P = ceil(3H / NR)
panels, and a panel of Wᵀ or Rᵀ holds, for every k, its NR columns' weights, zero past 3H, so
that products stream memory in order.
"""

from collections import namedtuple

import numpy as np

from .._config import kernel
from .._isa import GEOMETRY
from .memory import LINE_BYTES, load, store
from .microkernel import int8_head
from .tiles import TILE_COLUMNS, TILE_ROWS, record_bytes
from .transpose import bits_differ, block_differs, transpose_block

#: Vectors per panel and bytes per vector (the geometry's, fixed when the kernels compile).
PANEL_VECTORS = GEOMETRY.panel_vectors
VECTOR_BYTES = GEOMETRY.vector_bytes

#: The call descriptor's fields, in order.
CALL_FIELDS = (
    "n_rows seq_length n_inputs n_hidden n_dirs reverse lbr f_code g_code keep hoist "
    "x_row x_step y_row y_dir y_step s_row s_dir wait post tiles tile_call"
).split()
Call = namedtuple("Call", CALL_FIELDS)
#: Where each field sits in the descriptor array (CALL["hoist"] is the index of hoist).
CALL = {name: i for i, name in enumerate(CALL_FIELDS)}

#: The panels of H hidden units: panel width NR, P panels of 3H columns, P1 panels of the z and r
#: columns [0, 2H), and the first panel P2 holding h columns.
Panels = namedtuple("Panels", "nr n p1 p2")

#: Offsets in the float scratch of ``rows.run_serial``: products C (z, r and, for
#: linear_before_reset, h) and C2 (h otherwise), packed rows A (or, for the matrix tiles, their
#: two bfloat16 terms: a row's K in ceil(K/2) elements each; or for int8 weights its high and low
#: bytes, the rows' steps and TILE_SCRATCH), r ⊙ H rows M, states, X·Wᵀ + bias, the end.
RowsScratch = namedtuple("RowsScratch", "c c2 a m state xg end")
#: Elements past the packed rows A for the int8 tile products' two int32 tiles of 16 × 16
#: (``products._int8_on_tiles``).
TILE_SCRATCH = 2 * TILE_ROWS * TILE_COLUMNS
#: Offsets in its int64 scratch: rows by decreasing length, the chunk's times, row offsets for
#: packing, counts of each length, the end.
RowsIndex = namedtuple("RowsIndex", "order times offsets counts end")

#: Offsets in the float scratch of a split row (``split.py``): X·Wᵀ + bias of every step, the two
#: workers' packed rows of X, the state (two copies: before and after a step), r ⊙ H, C, C2, the end.
SplitScratch = namedtuple("SplitScratch", "xg packed state rh c c2 end")
#: Offsets in its int64 scratch: claims (two per item), halves done per item, workers present,
#: the two workers' row offsets for packing, the end.
SplitIndex = namedtuple("SplitIndex", "claims done present offsets end")


@kernel(inline=True)  # as the scratch tables: returned, a struct is copied at every call
def read_call(call):
    """The descriptor array as a Call."""
    return Call(
        call[0],
        call[1],
        call[2],
        call[3],
        call[4],
        call[5],
        call[6],
        call[7],
        call[8],
        call[9],
        call[10],
        call[11],
        call[12],
        call[13],
        call[14],
        call[15],
        call[16],
        call[17],
        call[18],
        call[19],
        call[20],
        call[21],
    )


@kernel()
def panels(n_hidden, itemsize):
    """The Panels of H hidden units for elements of ``itemsize`` bytes."""
    nr = PANEL_VECTORS * (VECTOR_BYTES // itemsize)
    return Panels(nr, (3 * n_hidden + nr - 1) // nr, (2 * n_hidden + nr - 1) // nr, 2 * n_hidden // nr)


@kernel()
def _lines(count, itemsize):
    """``count`` elements rounded up to whole 64-byte lines (every scratch buffer starts on one)."""
    line = LINE_BYTES // itemsize
    return -(-count // line) * line


@kernel()
def panel_size(k_len, nr, weights):
    """Elements of ``weights`` that one panel of k_len rows takes: its k_len·NR weights, after its head
    for int8 weights (``microkernel.int8_head``)."""
    return k_len * nr + (int8_head(k_len) * nr if weights.itemsize == 1 else 0)


@kernel()
def w_start(c, d, nr, n_panels, weights):
    """Where direction d's panels of Wᵀ start in the packed weights."""
    return d * n_panels * panel_size(c.n_inputs, nr, weights)


@kernel()
def r_start(c, d, nr, n_panels, weights):
    """Where direction d's panels of Rᵀ start in the packed weights."""
    w_panels = c.n_dirs * n_panels * panel_size(c.n_inputs, nr, weights)
    return w_panels + d * n_panels * panel_size(c.n_hidden, nr, weights)


@kernel()
def bias_start(c, d, nr, n_panels, weights, itemsize):
    """Where direction d's bias [Bz, Br, Bh or Wbh, 0 or Rbh] (4H) starts in the packed weights, in
    elements of ``itemsize`` bytes, the compute dtype's (``memory.load_as``): after the panels."""
    ends = c.n_dirs * n_panels * (panel_size(c.n_inputs, nr, weights) + panel_size(c.n_hidden, nr, weights))
    return -(-ends * weights.itemsize // itemsize) + d * 4 * c.n_hidden


@kernel()
def tile_starts(c, d, n_panels, nr, weights):
    """The tiles of ``products.on_tiles`` for direction d's Wᵀ and Rᵀ: each (the tile kernel's
    address, where the matrix's copy for the matrix tiles starts, in bytes from the weights' first,
    how far each low term's copy lies after its high term's). The copies
    (``_compact.tile_copies``) follow the bias from the byte offset c.tiles: Wᵀ of each direction,
    then Rᵀ of each, each of the P·NR columns of the panels, in tiles of 16 columns: for bfloat16
    weights and the three-pass mode in ``tiles.pack``'s layout (ceil(K/2) rows of 64 bytes per tile
    of columns), then the same of the low terms for the three-pass mode; for int8 weights
    (``weights`` of one byte) ``tiles.int8_records`` (``tiles.record_bytes(K)`` per tile of
    columns; no low terms)."""
    columns = n_panels * nr // 16
    if weights.itemsize == 1:
        w_bytes, r_bytes = columns * record_bytes(c.n_inputs), columns * record_bytes(c.n_hidden)
    else:
        w_bytes, r_bytes = columns * ((c.n_inputs + 1) // 2) * 64, columns * ((c.n_hidden + 1) // 2) * 64
    w_at, r_at, lo = c.tiles + d * w_bytes, c.tiles + c.n_dirs * w_bytes + d * r_bytes, c.n_dirs * (w_bytes + r_bytes)
    return (c.tile_call, w_at, lo), (c.tile_call, r_at, lo)


@kernel()
def state_at(c, state_rows, b, d):
    """Where row b's state of direction d starts in h0 and ho."""
    r = load(state_rows, b) if state_rows.size > 0 else b
    return r * c.s_row + d * c.s_dir


@kernel(inline=True)  # returned, its tables were copied through memory at every call (docs/tuning.md)
def rows_scratch(n_rows, seq_length, n_inputs, n_hidden, hoist, itemsize, chunk_rows):
    """The RowsScratch and RowsIndex of ``n_rows`` rows, ``chunk_rows`` at a time."""
    p = panels(n_hidden, itemsize)
    chunk = min(n_rows, chunk_rows)
    packed_rows = min(chunk_rows, n_rows * seq_length) if hoist else chunk
    o_c2 = _lines(chunk * p.n * p.nr, itemsize)
    o_a = o_c2 + _lines(chunk * (p.n - p.p2) * p.nr, itemsize)
    a_size = (max(n_hidden, n_inputs) + 1) * max(packed_rows, 1)  # + 1: a pair's pad
    o_m = o_a + _lines(a_size + TILE_SCRATCH, itemsize)
    o_state = o_m + _lines(chunk * n_hidden, itemsize)
    o_xg = o_state + _lines(n_rows * n_hidden, itemsize)
    o_end = o_xg + _lines((n_rows * seq_length if hoist else chunk) * p.n * p.nr, itemsize)
    floats = RowsScratch(0, o_c2, o_a, o_m, o_state, o_xg, o_end)
    o_offsets = n_rows + chunk
    o_counts = o_offsets + max(packed_rows, chunk)
    ints = RowsIndex(0, n_rows, o_offsets, o_counts, o_counts + seq_length + 1)
    return floats, ints


@kernel(inline=True)  # as rows_scratch
def split_scratch(seq_length, n_inputs, n_hidden, itemsize, chunk_rows):
    """The SplitScratch and SplitIndex of a row of S steps split over two workers."""
    p = panels(n_hidden, itemsize)
    o_packed = _lines(seq_length * p.n * p.nr, itemsize)
    o_state = o_packed + 2 * _lines(max(1, n_inputs) * min(chunk_rows, max(seq_length, 1)), itemsize)
    o_rh = o_state + _lines(2 * n_hidden, itemsize)
    o_c = o_rh + _lines(n_hidden, itemsize)
    o_c2 = o_c + p.n * p.nr
    o_end = o_c2 + (p.n - p.p2) * p.nr
    items = 1 + 2 * seq_length  # the projection, then up to two phases per step
    floats = SplitScratch(0, o_packed, o_state, o_rh, o_c, o_c2, o_end)
    ints = SplitIndex(0, 2 * items, 3 * items, 3 * items + 2, 3 * items + 2 + 2 * chunk_rows)
    return floats, ints


@kernel()
def pack_panel(M, d, q, k0, k1, nr, out, base, compare):
    """Rows k0..k1 of panel q of direction d of M (D, 3H, k_len) into ``out``, row k at
    base + (k - k0)*NR (zero past 3H), or, with ``compare``, only read: whether ``out`` differs in
    any bit from what packing would write. k0 is a multiple of L, and so is k1 unless it is k_len.
    Blocks of L columns by L rows of k are transposed in registers (``transpose.py``), the rest
    (the columns past the last whole block, the last rows of k, the zeros past 3H) element by
    element, in loops entered only when there is such a rest (a loop over every row of k for an
    empty rest, vectorised by LLVM, pays its set-up at every row: more than the blocks' time)."""
    n_cols, k_len = M.shape[1], M.shape[2]
    lanes = VECTOR_BYTES // out.itemsize  # L, as transpose_block takes it
    k_blocks = min(k1, k_len - k_len % lanes)  # the rows of whole blocks: [k0, k_blocks)
    col0 = q * nr
    col1 = min(col0 + nr, n_cols)
    full = col0 + (col1 - col0) // lanes * lanes  # the columns of whole blocks: [col0, full)
    for kb in range(k0, k_blocks, lanes):  # two loops, not a test per block: a test there slows the blocks
        if compare:
            for j0 in range(col0, full, lanes):
                if block_differs(out, base + (kb - k0) * nr + j0 - col0, nr, M, (d * n_cols + j0) * k_len + kb, k_len):
                    return True
        else:
            for j0 in range(col0, full, lanes):
                transpose_block(out, base + (kb - k0) * nr + j0 - col0, nr, M, (d * n_cols + j0) * k_len + kb, k_len)
    if full < col0 + nr:
        for k in range(k0, k_blocks):
            if _panel_row(M, d, k, full, col0, col1, nr, out, base + (k - k0) * nr, compare):
                return True
    for k in range(max(k0, k_blocks), k1):
        if _panel_row(M, d, k, col0, col0, col1, nr, out, base + (k - k0) * nr, compare):
            return True
    return False


@kernel()
def _panel_row(M, d, k, first, col0, col1, nr, out, row, compare):
    """Columns [first, col0 + NR) of row k of a panel (``pack_panel``), element by element, to
    out[row + col - col0]: M's, zero from col1 on; or with ``compare``, whether they differ."""
    n_cols, k_len = M.shape[1], M.shape[2]
    for col in range(first, col0 + nr):
        at = row + col - col0
        if col >= col1:  # past 3H: zero, never read
            if not compare:
                store(out, at, 0)
            continue
        value = load(M, (d * n_cols + col) * k_len + k)
        if not compare:
            store(out, at, value)
        elif bits_differ(load(out, at), value):
            return True
    return False


@kernel(inline=True)  # into pack_weights and packed_differs: not compiled a third time on its own
def _panels_of(W, R, B, out, compare):
    """Pack W (D, 3H, I), R (D, 3H, H) and B (D, 3H or 4H) into ``out`` (``pack_weights``), or, with
    ``compare``, only read: whether ``out`` differs in any bit from what packing them would write."""
    n_dirs, n_inputs = W.shape[0], W.shape[2]
    n_hidden = R.shape[2]
    p = panels(n_hidden, out.itemsize)
    nr = p.nr
    r_begin = n_dirs * p.n * n_inputs * nr
    b_begin = r_begin + n_dirs * p.n * n_hidden * nr
    for begin, M in ((0, W), (r_begin, R)):
        k_len = M.shape[2]
        for d in range(n_dirs):
            for q in range(p.n):
                if pack_panel(M, d, q, np.int64(0), k_len, nr, out, begin + (d * p.n + q) * k_len * nr, compare):
                    return True
    for d in range(n_dirs):
        for col in range(4 * n_hidden):
            at = b_begin + d * 4 * n_hidden + col
            if col >= B.shape[1]:
                if not compare:
                    store(out, at, 0)
            elif not compare:
                store(out, at, B[d, col])
            elif bits_differ(load(out, at), B[d, col]):
                return True
    return False


@kernel()
def pack_weights(W, R, B, out):
    """Fill ``out`` (``packed_size`` elements, 64-byte aligned) from W (D, 3H, I), R (D, 3H, H) and
    B (D, 3H or 4H): Wᵀ and Rᵀ in panels, then the bias (D, 4, H), zero past B's rows."""
    _panels_of(W, R, B, out, False)


@kernel()
def packed_differs(W, R, B, out):
    """Whether ``out`` differs in any bit from ``pack_weights(W, R, B, out)``'s (NaN payloads count,
    0.0 and -0.0 differ): the check that packed weights are still those of W, R and B."""
    return _panels_of(W, R, B, out, True)


def packed_size(n_dirs, n_inputs, n_hidden, itemsize):
    """Elements of the packed weights of D directions, I inputs and H hidden units."""
    nr = PANEL_VECTORS * VECTOR_BYTES // itemsize
    n_panels = -(-3 * n_hidden // nr)
    return n_dirs * n_panels * (n_inputs + n_hidden) * nr + n_dirs * 4 * n_hidden


def describe_call(**fields):
    """A descriptor array from keyword fields (every field of CALL_FIELDS)."""
    return np.array([fields[name] for name in CALL_FIELDS], dtype=np.int64)
