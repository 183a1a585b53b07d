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

from .._isa import BF16_DOT, GEOMETRY

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


#: bfloat16s that A's elements are split into for the dot products.
BF16_TERMS = 3


def bf16_k_pairs(bits, k_len, nr):
    """bfloat16 panels (uint16, ``bits`` (..., k_len*NR): k_len rows of NR columns in order) in the
    dot products' order (``BF16_DOT``): the 32-bit word of column c in row pair u holds row 2u's
    weight in its low half and row 2u + 1's in its high half; a last odd row stays in
    ``bf16_pairs``' order. NumPy."""
    lead, even = bits.shape[:-1], k_len - k_len % 2
    rows = bits.reshape(*lead, k_len, nr)
    out = np.empty_like(rows)
    pairs = rows[..., :even, :].reshape(*lead, even // 2, 2, nr).swapaxes(-1, -2)
    out[..., :even, :] = pairs.reshape(*lead, even, nr)
    out[..., even:, :] = bf16_pairs(rows[..., even:, :], nr)
    return out.reshape(bits.shape)


def bf16_layout(bits, k_len, nr):
    """bfloat16 panels (as ``bf16_k_pairs`` takes them) in the layout this process's kernels read."""
    return bf16_k_pairs(bits, k_len, nr) if BF16_DOT else bf16_pairs(bits, nr)


class _BFloat(ir.types._BaseFloatType):
    """LLVM's bfloat, which llvmlite does not name (the dot products' operands)."""

    null = "0.0"
    intrinsic_name = "bf16"

    def __str__(self):
        return "bfloat"


_BFloat._create_instance()  # llvmlite's float types are singletons


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
        one load, a shift and a mask make the two float32 vectors (exact). Where ``BF16_DOT``, two
        rows' in one instead (``bf16_k_pairs``), multiplied by AVX512_BF16's dot products: A's two
        elements split into bfloat16 halves hi + lo (below);
        int8: the panel starts with NR float32 scales (SCALE_BYTES each), its weights follow at
        b_off + q*b_stride + SCALE_BYTES*NR, and C[r, col] += scale[col] * sum_k A[k, r] * B[k, col]
        (the sum from zero, then one fused multiply-add).
    mr, np_, nv : integer literals (MR rows, NP panels, NV vectors per panel).

    The dot products (``BF16_DOT``) take rows k = 2u, 2u + 1 together: a = hi + lo + e with hi = a
    truncated to bfloat16, lo = a - hi (exact in float32) rounded to the nearest bfloat16, so
    |e| <= 2**-16·|a|, and c += w[2u+1]·hi[2u+1] + w[2u]·hi[2u], then the same with lo: the
    products are exact, each sum rounded to float32 (VDPBF16PS; it also flushes subnormal inputs
    and results to zero). An infinite or NaN a keeps its value in hi (lo = 0). A last odd row is
    multiplied as the shifts do.
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

        def dot_pairs(builder, k_len_):
            """c += the products of rows (2u, 2u + 1) for 2u + 1 < k_len, by VDPBF16PS; returns the
            first row left (k_len rounded down to even)."""
            i32, words = ir.IntType(32), ir.VectorType(ir.IntType(32), width)
            halves = ir.VectorType(_BFloat(), 2 * width)
            dot = cgutils.get_or_insert_function(
                builder.module,
                ir.FunctionType(vec, [vec, halves, halves]),
                f"llvm.x86.avx512bf16.dpbf16ps.{VECTOR_BYTES * 8}",
            )
            rows_a = ir.VectorType(scalar, MR)
            ints_a = ir.VectorType(i32, MR)

            def ints(value):
                return ir.Constant(ints_a, [value] * MR)

            def split(a_vec):  # BF16_TERMS bfloat16s summing to a_vec, their bits in the low halves of i32s
                def nearest(bits):  # to the nearest bfloat16, ties to even
                    carry = builder.and_(builder.lshr(bits, ints(16)), ints(1))
                    return builder.and_(builder.add(builder.add(bits, ints(0x7FFF)), carry), ints(0xFFFF0000))

                def all_ones_exponent(bits):
                    return builder.icmp_unsigned("==", builder.and_(bits, ints(0x7F800000)), ints(0x7F800000))

                bits = builder.bitcast(a_vec, ints_a)
                special = all_ones_exponent(bits)  # infinite or NaN: the value itself, quieted, then zeros
                kept = builder.or_(builder.and_(bits, ints(0xFFFF0000)), ints(0x00400000))
                kept = builder.select(
                    builder.fcmp_unordered("uno", a_vec, a_vec), kept, builder.and_(bits, ints(0xFFFF0000))
                )
                first = nearest(bits)
                first = builder.select(
                    all_ones_exponent(first), builder.and_(bits, ints(0xFFFF0000)), first
                )  # no overflow
                first = builder.select(special, kept, first)
                rest = builder.select(
                    special, ir.Constant(rows_a, None), builder.fsub(a_vec, builder.bitcast(first, rows_a))
                )
                terms = [first]
                for _ in range(1, BF16_TERMS):
                    term = nearest(builder.bitcast(rest, ints_a))
                    rest = builder.fsub(rest, builder.bitcast(term, rows_a))
                    terms.append(term)
                return [builder.lshr(term, ints(16)) for term in terms]

            splat_words = ir.Constant(ir.VectorType(i32, width), [0] * width)
            pairs = builder.lshr(k_len_, const(1))
            with cgutils.for_range(builder, pairs) as loop:
                u = loop.index
                row = builder.add(first, builder.mul(u, builder.mul(panel_width, const(2))))
                bs = []
                for q in range(NP):
                    panel = builder.add(row, builder.mul(b_stride_, const(q)))
                    for v in range(NV):
                        at = vector_at(b_ptr, builder.add(panel, const(2 * v * width)), words)
                        bs.append(builder.bitcast(builder.load(at, align=2), halves))
                a_at = builder.add(a_off_, builder.mul(u, const(2 * MR)))
                even = builder.load(vector_at(a_ptr, a_at, rows_a), align=align)
                odd = builder.load(vector_at(a_ptr, builder.add(a_at, const(MR)), rows_a), align=align)
                pairs_ = [builder.or_(e, builder.shl(o, ints(16))) for e, o in zip(split(even), split(odd))]
                for r in range(MR):
                    a_pairs = []
                    for pair in pairs_:
                        word = builder.extract_element(pair, ir.Constant(i32, r))
                        spread = builder.insert_element(ir.Constant(words, ir.Undefined), word, zero32)
                        spread = builder.shuffle_vector(spread, ir.Constant(words, ir.Undefined), splat_words)
                        a_pairs.append(builder.bitcast(spread, halves))
                    for slot, b_vec in zip(slots[r], bs):
                        total = builder.load(slot)
                        for a_pair in a_pairs:
                            total = builder.call(dot, [total, a_pair, b_vec])
                        builder.store(total, slot)
            return builder.shl(pairs, const(1))

        fma = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(vec, [vec, vec, vec]), f"llvm.fma.v{width}f{dtype.bitwidth}"
        )
        undef = ir.Constant(vec, ir.Undefined)
        splat = ir.Constant(ir.VectorType(ir.IntType(32), width), [0] * width)
        zero32 = ir.Constant(ir.IntType(32), 0)
        panel_width = const(NV * width)
        first = builder.add(b_off_, const(SCALE_BYTES * NV * width)) if fmt == "int8" else b_off_
        fma_from = const(0)
        if fmt == "bfloat16" and BF16_DOT:
            fma_from = dot_pairs(builder, k_len_)
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
            if b.dtype == np.uint16:  # the halves back in row and column order
                panel = (_bf16_in_order(panel, k_len, nr, nv).astype(np.uint32) << 16).view(np.float32)
            for r in range(mr):
                start = c_off + r * ldc + q * nr
                total = c[start : start + nr] if head == 0 else np.zeros(nr, c.dtype)
                for k in range(k_len):
                    total += packed_a[k, r] * panel[k].astype(c.dtype)
                if head:
                    c[start : start + nr] += total * b[start_b : start_b + head].view(np.float32)

    def _bf16_in_order(panel, k_len, nr, nv):
        """A (k_len, NR) panel of bfloat16 bits in tile_fma's layout, back in row and column order."""
        lanes_, even = nr // nv, (k_len - k_len % 2) if BF16_DOT else 0
        out = np.empty_like(panel)
        out[:even] = panel[:even].reshape(even // 2, nr, 2).swapaxes(1, 2).reshape(even, nr)
        tail = panel[even:]
        out[even:] = tail.reshape(-1, nv // 2, lanes_, 2).transpose(0, 1, 3, 2).reshape(tail.shape)
        return out
