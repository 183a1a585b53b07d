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

import math

import numpy as np
from llvmlite import ir
from numba import config, types
from numba.core import cgutils
from numba.extending import intrinsic

from .._isa import GEOMETRY, INT8_VNNI

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


def k_pairs(values, k_len, nr):
    """Panels of int8 weights (``values`` (..., k_len*NR): k_len rows of NR columns in order) in
    ``tile_fma``'s order: rows 2u and 2u + 1 interleaved column by column (column c's two weights
    side by side, row 2u's first), a last odd row as it was. NumPy."""
    lead, even = values.shape[:-1], k_len - k_len % 2
    rows = values.reshape(*lead, k_len, nr)
    out = rows.copy()
    out[..., :even, :] = rows[..., :even, :].reshape(*lead, even // 2, 2, nr).swapaxes(-1, -2).reshape(*lead, even, nr)
    return out.reshape(values.shape)


def int8_layout(values, k_len, nr):
    """int8 panels (as ``k_pairs`` takes them) in the layout this process's kernels read: pairs of
    rows for the integer products (``INT8_VNNI``), else rows in order."""
    return k_pairs(values, k_len, nr) if INT8_VNNI else values


#: Pairs of rows whose int32 sums the int8 products accumulate before they go to float32:
#: 128·2·32767·127 < 2**31.
INT8_PAIRS_PER_SUM = 128


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
        (the sum from zero, then one fused multiply-add); where ``INT8_VNNI``, two rows in each pair
        of bytes (``k_pairs``), by integer products (below).
    mr, np_, nv : integer literals (MR rows, NP panels, NV vectors per panel).

    Where ``INT8_VNNI``, int8 weights multiply A quantised per row to 16 bits: A[k, r] ≈ s_r·a_kr with s_r = max_k
    |A[k, r]| / 32767 and a_kr = round(A[k, r] / s_r) (|error| <= s_r/2 and a float32 rounding), so
    that two rows' products are one integer multiply-add of pairs (VPMADDWD), exact in int32; the
    int32 sums of 128 pairs of rows (at most 2**30.1) go to float32, times s_r, into C. A row of A
    with an infinite or NaN element is multiplied in float32 instead, and a last odd row: each row's
    result depends on that row alone, whatever the tile.
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

        def panel_scales():  # the int8 panels' column scales, at their heads
            scales = []
            for q in range(NP):
                head = builder.gep(b_ptr, [builder.add(b_off_, builder.mul(b_stride_, const(q)))])
                floats = builder.bitcast(head, scalar.as_pointer())
                scales.extend(builder.load(vector_at(floats, const(v * width)), align=align) for v in range(NV))
            return scales

        def int8_pairs():
            """C or slots += the products of rows (2u, 2u + 1) for 2u + 1 < k_len, A quantised per row to
            int16 (into C), or in float32 where A's row has a non-finite element (into slots); returns
            the first row left."""
            i32 = ir.IntType(32)
            rows_f, rows_i = ir.VectorType(scalar, MR), ir.VectorType(i32, MR)
            words, shorts = ir.VectorType(i32, width), ir.VectorType(ir.IntType(16), 2 * width)
            wide, pair_bytes = ir.VectorType(i32, 2 * width), ir.VectorType(ir.IntType(8), 2 * width)
            module = builder.module
            rint = cgutils.get_or_insert_function(module, ir.FunctionType(rows_f, [rows_f]), f"llvm.rint.v{MR}f32")
            pairs = builder.lshr(k_len_, const(1))

            def a_rows(k):  # A's MR elements of row k
                return builder.load(
                    vector_at(a_ptr, builder.add(a_off_, builder.mul(k, const(MR))), rows_f), align=align
                )

            def pair_bytes_at(u, q, v):  # vector v of panel q at rows (2u, 2u + 1), column by column
                at = builder.add(
                    first, builder.add(builder.mul(u, const(2 * NV * width)), builder.mul(b_stride_, const(q)))
                )
                return builder.load(vector_at(b_ptr, builder.add(at, const(2 * v * width)), pair_bytes), align=1)

            def splat_of(value, vector):
                spread = builder.insert_element(ir.Constant(vector, ir.Undefined), value, zero32)
                return builder.shuffle_vector(
                    spread, ir.Constant(vector, ir.Undefined), ir.Constant(words, [0] * width)
                )

            # The rows' peaks |A| as integers: |a|'s bits (sign cleared) order as |a| does, above
            # 0x7F800000 for NaN, so the peak's bits say at once whether the row is finite. A's first
            # 2·pairs rows are 2·pairs·MR floats in a row, taken V = lcm(MR, L) at a time, then a row at
            # a time; the V lanes fold into the MR rows (lane j is row j mod MR).
            lanes_v = math.lcm(MR, width)
            block_i = ir.VectorType(i32, lanes_v)
            rows_per_block = lanes_v // MR

            def larger(x, y):
                return builder.select(builder.icmp_signed(">", x, y), x, y)

            def magnitude_bits(at, vector):
                bits = builder.load(vector_at(a_ptr, at, vector), align=align)
                return builder.and_(bits, ir.Constant(vector, [0x7FFFFFFF] * vector.count))

            blocks_ = builder.udiv(builder.shl(pairs, const(1)), const(rows_per_block))
            block_slot = cgutils.alloca_once_value(builder, ir.Constant(block_i, None))
            with cgutils.for_range(builder, blocks_) as loop:
                bits = magnitude_bits(builder.add(a_off_, builder.mul(loop.index, const(lanes_v))), block_i)
                builder.store(larger(bits, builder.load(block_slot)), block_slot)
            folded = ir.Constant(rows_i, None)
            for j in range(rows_per_block):
                lanes_j = ir.Constant(ir.VectorType(i32, MR), list(range(j * MR, (j + 1) * MR)))
                folded = larger(
                    folded,
                    builder.shuffle_vector(builder.load(block_slot), ir.Constant(block_i, ir.Undefined), lanes_j),
                )
            peak_slot = cgutils.alloca_once_value(builder, folded)
            done = builder.mul(blocks_, const(rows_per_block))
            with cgutils.for_range(builder, builder.sub(builder.shl(pairs, const(1)), done)) as loop:
                at = builder.add(a_off_, builder.mul(builder.add(done, loop.index), const(MR)))
                builder.store(larger(magnitude_bits(at, rows_i), builder.load(peak_slot)), peak_slot)
            peak_bits = builder.load(peak_slot)
            finite = builder.icmp_signed("<", peak_bits, ir.Constant(rows_i, [0x7F800000] * MR))
            peak = builder.bitcast(peak_bits, rows_f)
            zeros_f = ir.Constant(rows_f, None)
            scaled = builder.and_(finite, builder.fcmp_ordered(">", peak, zeros_f))  # 0: the row adds nothing here
            step = builder.select(scaled, builder.fdiv(peak, ir.Constant(rows_f, 32767.0)), zeros_f)
            inverse = builder.select(scaled, builder.fdiv(ir.Constant(rows_f, 32767.0), peak), zeros_f)
            evens = ir.Constant(ir.VectorType(i32, width), list(range(0, 2 * width, 2)))
            odds = ir.Constant(ir.VectorType(i32, width), list(range(1, 2 * width, 2)))

            keep = builder.select(finite, ir.Constant(rows_i, [-1] * MR), ir.Constant(rows_i, None))

            def quantised(k, masked):  # A's row k as int16 in the low halves of i32s (zeros where not finite)
                a_k = a_rows(k)
                if masked:
                    a_k = builder.bitcast(builder.and_(builder.bitcast(a_k, rows_i), keep), rows_f)
                q = builder.fptosi(builder.call(rint, [builder.fmul(a_k, inverse)]), rows_i)
                return builder.and_(q, ir.Constant(rows_i, [0xFFFF] * MR))

            sums = [[cgutils.alloca_once(builder, words) for _ in cols] for _ in range(MR)]

            def integer_products(masked):
                blocks = builder.udiv(builder.add(pairs, const(INT8_PAIRS_PER_SUM - 1)), const(INT8_PAIRS_PER_SUM))
                with cgutils.for_range(builder, blocks) as block:
                    u0 = builder.mul(block.index, const(INT8_PAIRS_PER_SUM))
                    count = builder.sub(pairs, u0)
                    count = builder.select(
                        builder.icmp_signed("<", count, const(INT8_PAIRS_PER_SUM)), count, const(INT8_PAIRS_PER_SUM)
                    )
                    for row in sums:
                        for slot in row:
                            builder.store(ir.Constant(words, None), slot)
                    with cgutils.for_range(builder, count) as loop:
                        u = builder.add(u0, loop.index)
                        bs = [
                            builder.sext(builder.sext(pair_bytes_at(u, q, v), shorts), wide)
                            for q in range(NP)
                            for v in range(NV)
                        ]
                        even = quantised(builder.shl(u, const(1)), masked)
                        odd = quantised(builder.add(builder.shl(u, const(1)), const(1)), masked)
                        both = builder.or_(even, builder.shl(odd, ir.Constant(rows_i, [16] * MR)))
                        for r in range(MR):
                            a_pair = splat_of(builder.extract_element(both, ir.Constant(i32, r)), words)
                            a_wide = builder.sext(builder.bitcast(a_pair, shorts), wide)
                            for slot, b_wide in zip(sums[r], bs):
                                products = builder.mul(a_wide, b_wide)
                                two = builder.add(
                                    builder.shuffle_vector(products, products, evens),
                                    builder.shuffle_vector(products, products, odds),
                                )
                                builder.store(builder.add(builder.load(slot), two), slot)
                    for r in range(MR):  # C += scale ⊙ (s_r · sum): no float32 sums live in the loop
                        s_r = splat_of(builder.extract_element(step, ir.Constant(i32, r)), vec)
                        for total, col, scale in zip(sums[r], cols, panel_scales()):
                            target = vector_at(c_ptr, builder.add(c_rows[r], const(col)))
                            in_a = builder.fmul(builder.sitofp(builder.load(total), vec), s_r)
                            total = builder.call(fma, [in_a, scale, builder.load(target, align=align)])
                            builder.store(total, target, align=align)

            def float_products():  # slots += the pairs of the non-finite rows, in float32
                with cgutils.for_range(builder, pairs) as loop:
                    u = loop.index
                    halves = []
                    for q in range(NP):
                        for v in range(NV):
                            both = pair_bytes_at(u, q, v)
                            halves.append(
                                (
                                    builder.sitofp(builder.shuffle_vector(both, both, evens), vec),
                                    builder.sitofp(builder.shuffle_vector(both, both, odds), vec),
                                )
                            )
                    for part, k in enumerate(
                        (builder.shl(u, const(1)), builder.add(builder.shl(u, const(1)), const(1)))
                    ):
                        a_k = builder.select(finite, zeros_f, a_rows(k))
                        for r in range(MR):
                            a_vec = splat_of(builder.extract_element(a_k, ir.Constant(i32, r)), vec)
                            for slot, half in zip(slots[r], halves):
                                builder.store(builder.call(fma, [a_vec, half[part], builder.load(slot)]), slot)

            # A tile of finite rows takes the integer products alone; one with an infinite or NaN
            # element in some rows takes them for the other rows (those rows' A as zeros), then the
            # pairs of those rows in float32 (the other rows' A as zeros).
            all_finite = builder.extract_element(finite, zero32)
            for r in range(1, MR):
                all_finite = builder.and_(all_finite, builder.extract_element(finite, ir.Constant(i32, r)))
            with builder.if_else(all_finite, likely=True) as (plain, special):
                with plain:
                    integer_products(masked=False)
                with special:
                    integer_products(masked=True)
                    float_products()
            return builder.shl(pairs, const(1))

        fma = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(vec, [vec, vec, vec]), f"llvm.fma.v{width}f{dtype.bitwidth}"
        )
        undef = ir.Constant(vec, ir.Undefined)
        splat = ir.Constant(ir.VectorType(ir.IntType(32), width), [0] * width)
        zero32 = ir.Constant(ir.IntType(32), 0)
        panel_width = const(NV * width)
        first = builder.add(b_off_, const(SCALE_BYTES * NV * width)) if fmt == "int8" else b_off_
        fma_from = int8_pairs() if fmt == "int8" and INT8_VNNI else const(0)
        with cgutils.for_range(builder, builder.sub(k_len_, fma_from)) as loop:
            k = builder.add(fma_from, loop.index)
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

        if fmt == "int8":  # C += scale ⊙ sum of the float32 products
            for r in range(MR):
                for slot, col, scale in zip(slots[r], cols, panel_scales()):
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
            if head and INT8_VNNI:  # int8: the pairs of rows back in column order
                panel = _in_row_order(panel, k_len, nr)
            for r in range(mr):
                start = c_off + r * ldc + q * nr
                if head and INT8_VNNI:
                    total = _int8_products(packed_a[:, r], panel, k_len)
                    c[start : start + nr] += total * b[start_b : start_b + head].view(np.float32)
                    continue
                total = c[start : start + nr] if head == 0 else np.zeros(nr, c.dtype)
                for k in range(k_len):
                    total += packed_a[k, r] * panel[k].astype(c.dtype)
                if head:
                    c[start : start + nr] += total * b[start_b : start_b + head].view(np.float32)

    def _in_row_order(panel, k_len, nr):
        even = k_len - k_len % 2
        out = panel.copy()
        out[:even] = panel[:even].reshape(even // 2, nr, 2).swapaxes(1, 2).reshape(even, nr)
        return out

    def _int8_products(a, panel, k_len):
        """sum_k a[k]·panel[k] as the kernel computes it: the pairs of rows with ``a`` quantised to
        int16 (exact integer sums), a last odd row in float32."""
        even = k_len - k_len % 2
        f32 = np.float32
        total = np.zeros(panel.shape[1], f32)
        peak = np.abs(a[:even]).max() if even else f32(0)
        if not np.isfinite(peak):
            for k in range(even):
                total += a[k] * panel[k].astype(f32)
        elif even:
            inverse = f32(32767) / peak if peak > 0 else f32(0)
            q = np.rint(a[:even] * inverse).astype(np.int64)
            total += (q @ panel[:even].astype(np.int64)).astype(f32)
            total *= peak / f32(32767)
        for k in range(even, k_len):
            total += a[k] * panel[k].astype(f32)
        return total
