"""Compact weights (opt-in, ``weight_dtype=``): W and R stored as bfloat16 or int8, computed in float32.

At batch 1 a GRU reads all of R (and of W, for a short call) at every step, and the step takes as
long as those bytes take to arrive: storing them in 2 bytes (bfloat16) or 1 byte (int8) instead
of float32's 4 moves fewer. The kernels widen them in registers (``_kernels/microkernel.tile_fma``)
and compute everything else as the float32 path does (int8 on AVX-512 with VNNI rounds each
product's left operand to 16 bits per row, ``tile_fma``): inputs, states, outputs, the bias and
every sum stay float32.

- ``"bfloat16"``: each weight rounded to the nearest bfloat16 (ties to even; infinities and NaN
  kept): |w' - w| <= 2**-8 |w| (8 significant bits), or <= 2**-134 below 2**-126.
- ``"int8"``: symmetric, one scale per output row (a row of W or of R, i.e. one gate's unit):
  s = max|row| / 127 (float32), q = round(w / s) in [-127, 127], w' = q·s:
  |w' - w| <= s·(1/2 + 2**-16) + 2**-143 (half a step, float32's rounding of w / s, and of a
  subnormal s); a row whose max|w| is below 127·2**-149 is stored as zeros. The kernel computes
  C += s · Σ_k a_k q_k, with each product's A rounded per row to 16 bits where ``INT8_VNNI``
  (``tile_fma``). Weights must be finite.

**Matrix tiles** (Intel AMX; ``_kernels/tiles.py``): where an op is prepared with tiles in use,
the products of its calls of 16 rows or more (``TILE_MIN_ROWS``; ``_kernels/products.on_tiles``)
run on them, A split into two bfloat16 terms (about 16 of its bits, as above), from copies of the
weights in the tiles' layout kept after the bias (``tile_copies``): bfloat16 weights in two passes
(hi·W' + lo·W'), and ``"bfloat16x3"`` (``THREE_PASS``), float32 weights in three (hi·Whi + hi·Wlo
+ lo·Whi), near float32 (docs/semantics.md, "Matrix tiles"); int8 weights, where ``INT8_VNNI``,
by the tiles' integer products, with the bits of the vector kernels' (``tiles.int8_records``).
Fewer rows, and ops prepared without tiles, compute as above; ``"bfloat16x3"`` without tiles is
float32, bit for bit.

Layout (``_kernels/layout.py``): the panels of Wᵀ and Rᵀ as the float32 path lays them out, their
elements uint16 (a bfloat16's bits, each pair of vectors interleaved: ``microkernel.bf16_pairs``) or
int8 (``microkernel.int8_panels``: a panel headed by its NR columns' float32 scales and, where
``INT8_VNNI``, their sums per block, its rows in quads interleaved column by column);
then the bias (D, 4, H) in float32, at the float32 offset ``layout.bias_start`` gives.
"""

import numpy as np

from . import _isa
from ._kernels import amx, tiles
from ._kernels.layout import PANEL_VECTORS, VECTOR_BYTES, pack_weights
from ._kernels.memory import aligned
from ._kernels.microkernel import bf16_pairs, int8_panels
from ._validate import FastGRUError

#: ``weight_dtype`` values: the element type the kernels read for each.
FORMATS = {"bfloat16": np.dtype(np.uint16), "int8": np.dtype(np.int8)}
#: The ``weight_dtype`` of the three-pass mode: float32 weights, multiplied on the matrix tiles as
#: three bfloat16 products; exact float32 where tiles are not used.
THREE_PASS = "bfloat16x3"
#: The tile kernel (``_kernels/amx.py``'s name) of each ``weight_dtype`` that runs on the matrix
#: tiles: bfloat16 weights in two passes (hi·W' + lo·W'), the three-pass mode in three, int8 weights
#: by the integer tiles.
TILE_KERNELS = {"bfloat16": "bf16_2", THREE_PASS: "bf16_3", "int8": "int8"}
#: The fewest rows of a call whose products run on the matrix tiles: all of them, whatever the
#: rows of each product (blocks of threads, rows past their length), so that a call's results
#: depend on its number of rows only, not on its path. Fewer rows stay on the vector tiles, where
#: a tile's work would mostly be padding.
TILE_MIN_ROWS = 16

_F32 = np.dtype(np.float32)
#: Float32 columns of a panel (the geometry's panel width, NR), as the kernels lay them out.
_NR = PANEL_VECTORS * VECTOR_BYTES // _F32.itemsize


def check_weight_dtype(op, weight_dtype, dtype):
    """``weight_dtype`` as a name of FORMATS, or None for the exact weights (the default); ValueError
    for another value, or for T1 float64 (whose users ask for its precision: compact weights
    compute in float32)."""
    if weight_dtype is None:
        return None
    name = getattr(weight_dtype, "name", weight_dtype)  # a NumPy or ml_dtypes dtype gives its name
    if name not in FORMATS and name != THREE_PASS:
        *names, last = ["None", *map(repr, [*FORMATS, THREE_PASS])]
        raise FastGRUError(f"{op}: weight_dtype must be {', '.join(names)} or {last}; got {weight_dtype!r}")
    if dtype == np.float64:
        raise FastGRUError(
            f"{op}: weight_dtype={name!r} computes in float32; the weights are float64 (T1), whose precision it "
            "would drop: convert them to float32 first, or leave weight_dtype None"
        )
    return name


def rounded_to_bfloat16(a):
    """float32 ``a`` rounded to the nearest bfloat16 (ties to even), as float32: the weights a
    bfloat16 op computes with. NaN stays NaN, infinities stay."""
    bits = np.ascontiguousarray(a, dtype=_F32).view(np.uint32)
    rounded = ((bits + np.uint32(0x7FFF) + ((bits >> 16) & 1)) & np.uint32(0xFFFF0000)).astype(np.uint32)
    nan = np.isnan(a)
    rounded[nan] = (bits[nan] & np.uint32(0xFFFF0000)) | np.uint32(0x00400000)  # quiet, sign kept
    return rounded.view(_F32)


def quantized_int8(op, name, a):
    """(q, scales) of the float32 matrices ``a`` (..., rows, k): q int8-valued float32 with
    |q| <= 127 and ``scales`` (..., rows) float32, one per row, with a ≈ q · scale."""
    a = np.asarray(a, dtype=_F32)
    if not np.isfinite(a).all():
        raise FastGRUError(
            f"{op}: weight_dtype='int8' needs finite weights; {name} has "
            f"{int((~np.isfinite(a)).sum())} infinite or NaN values"
        )
    peak = np.abs(a).max(axis=-1) if a.shape[-1] else np.zeros(a.shape[:-1], _F32)
    scales = (peak / np.float32(127)).astype(_F32)
    with np.errstate(invalid="ignore", divide="ignore"):
        q = np.where(scales[..., None] > 0, np.rint(a / scales[..., None]), 0)
    return np.clip(q, -127, 127).astype(_F32), scales


def dequantized(op, weight_dtype, W, R):
    """W' and R' (float32): the weights an op of ``weight_dtype`` computes with."""
    if weight_dtype == "bfloat16":
        return rounded_to_bfloat16(W), rounded_to_bfloat16(R)
    (qw, sw), (qr, sr) = quantized_int8(op, "W", W), quantized_int8(op, "R", R)
    return qw * sw[..., None], qr * sr[..., None]


def pack_compact(op, weight_dtype, W, R, B):
    """The kernels' weights array of ``weight_dtype`` from float32 W (D, 3H, I), R (D, 3H, H) and B
    (D, 3H or 4H), 64-byte aligned."""
    n_dirs, gate_cols, n_inputs = W.shape
    n_hidden = R.shape[2]
    nr = _NR
    n_panels = -(-gate_cols // nr)
    if weight_dtype == "bfloat16":
        full = aligned(_float_size(n_dirs, n_inputs, n_hidden, n_panels, nr), _F32)
        pack_weights(rounded_to_bfloat16(W), rounded_to_bfloat16(R), B, full)
        panels = n_dirs * n_panels * (n_inputs + n_hidden) * nr
        out = aligned(_sized(panels * 2, n_dirs * 4 * n_hidden) // 2, FORMATS[weight_dtype])
        out[:panels] = bf16_pairs(full[:panels].view(np.uint32) >> 16, nr)  # exact: the low halves are zero
        _bias_view(out, panels * 2)[:] = full[panels:]
        return out
    (qw, sw), (qr, sr) = quantized_int8(op, "W", W), quantized_int8(op, "R", R)
    full = aligned(_float_size(n_dirs, n_inputs, n_hidden, n_panels, nr), _F32)
    pack_weights(qw, qr, B, full)
    parts, at = [], 0
    for k_len, scales in ((n_inputs, sw), (n_hidden, sr)):
        values = full[at : at + n_dirs * n_panels * k_len * nr].reshape(n_dirs, n_panels, k_len * nr)
        at += values.size
        padded = np.zeros((n_dirs, n_panels * nr), _F32)
        padded[:, :gate_cols] = scales
        part = int8_panels(values.astype(np.int8), padded.reshape(n_dirs, n_panels, nr), k_len, nr)
        parts.append(part.reshape(-1))
    panels = sum(part.size for part in parts)
    out = aligned(_sized(panels, n_dirs * 4 * n_hidden), FORMATS[weight_dtype])
    out[:panels] = np.concatenate(parts)
    _bias_view(out, panels)[:] = full[at:]
    return out


def takes_tiles(weight_dtype):
    """Whether ops of ``weight_dtype`` prepared now run their calls of TILE_MIN_ROWS rows or more on
    the matrix tiles (``_isa.TILE_KERNELS``): bfloat16 and int8 weights and the three-pass mode, in a
    geometry whose panels hold whole tiles of columns (the generic geometry's 8 columns do not);
    int8 weights only where the vector kernels' products are the tiles' integer ones
    (``_isa.INT8_VNNI``), so that int8 results never depend on the tiles."""
    if weight_dtype not in TILE_KERNELS or _isa.TILE_KERNELS is None or _NR % tiles.TILE_COLUMNS:
        return False
    return weight_dtype != "int8" or _isa.INT8_VNNI


def tile_kernel(weight_dtype):
    """The address of the tile kernel that an op of ``weight_dtype`` prepared now multiplies by, or 0
    when its products do not run on the matrix tiles (``takes_tiles``)."""
    if not takes_tiles(weight_dtype):
        return 0
    if _isa.TILE_KERNELS == "twin":
        return tiles.twin_address(TILE_KERNELS[weight_dtype])
    return amx.address(TILE_KERNELS[weight_dtype])  # this CPU's: _isa.TILE_KERNELS checked that it has AMX


def tile_copies(weight_dtype, W, R):
    """The matrix tiles' copies of float32 W (D, 3H, I) and R (D, 3H, H) as ``layout.tile_starts``
    lays them out, as bytes: W' and R' (``dequantized``) for bfloat16 weights; for ``THREE_PASS``
    their high terms, then their low terms (``tiles.halves``); for int8 weights their quantised
    values and scales (``quantized_int8``) as ``tiles.int8_records``."""
    columns = -(-W.shape[1] // _NR) * _NR
    if weight_dtype == "int8":
        records = []
        for name, matrix in (("W", W), ("R", R)):
            q, scales = quantized_int8("int8 tiles", name, matrix)
            for d in range(matrix.shape[0]):
                padded = np.zeros((columns, matrix.shape[2]), np.int8)
                padded[: matrix.shape[1]] = q[d]
                column_scales = np.zeros(columns, _F32)
                column_scales[: matrix.shape[1]] = scales[d]
                records.append(tiles.int8_records(padded.T, column_scales))
        return np.concatenate(records)
    if weight_dtype == "bfloat16":
        W, R = rounded_to_bfloat16(W), rounded_to_bfloat16(R)
    highs, lows = [], []
    for matrix in (W, R):
        for d in range(matrix.shape[0]):
            padded = np.zeros((columns, matrix.shape[2]), _F32)
            padded[: matrix.shape[1]] = matrix[d]
            hi, lo = tiles.split_rows(padded, matrix.shape[2])
            highs.append(tiles.pack(hi.T))
            lows.append(tiles.pack(lo.T))
    parts = highs + (lows if weight_dtype == THREE_PASS else [])
    return np.concatenate([part.reshape(-1).view(np.uint8) for part in parts])


def with_tile_copies(weights, copies):
    """(weights followed by ``copies`` from the next 64-byte line, the byte offset of the copies):
    a new 64-byte aligned array of ``weights``' dtype."""
    start = -(-weights.nbytes // 64) * 64
    out = aligned(-(-(start + copies.size) // weights.itemsize), weights.dtype, zero=True)
    out[: weights.size] = weights
    out.view(np.uint8)[start : start + copies.size] = copies
    return out, start


def _float_size(n_dirs, n_inputs, n_hidden, n_panels, nr):
    """Elements of float32 weights packed as the exact path packs them."""
    return n_dirs * n_panels * (n_inputs + n_hidden) * nr + n_dirs * 4 * n_hidden


def _sized(panel_bytes, bias_floats):
    """Bytes of compact weights: the panels, then the float32 bias from the next float32."""
    return (-(-panel_bytes // 4) + bias_floats) * 4


def _bias_view(out, panel_bytes):
    """The float32 bias of compact weights ``out`` whose panels take ``panel_bytes``."""
    return out.view(np.uint8)[-(-panel_bytes // 4) * 4 :].view(_F32)
