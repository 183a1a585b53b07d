"""A register-tiled matrix-product micro-kernel, written at the LLVM level.

LLVM does not turn loop-carried scalar accumulators into vector registers, so a plain Numba loop
nest keeps its partial sums in memory and stays far below the FMA rate. This
intrinsic holds an MR x (NP·NV·lanes) tile of C in vector registers for the whole k loop, and
issues one fused multiply-add per register per k. Vectors are ``VECTOR_BYTES`` wide, the
geometry's (``fastgru._isa``): 64 bytes for AVX-512, 32 for AVX2, 16 elsewhere; the geometry's
tiles are sized so that the accumulators fit the target's vector registers.

Every element of C receives the same sequence of operations, c = fma(a[k], b[k], c) for
k = 0, 1, ..., whatever MR, NP and NV are, so tiling never changes a result's bits.
"""

import numpy as np
from llvmlite import ir
from numba import config, types
from numba.core import cgutils
from numba.extending import intrinsic

from .._isa import GEOMETRY

#: Bytes of one vector register of this process's geometry.
VECTOR_BYTES = GEOMETRY.vector_bytes


def lanes(dtype):
    """Elements per vector register for ``dtype`` (a NumPy dtype)."""
    return VECTOR_BYTES // dtype.itemsize


#: Bytes of one column's scale at the head of a panel of int8 weights (a float32).
SCALE_BYTES = 4


def bf16_pairs(bits, nr):
    """bfloat16 panels (uint16, rows of NR columns in order) in ``tile_fma``'s order: in each pair of
    vectors, the 32-bit words interleave the first vector's columns (low halves, little-endian) with
    the second's. NumPy; ``bits`` of any shape whose last axis holds whole panel rows."""
    lanes_ = VECTOR_BYTES // 4
    shape = bits.shape
    return bits.reshape(-1, nr // (2 * lanes_), 2, lanes_).transpose(0, 1, 3, 2).reshape(shape)


def weight_format(b_dtype, c_dtype):
    """The panels' format from their element type (a Numba type): 'exact' when it is C's, 'bfloat16'
    for uint16 (a bfloat16's bits), 'int8' for int8."""
    if b_dtype == c_dtype:
        return "exact"
    if c_dtype != types.float32:  # the compact formats compute in float32
        return None
    if b_dtype == types.uint16:
        return "bfloat16"
    if b_dtype == types.int8:
        return "int8"
    return None


@intrinsic(prefer_literal=True)
def tile_fma(typingctx, c, c_off, ldc, a, a_off, b, b_off, b_stride, k_len, mr, np_, nv):
    """C[r, q*NR + v*L + l] += sum_k A[k, r] * Bq[k, v*L + l] for r < MR, q < NP, v < NV, l < L.

    c : 1-D array; C's row r starts at c_off + r*ldc, its columns are contiguous.
    a : 1-D array; packed A, element (k, r) at a_off + k*MR + r.
    b : 1-D array; packed panels, element (k, v*L + l) of panel q at b_off + q*b_stride + k*NR + v*L + l,
        with NR = NV*L the panel width. Three formats, by b's element type:
        C's: the weights themselves;
        uint16: bfloat16 bits, two vectors' in one (``bf16_pairs``): the 32-bit word l of vectors
        (2u, 2u + 1) holds column 2u·L + l in its low half and (2u + 1)·L + l in its high half, and
        one load, a shift and a mask make the two float32 vectors (exact);
        int8: the panel starts with NR float32 scales (SCALE_BYTES each), its weights follow at
        b_off + q*b_stride + SCALE_BYTES*NR, and C[r, col] += scale[col] * sum_k A[k, r] * B[k, col]
        (the sum from zero, then one fused multiply-add).
    mr, np_, nv : integer literals (MR rows, NP panels, NV vectors per panel).
    """
    if not all(isinstance(x, types.IntegerLiteral) for x in (mr, np_, nv)):
        return None
    fmt = weight_format(b.dtype, c.dtype)
    if fmt is None or (fmt == "bfloat16" and nv.literal_value % 2):
        return None
    MR, NP, NV = mr.literal_value, np_.literal_value, nv.literal_value
    sig = types.void(c, c_off, ldc, a, a_off, b, b_off, b_stride, k_len, mr, np_, nv)

    def codegen(context, builder, signature, args):
        dtype = signature.args[0].dtype
        width = VECTOR_BYTES // (dtype.bitwidth // 8)
        scalar = context.get_value_type(dtype)
        vec = ir.VectorType(scalar, width)
        i64 = ir.IntType(64)
        align = dtype.bitwidth // 8

        def as_i64(value):
            return builder.sext(value, i64) if value.type.width < 64 else value

        def const(value):
            return ir.Constant(i64, value)

        c_arr, c_off_, ldc_, a_arr, a_off_, b_arr, b_off_, b_stride_, k_len_ = args[:9]
        c_off_, ldc_, a_off_, b_off_, b_stride_, k_len_ = map(as_i64, (c_off_, ldc_, a_off_, b_off_, b_stride_, k_len_))
        c_ptr = context.make_array(signature.args[0])(context, builder, c_arr).data
        a_ptr = context.make_array(signature.args[3])(context, builder, a_arr).data
        b_ptr = context.make_array(signature.args[5])(context, builder, b_arr).data

        def vector_at(base, offset, vector=vec):
            return builder.bitcast(builder.gep(base, [offset]), vector.as_pointer())

        if fmt == "exact":

            def weights_at(offset):
                return builder.load(vector_at(b_ptr, offset), align=align)

        elif fmt == "bfloat16":
            words = ir.VectorType(ir.IntType(32), width)
            sixteen = ir.Constant(words, [16] * width)
            high = ir.Constant(words, [0xFFFF0000] * width)

            def weights_at(offset):  # the vectors 2u and 2u + 1 at ``offset``, from their shared words
                bits = builder.load(vector_at(b_ptr, offset, words), align=2)
                return builder.bitcast(builder.shl(bits, sixteen), vec), builder.bitcast(builder.and_(bits, high), vec)

        else:
            bytes_ = ir.VectorType(ir.IntType(8), width)

            def weights_at(offset):
                return builder.sitofp(builder.load(vector_at(b_ptr, offset, bytes_), align=1), vec)

        c_rows = [builder.add(c_off_, builder.mul(ldc_, const(r))) for r in range(MR)]
        cols = [q * NV * width + v * width for q in range(NP) for v in range(NV)]
        slots = [[cgutils.alloca_once(builder, vec) for _ in cols] for _ in range(MR)]
        zeros = ir.Constant(vec, None)
        for r in range(MR):
            for slot, col in zip(slots[r], cols):
                if fmt == "int8":  # the sum starts from zero; C is added once, scaled, at the end
                    builder.store(zeros, slot)
                else:
                    builder.store(builder.load(vector_at(c_ptr, builder.add(c_rows[r], const(col))), align=align), slot)

        fma = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(vec, [vec, vec, vec]), f"llvm.fma.v{width}f{dtype.bitwidth}"
        )
        undef = ir.Constant(vec, ir.Undefined)
        splat = ir.Constant(ir.VectorType(ir.IntType(32), width), [0] * width)
        zero32 = ir.Constant(ir.IntType(32), 0)
        panel_width = const(NV * width)
        first = builder.add(b_off_, const(SCALE_BYTES * NV * width)) if fmt == "int8" else b_off_
        with cgutils.for_range(builder, k_len_) as loop:
            k = loop.index
            row = builder.add(first, builder.mul(k, panel_width))
            bs = []
            for q in range(NP):
                panel = builder.add(row, builder.mul(b_stride_, const(q)))
                if fmt == "bfloat16":  # a pair of vectors per load
                    for v in range(0, NV, 2):
                        bs.extend(weights_at(builder.add(panel, const(v * width))))
                else:
                    bs.extend(weights_at(builder.add(panel, const(v * width))) for v in range(NV))
            a_row = builder.add(a_off_, builder.mul(k, const(MR)))
            for r in range(MR):
                a_val = builder.load(builder.gep(a_ptr, [builder.add(a_row, const(r))]))
                a_vec = builder.shuffle_vector(builder.insert_element(undef, a_val, zero32), undef, splat)
                for slot, b_vec in zip(slots[r], bs):
                    builder.store(builder.call(fma, [a_vec, b_vec, builder.load(slot)]), slot)

        if fmt == "int8":  # C += scale ⊙ sum, the scales at the head of each panel
            scales = []
            for q in range(NP):
                head = builder.gep(b_ptr, [builder.add(b_off_, builder.mul(b_stride_, const(q)))])
                floats = builder.bitcast(head, scalar.as_pointer())
                scales.extend(builder.load(vector_at(floats, const(v * width)), align=align) for v in range(NV))
            for r in range(MR):
                for slot, col, scale in zip(slots[r], cols, scales):
                    target = vector_at(c_ptr, builder.add(c_rows[r], const(col)))
                    total = builder.call(fma, [builder.load(slot), scale, builder.load(target, align=align)])
                    builder.store(total, target, align=align)
        else:
            for r in range(MR):
                for slot, col in zip(slots[r], cols):
                    builder.store(builder.load(slot), vector_at(c_ptr, builder.add(c_rows[r], const(col))), align=align)
        return context.get_dummy_value()

    return sig, codegen


if config.DISABLE_JIT:  # pure Python (NUMBA_DISABLE_JIT=1, e.g. for line coverage)

    def tile_fma(c, c_off, ldc, a, a_off, b, b_off, b_stride, k_len, mr, np_, nv):  # noqa: F811
        # The same sums in the same order for every element, k = 0, 1, ... (without fusing).
        nr = nv * lanes(c.dtype)
        packed_a = a[a_off : a_off + k_len * mr].reshape(k_len, mr)
        head = SCALE_BYTES * nr if b.dtype == np.int8 else 0
        for q in range(np_):
            start_b = b_off + q * b_stride
            panel = b[start_b + head : start_b + head + k_len * nr].reshape(k_len, nr)
            if b.dtype == np.uint16:  # the pairs' halves back in column order
                lanes_ = nr // nv
                panel = panel.reshape(k_len, nv // 2, lanes_, 2).transpose(0, 1, 3, 2).reshape(k_len, nr)
                panel = (panel.astype(np.uint32) << 16).view(np.float32)
            for r in range(mr):
                start = c_off + r * ldc + q * nr
                total = c[start : start + nr] if head == 0 else np.zeros(nr, c.dtype)
                for k in range(k_len):
                    total += packed_a[k, r] * panel[k].astype(c.dtype)
                if head:
                    c[start : start + nr] += total * b[start_b : start_b + head].view(np.float32)
