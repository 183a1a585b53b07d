"""A square block of L x L elements transposed in vector registers (L: the lanes of one vector of
the geometry for the dtype), for packing weights into panels (``layout.pack_weights``).

Packing writes each column of W or R as a row of its panel: a transpose. Element by element, the
loads or the stores go one element at a time (benchmarks/ab/emeraldrapids-avx512/packing_results.md has the cost
before and after). Here L rows of L elements are loaded as L vectors, and log2(L) rounds of
shuffles swap their off-diagonal halves, quarters, ...: the L vectors are then the block's
columns, stored as L vectors. The elements are moved, never computed: the bits are the source's.
"""

import math

import numpy as np
from llvmlite import ir
from numba import config, types
from numba.extending import intrinsic

from .microkernel import lanes as vector_lanes


def swap_masks(lanes, b):
    """The two shuffle masks of the round that swaps blocks of ``b`` elements between rows i and
    i + b (i & b == 0), over the concatenation (row i, row i + b): row i keeps its elements whose
    index has bit b clear and takes row i + b's others; row i + b the opposite."""
    low = [m if m & b == 0 else lanes + m - b for m in range(lanes)]
    high = [m + b if m & b == 0 else lanes + m for m in range(lanes)]
    return low, high


def transposed_rows(rows, shuffle):
    """The columns of the square block whose rows are ``rows`` (L of them), by log2(L) rounds of
    ``shuffle(x, y, mask)`` (a vector of x's and y's elements, mask indices past L in y)."""
    rows, lanes = list(rows), len(rows)
    for bit in range(int(math.log2(lanes))):
        b = 1 << bit
        low, high = swap_masks(lanes, b)
        for i in range(lanes):
            if i & b == 0:
                rows[i], rows[i + b] = shuffle(rows[i], rows[i + b], low), shuffle(rows[i], rows[i + b], high)
    return rows


def _block_codegen(finish):
    """The code of an intrinsic on a block: the L x L block of src (rows lds apart) transposed in
    registers, then ``finish(builder, columns, dst_column)``, with ``dst_column(j)`` the pointer to
    dst's vector j (ldd elements apart); ``finish`` returns the intrinsic's value."""

    def codegen(context, builder, signature, args):
        dtype = signature.args[0].dtype
        itemsize = dtype.bitwidth // 8
        lanes = vector_lanes(np.dtype(str(dtype)))
        vec = ir.VectorType(context.get_value_type(dtype), lanes)
        i64 = ir.IntType(64)
        dst_arr, dst_off, ldd, src_arr, src_off, lds = args
        dst_off, ldd, src_off, lds = (
            builder.sext(v, i64) if v.type.width < 64 else v for v in (dst_off, ldd, src_off, lds)
        )
        dst_ptr = context.make_array(signature.args[0])(context, builder, dst_arr).data
        src_ptr = context.make_array(signature.args[3])(context, builder, src_arr).data

        def at(base, offset, stride, row):
            address = builder.gep(base, [builder.add(offset, builder.mul(stride, ir.Constant(i64, row)))])
            return builder.bitcast(address, vec.as_pointer())

        def shuffle(x, y, mask):
            return builder.shuffle_vector(x, y, ir.Constant(ir.VectorType(ir.IntType(32), lanes), mask))

        rows = [builder.load(at(src_ptr, src_off, lds, i), align=itemsize) for i in range(lanes)]
        columns = transposed_rows(rows, shuffle)
        return finish(builder, columns, lambda j: at(dst_ptr, dst_off, ldd, j), itemsize)

    return codegen


def _typed(dst, src):
    return isinstance(dst, types.Array) and isinstance(src, types.Array) and dst.dtype == src.dtype


@intrinsic
def transpose_block(typingctx, dst, dst_off, ldd, src, src_off, lds):
    """dst[dst_off + j*ldd + i] = src[src_off + i*lds + j] for i, j < L; dst and src C-contiguous
    arrays (any rank, read by flat offsets) of one dtype, the L x L elements of each inside them."""
    if not _typed(dst, src):
        return None

    def finish(builder, columns, dst_column, itemsize):
        for j, column in enumerate(columns):
            builder.store(column, dst_column(j), align=itemsize)

    return types.void(dst, dst_off, ldd, src, src_off, lds), _block_codegen(finish)


@intrinsic
def block_differs(typingctx, dst, dst_off, ldd, src, src_off, lds):
    """Whether dst[dst_off + j*ldd + i] and src[src_off + i*lds + j] differ in any bit for some
    i, j < L (what ``transpose_block`` would change): NaNs of one payload are the same, 0.0 and
    -0.0 differ."""
    if not _typed(dst, src):
        return None

    def finish(builder, columns, dst_column, itemsize):
        words = ir.VectorType(ir.IntType(8 * itemsize), len(columns))
        differ = None
        for j, column in enumerate(columns):
            given = builder.bitcast(builder.load(dst_column(j), align=itemsize), words)
            bits = builder.xor(builder.bitcast(column, words), given)
            differ = bits if differ is None else builder.or_(differ, bits)
        wide = builder.bitcast(differ, ir.IntType(8 * itemsize * len(columns)))
        return builder.icmp_unsigned("!=", wide, ir.Constant(wide.type, 0))

    return types.boolean(dst, dst_off, ldd, src, src_off, lds), _block_codegen(finish)


@intrinsic
def bits_differ(typingctx, x, y):
    """Whether two floats of one type differ in any bit."""
    if not (isinstance(x, types.Float) and x == y):
        return None

    def codegen(context, builder, signature, args):
        word = ir.IntType(signature.args[0].bitwidth)
        return builder.icmp_unsigned("!=", builder.bitcast(args[0], word), builder.bitcast(args[1], word))

    return types.boolean(x, y), codegen


if config.DISABLE_JIT:  # pure Python (NUMBA_DISABLE_JIT=1)

    def transpose_block(dst, dst_off, ldd, src, src_off, lds):  # noqa: F811
        lanes = vector_lanes(dst.dtype)
        flat_dst, flat_src = dst.reshape(-1), src.reshape(-1)
        for i in range(lanes):
            for j in range(lanes):
                flat_dst[dst_off + j * ldd + i] = flat_src[src_off + i * lds + j]

    def block_differs(dst, dst_off, ldd, src, src_off, lds):  # noqa: F811
        lanes = vector_lanes(dst.dtype)
        flat_dst, flat_src = dst.reshape(-1), src.reshape(-1)
        return any(
            bits_differ(flat_dst[dst_off + j * ldd + i], flat_src[src_off + i * lds + j])
            for i in range(lanes)
            for j in range(lanes)
        )

    def bits_differ(x, y):  # noqa: F811
        return np.asarray(x).tobytes() != np.asarray(y).tobytes()
