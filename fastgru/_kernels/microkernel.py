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
def tile_fma(typingctx, c, a, b, at, mr, np_, nv):
    """C[r, q*NR + v*L + l] += sum_k A[k, r] * Bq[k, v*L + l] for r < MR, q < NP, v < NV, l < L.

    at : (c_off, ldc, a_off, b_off, b_stride, k_len), integers: where the operands are (below).

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
    if not (isinstance(at, types.BaseTuple) and len(at) == 6 and all(isinstance(x, types.Integer) for x in at)):
        return None
    fmt = weight_format(b.dtype, c.dtype)
    if fmt is None or (fmt == "bfloat16" and nv.literal_value % 2):
        return None
    shape = mr.literal_value, np_.literal_value, nv.literal_value
    sig = types.void(c, a, b, at, mr, np_, nv)

    def codegen(context, builder, signature, args):
        tile = _Tile(context, builder, signature, args, fmt, shape)
        tile.open_accumulators()
        k_from = _Int8Pairs(tile).emit() if fmt == "int8" and INT8_VNNI else tile.const(0)
        tile.fma_loop(k_from)
        tile.close_accumulators()
        return context.get_dummy_value()

    return sig, codegen


class _Tile:
    """The code generator of one ``tile_fma``: its operands as LLVM values, and an emitter per part of
    the tile (the weights' loads of each format, the accumulators, the loop of fused multiply-adds
    over k, the scaled sums of int8 panels). Each emitter appends its instructions at the builder's
    position, in the order the tile needs them."""

    def __init__(self, context, builder, signature, args, fmt, shape):
        """Emits the operands: the offsets and lengths sign-extended to i64 where narrower, then the
        data pointers of C, A and the panels (Numba's array structure: an alloca, a store and a
        load each); declares ``llvm.fma`` on vectors of C's type."""
        self.builder, self.fmt = builder, fmt
        self.MR, self.NP, self.NV = shape
        dtype = signature.args[0].dtype
        self.width = VECTOR_BYTES // (dtype.bitwidth // 8)
        self.scalar = context.get_value_type(dtype)
        self.vec = ir.VectorType(self.scalar, self.width)
        self.align = dtype.bitwidth // 8
        c_arr, a_arr, b_arr, at = args[:4]
        offsets = map(self._as_i64, cgutils.unpack_tuple(builder, at, 6))
        self.c_off, self.ldc, self.a_off, self.b_off, self.b_stride, self.k_len = offsets
        self.c_ptr, self.a_ptr, self.b_ptr = (
            context.make_array(signature.args[i])(context, builder, array).data
            for i, array in ((0, c_arr), (1, a_arr), (2, b_arr))
        )
        self.cols = [q * self.NV * self.width + v * self.width for q in range(self.NP) for v in range(self.NV)]
        self.fma = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(self.vec, [self.vec] * 3), f"llvm.fma.v{self.width}f{dtype.bitwidth}"
        )

    def _as_i64(self, value):
        return self.builder.sext(value, ir.IntType(64)) if value.type.width < 64 else value

    @staticmethod
    def const(value):
        """An i64 constant (an offset or a count)."""
        return ir.Constant(ir.IntType(64), value)

    @staticmethod
    def lane(value):
        """An i32 constant (a lane's index)."""
        return ir.Constant(ir.IntType(32), value)

    def vector_at(self, base, offset, vector=None):
        """Emits a pointer to a vector (of C's type unless ``vector``) at element ``offset`` of ``base``:
        a getelementptr and a bitcast."""
        return self.builder.bitcast(self.builder.gep(base, [offset]), (vector or self.vec).as_pointer())

    def c_at(self, r, col):
        """Emits a pointer to C's vector at row r of the tile, column ``col``: an add, a
        getelementptr and a bitcast."""
        return self.vector_at(self.c_ptr, self.builder.add(self.c_rows[r], self.const(col)))

    def splat(self, value, vector):
        """Emits ``value`` broadcast to every lane of ``vector`` (a type of ``width`` lanes): an
        insertelement into lane 0 of undef and a shufflevector with the zero mask."""
        builder = self.builder
        spread = builder.insert_element(ir.Constant(vector, ir.Undefined), value, self.lane(0))
        zeros = ir.Constant(ir.VectorType(ir.IntType(32), self.width), [0] * self.width)
        return builder.shuffle_vector(spread, ir.Constant(vector, ir.Undefined), zeros)

    def exact_weights(self, offset):
        """Emits the load of one vector of weights of C's type at ``offset`` in the panels (aligned
        to an element); returns [it]."""
        return [self.builder.load(self.vector_at(self.b_ptr, offset), align=self.align)]

    def bfloat16_weights(self, offset):
        """Emits the two float32 vectors of a pair (``bf16_pairs``) at ``offset``: one load of the
        pair's 32-bit words (2-byte aligned), a shl by 16 (the words' low halves: the first vector)
        and an and with 0xFFFF0000 (their high halves: the second), each bitcast to float32, which
        is exact; returns [first, second]."""
        builder = self.builder
        words = ir.VectorType(ir.IntType(32), self.width)
        bits = builder.load(self.vector_at(self.b_ptr, offset, words), align=2)
        sixteen, high = ir.Constant(words, [16] * self.width), ir.Constant(words, [0xFFFF0000] * self.width)
        return [
            builder.bitcast(builder.shl(bits, sixteen), self.vec),
            builder.bitcast(builder.and_(bits, high), self.vec),
        ]

    def int8_weights(self, offset):
        """Emits one vector of int8 weights at ``offset`` widened to float32: a load of ``width``
        bytes (unaligned) and a sitofp, which is exact; returns [it]."""
        bytes_ = ir.VectorType(ir.IntType(8), self.width)
        return [self.builder.sitofp(self.builder.load(self.vector_at(self.b_ptr, offset, bytes_), align=1), self.vec)]

    def open_accumulators(self):
        """Emits the tile's accumulators: the offsets of C's MR rows (a mul and an add each), an
        alloca per row and vector (in the entry block), each set to C's vector (a load) or, for
        int8 panels, to zeros (their sums start from zero and go to C scaled, at the end); then,
        for int8 panels, the add that skips a panel's scales to its first weight."""
        builder = self.builder
        self.c_rows = [builder.add(self.c_off, builder.mul(self.ldc, self.const(r))) for r in range(self.MR)]
        self.slots = [[cgutils.alloca_once(builder, self.vec) for _ in self.cols] for _ in range(self.MR)]
        for r in range(self.MR):
            for slot, col in zip(self.slots[r], self.cols):
                if self.fmt == "int8":
                    builder.store(ir.Constant(self.vec, None), slot)
                else:
                    builder.store(builder.load(self.c_at(r, col), align=self.align), slot)
        scales = SCALE_BYTES * self.NV * self.width
        self.first = builder.add(self.b_off, self.const(scales)) if self.fmt == "int8" else self.b_off

    def accumulate(self, slots, a_vec, b_vecs):
        """Emits slot = fma(a_vec, b, slot) for each accumulator and weight vector: a load, a call of
        ``llvm.fma`` and a store each."""
        builder = self.builder
        for slot, b_vec in zip(slots, b_vecs):
            builder.store(builder.call(self.fma, [a_vec, b_vec, builder.load(slot)]), slot)

    def fma_loop(self, k_from):
        """Emits the loop over the rows k = ``k_from``, ..., k_len - 1 of A and the panels: per k, the
        NP·NV weight vectors of row k of the panels (the format's loads, a pair of vectors per load
        for bfloat16), then for each row r of the tile a load of A[k, r], its broadcast and a fused
        multiply-add into each of the row's accumulators."""
        builder = self.builder
        load, step = {
            "exact": (self.exact_weights, 1),
            "bfloat16": (self.bfloat16_weights, 2),
            "int8": (self.int8_weights, 1),
        }[self.fmt]
        with cgutils.for_range(builder, builder.sub(self.k_len, k_from)) as loop:
            k = builder.add(k_from, loop.index)
            row = builder.add(self.first, builder.mul(k, self.const(self.NV * self.width)))
            b_vecs = []
            for q in range(self.NP):
                panel = builder.add(row, builder.mul(self.b_stride, self.const(q)))
                for v in range(0, self.NV, step):
                    b_vecs.extend(load(builder.add(panel, self.const(v * self.width))))
            a_row = builder.add(self.a_off, builder.mul(k, self.const(self.MR)))
            for r in range(self.MR):
                a_val = builder.load(builder.gep(self.a_ptr, [builder.add(a_row, self.const(r))]))
                self.accumulate(self.slots[r], self.splat(a_val, self.vec), b_vecs)

    def panel_scales(self):
        """Emits the loads of the int8 panels' column scales, at their heads: NP·NV float32 vectors,
        in the order of ``cols``."""
        builder = self.builder
        scales = []
        for q in range(self.NP):
            head = builder.gep(self.b_ptr, [builder.add(self.b_off, builder.mul(self.b_stride, self.const(q)))])
            floats = builder.bitcast(head, self.scalar.as_pointer())
            scales.extend(
                builder.load(self.vector_at(floats, self.const(v * self.width)), align=self.align)
                for v in range(self.NV)
            )
        return scales

    def add_scaled(self, sums, step=None):
        """Emits C += scale ⊙ sum for the tile's int8 sums (allocas as ``slots``), row by row: the
        panels' scales, then per vector the load of the sum, one fused multiply-add with C's vector
        and its store. With ``step`` (MR float32, one per row), the sums are int32, each converted
        (sitofp) and multiplied by its row's step first."""
        builder = self.builder
        for r in range(self.MR):
            s_r = None if step is None else self.splat(builder.extract_element(step, self.lane(r)), self.vec)
            for total, col, scale in zip(sums[r], self.cols, self.panel_scales()):
                target = self.c_at(r, col)
                value = builder.load(total)
                if s_r is not None:
                    value = builder.fmul(builder.sitofp(value, self.vec), s_r)
                value = builder.call(self.fma, [value, scale, builder.load(target, align=self.align)])
                builder.store(value, target, align=self.align)

    def close_accumulators(self):
        """Emits the tile's end: C += scale ⊙ sum for int8 panels (``add_scaled``), else a store of
        each accumulator into C."""
        if self.fmt == "int8":
            self.add_scaled(self.slots)
            return
        builder = self.builder
        for r in range(self.MR):
            for slot, col in zip(self.slots[r], self.cols):
                builder.store(builder.load(slot), self.c_at(r, col), align=self.align)


class _Int8Pairs:
    """The code generator of a tile's integer products of int8 weights (``INT8_VNNI``): the pairs of
    rows (2u, 2u + 1) for 2u + 1 < k_len, A quantised per row to int16 (into C, scaled), or in
    float32 where A's row has a non-finite element (into the tile's accumulators)."""

    def __init__(self, tile):
        """Emits the number of pairs (an lshr of k_len); declares ``llvm.rint`` on MR float32."""
        self.tile, builder, width = tile, tile.builder, tile.width
        i32 = ir.IntType(32)
        self.rows_f, self.rows_i = ir.VectorType(tile.scalar, tile.MR), ir.VectorType(i32, tile.MR)
        self.words, self.shorts = ir.VectorType(i32, width), ir.VectorType(ir.IntType(16), 2 * width)
        self.wide, self.pair_bytes = ir.VectorType(i32, 2 * width), ir.VectorType(ir.IntType(8), 2 * width)
        self.rint = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(self.rows_f, [self.rows_f]), f"llvm.rint.v{tile.MR}f32"
        )
        self.pairs = builder.lshr(tile.k_len, tile.const(1))
        self.evens = ir.Constant(ir.VectorType(i32, width), list(range(0, 2 * width, 2)))
        self.odds = ir.Constant(ir.VectorType(i32, width), list(range(1, 2 * width, 2)))

    def emit(self):
        """Emits the pairs' products: the rows' peaks and steps, an int32 sum per accumulator (allocas),
        then a branch on whether every row of A is finite: the integer products alone (likely), or
        the integer products of the finite rows and the float32 ones of the others. Returns the
        first row of k left (2·pairs), for the float32 loop."""
        tile, builder = self.tile, self.tile.builder
        self.scale_rows(self.row_peaks())
        self.sums = [[cgutils.alloca_once(builder, self.words) for _ in tile.cols] for _ in range(tile.MR)]
        # A tile of finite rows takes the integer products alone; one with an infinite or NaN
        # element in some rows takes them for the other rows (those rows' A as zeros), then the
        # pairs of those rows in float32 (the other rows' A as zeros).
        all_finite = builder.extract_element(self.finite, tile.lane(0))
        for r in range(1, tile.MR):
            all_finite = builder.and_(all_finite, builder.extract_element(self.finite, tile.lane(r)))
        with builder.if_else(all_finite, likely=True) as (plain, special):
            with plain:
                self.integer_products(masked=False)
            with special:
                self.integer_products(masked=True)
                self.float_products()
        return builder.shl(self.pairs, tile.const(1))

    def _larger(self, x, y):
        builder = self.tile.builder
        return builder.select(builder.icmp_signed(">", x, y), x, y)

    def _magnitude_bits(self, at, vector):
        tile = self.tile
        bits = tile.builder.load(tile.vector_at(tile.a_ptr, at, vector), align=tile.align)
        return tile.builder.and_(bits, ir.Constant(vector, [0x7FFFFFFF] * vector.count))

    def row_peaks(self):
        """Emits the rows' peaks |A| over the pairs' rows of k, as integers (MR i32): |a|'s bits (sign
        cleared) order as |a| does, above 0x7F800000 for NaN, so the peak's bits say at once whether
        the row is finite. A's first 2·pairs rows are 2·pairs·MR floats in a row, taken V = lcm(MR,
        L) at a time in a loop (a load, an and, a signed max), folded into the MR rows (lane j is
        row j mod MR: shufflevectors and maxima), then a row at a time in a second loop."""
        tile, builder = self.tile, self.tile.builder
        lanes_v = math.lcm(tile.MR, tile.width)
        block_i = ir.VectorType(ir.IntType(32), lanes_v)
        rows_per_block = lanes_v // tile.MR
        blocks = builder.udiv(builder.shl(self.pairs, tile.const(1)), tile.const(rows_per_block))
        block_slot = cgutils.alloca_once_value(builder, ir.Constant(block_i, None))
        with cgutils.for_range(builder, blocks) as loop:
            bits = self._magnitude_bits(builder.add(tile.a_off, builder.mul(loop.index, tile.const(lanes_v))), block_i)
            builder.store(self._larger(bits, builder.load(block_slot)), block_slot)
        folded = ir.Constant(self.rows_i, None)
        for j in range(rows_per_block):
            lanes_j = ir.Constant(ir.VectorType(ir.IntType(32), tile.MR), list(range(j * tile.MR, (j + 1) * tile.MR)))
            folded = self._larger(
                folded, builder.shuffle_vector(builder.load(block_slot), ir.Constant(block_i, ir.Undefined), lanes_j)
            )
        peak_slot = cgutils.alloca_once_value(builder, folded)
        done = builder.mul(blocks, tile.const(rows_per_block))
        with cgutils.for_range(builder, builder.sub(builder.shl(self.pairs, tile.const(1)), done)) as loop:
            at = builder.add(tile.a_off, builder.mul(builder.add(done, loop.index), tile.const(tile.MR)))
            builder.store(self._larger(self._magnitude_bits(at, self.rows_i), builder.load(peak_slot)), peak_slot)
        return builder.load(peak_slot)

    def scale_rows(self, peak_bits):
        """Emits, from the rows' peaks, which rows are finite (an icmp), each row's step s_r = peak /
        32767 and its inverse (fdivs), both 0 where the row is not finite or all zeros (it adds
        nothing here), and the mask that keeps the finite rows' bits (a select)."""
        builder = self.tile.builder
        self.finite = builder.icmp_signed("<", peak_bits, ir.Constant(self.rows_i, [0x7F800000] * self.tile.MR))
        peak = builder.bitcast(peak_bits, self.rows_f)
        zeros_f = ir.Constant(self.rows_f, None)
        scaled = builder.and_(self.finite, builder.fcmp_ordered(">", peak, zeros_f))
        self.step = builder.select(scaled, builder.fdiv(peak, ir.Constant(self.rows_f, 32767.0)), zeros_f)
        self.inverse = builder.select(scaled, builder.fdiv(ir.Constant(self.rows_f, 32767.0), peak), zeros_f)
        self.keep = builder.select(
            self.finite, ir.Constant(self.rows_i, [-1] * self.tile.MR), ir.Constant(self.rows_i, None)
        )

    def a_rows(self, k):
        """Emits the load of A's MR elements of row k (a mul, an add, a getelementptr, a bitcast)."""
        tile, builder = self.tile, self.tile.builder
        at = builder.add(tile.a_off, builder.mul(k, tile.const(tile.MR)))
        return builder.load(tile.vector_at(tile.a_ptr, at, self.rows_f), align=tile.align)

    def pair_bytes_at(self, u, q, v):
        """Emits the load of vector v of panel q at rows (2u, 2u + 1): 2·L bytes, the two rows column by
        column (unaligned)."""
        tile, builder = self.tile, self.tile.builder
        at = builder.add(
            tile.first,
            builder.add(
                builder.mul(u, tile.const(2 * tile.NV * tile.width)), builder.mul(tile.b_stride, tile.const(q))
            ),
        )
        return builder.load(
            tile.vector_at(tile.b_ptr, builder.add(at, tile.const(2 * v * tile.width)), self.pair_bytes), align=1
        )

    def quantised(self, k, masked):
        """Emits A's row k as int16 in the low halves of i32s: the row's load (its non-finite rows'
        bits cleared where ``masked``: zeros), times the inverse steps, rounded to the nearest
        (``llvm.rint``), converted (fptosi) and masked to 16 bits."""
        builder, rows_i = self.tile.builder, self.rows_i
        a_k = self.a_rows(k)
        if masked:
            a_k = builder.bitcast(builder.and_(builder.bitcast(a_k, rows_i), self.keep), self.rows_f)
        q = builder.fptosi(builder.call(self.rint, [builder.fmul(a_k, self.inverse)]), rows_i)
        return builder.and_(q, ir.Constant(rows_i, [0xFFFF] * self.tile.MR))

    def integer_products(self, masked):
        """Emits the integer products of the pairs, INT8_PAIRS_PER_SUM pairs at a time: a loop over the
        blocks of pairs whose body sets the int32 sums to zero, runs a loop over the block's pairs
        (``pair_products``), then adds the sums to C, each times its row's step and its column's
        scale (``add_scaled``): no float32 sums live in the loop."""
        tile, builder = self.tile, self.tile.builder
        per_sum = tile.const(INT8_PAIRS_PER_SUM)
        blocks = builder.udiv(builder.add(self.pairs, tile.const(INT8_PAIRS_PER_SUM - 1)), per_sum)
        with cgutils.for_range(builder, blocks) as block:
            u0 = builder.mul(block.index, per_sum)
            count = builder.sub(self.pairs, u0)
            count = builder.select(builder.icmp_signed("<", count, per_sum), count, per_sum)
            for row in self.sums:
                for slot in row:
                    builder.store(ir.Constant(self.words, None), slot)
            with cgutils.for_range(builder, count) as loop:
                self.pair_products(builder.add(u0, loop.index), masked)
            tile.add_scaled(self.sums, self.step)

    def pair_products(self, u, masked):
        """Emits the products of the pair of rows (2u, 2u + 1) into the int32 sums: each vector of pairs
        of bytes sign-extended to 2·L i32 (through i16), A's two rows quantised and packed into one
        i32 per row of the tile (row 2u's in the low half); then per row of the tile its pair
        broadcast and sign-extended alike and, per vector, a multiply of the 2·L lanes whose even
        and odd lanes are added (two shufflevectors and an add: the pattern LLVM selects a
        multiply-add of pairs for, VPMADDWD or VPDPWSSD) to the row's sum (a load, an add, a store)."""
        tile, builder = self.tile, self.tile.builder
        b_wide = [
            builder.sext(builder.sext(self.pair_bytes_at(u, q, v), self.shorts), self.wide)
            for q in range(tile.NP)
            for v in range(tile.NV)
        ]
        even = self.quantised(builder.shl(u, tile.const(1)), masked)
        odd = self.quantised(builder.add(builder.shl(u, tile.const(1)), tile.const(1)), masked)
        both = builder.or_(even, builder.shl(odd, ir.Constant(self.rows_i, [16] * tile.MR)))
        for r in range(tile.MR):
            a_pair = tile.splat(builder.extract_element(both, tile.lane(r)), self.words)
            a_wide = builder.sext(builder.bitcast(a_pair, self.shorts), self.wide)
            for slot, weights in zip(self.sums[r], b_wide):
                products = builder.mul(a_wide, weights)
                two = builder.add(
                    builder.shuffle_vector(products, products, self.evens),
                    builder.shuffle_vector(products, products, self.odds),
                )
                builder.store(builder.add(builder.load(slot), two), slot)

    def float_products(self):
        """Emits the pairs of the non-finite rows of A in float32, into the tile's accumulators: a loop
        over the pairs whose body splits each vector of pairs of bytes into its two rows of k (a
        shufflevector of the even bytes, one of the odd, each widened by sitofp), then, for each of
        the two rows of k, A's elements of the tile's rows that are not finite (a select: zeros in
        the finite rows), broadcast and accumulated (``accumulate``)."""
        tile, builder = self.tile, self.tile.builder
        zeros_f = ir.Constant(self.rows_f, None)
        with cgutils.for_range(builder, self.pairs) as loop:
            u = loop.index
            halves = []
            for q in range(tile.NP):
                for v in range(tile.NV):
                    both = self.pair_bytes_at(u, q, v)
                    even = builder.sitofp(builder.shuffle_vector(both, both, self.evens), tile.vec)
                    halves.append((even, builder.sitofp(builder.shuffle_vector(both, both, self.odds), tile.vec)))
            one = tile.const(1)
            for part, k in enumerate((builder.shl(u, one), builder.add(builder.shl(u, one), one))):
                a_k = builder.select(self.finite, zeros_f, self.a_rows(k))
                for r in range(tile.MR):
                    a_vec = tile.splat(builder.extract_element(a_k, tile.lane(r)), tile.vec)
                    tile.accumulate(tile.slots[r], a_vec, [half[part] for half in halves])


if config.DISABLE_JIT:  # pure Python (NUMBA_DISABLE_JIT=1, e.g. for line coverage)

    def tile_fma(c, a, b, at, mr, np_, nv):  # noqa: F811
        c_off, ldc, a_off, b_off, b_stride, k_len = at
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
