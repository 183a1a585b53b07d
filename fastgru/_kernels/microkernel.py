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
from numba.extending import intrinsic, register_jitable

from .._config import JIT_OPTIONS
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


#: Pairs of rows whose int32 sums the int8 products accumulate before they go to float32:
#: 128·2·32767·127 < 2**31.
INT8_PAIRS_PER_SUM = 128

#: Bytes of one column's sum of weights over a block of INT8_PAIRS_PER_SUM pairs (an int32).
SUM_BYTES = 4


@register_jitable(**JIT_OPTIONS)  # plain Python when packing, inlined into the kernels
def int8_head(k_len):
    """Bytes per column at the head of an int8 panel of k_len rows: the column's float32 scale, then,
    where ``INT8_VNNI``, its int32 sum of weights over each block of INT8_PAIRS_PER_SUM pairs (the
    quads' rows of the block only: ``int8_panels``)."""
    if not INT8_VNNI:
        return SCALE_BYTES
    return SCALE_BYTES + SUM_BYTES * ((k_len // 2 + INT8_PAIRS_PER_SUM - 1) // INT8_PAIRS_PER_SUM)


def int8_panels(values, scales, k_len, nr):
    """int8 panels as ``tile_fma`` reads them, from ``values`` (..., k_len*NR: k_len rows of NR columns
    in order, int8) and ``scales`` (..., NR, float32): the head (``int8_head``), then the rows. Where
    ``INT8_VNNI`` the rows come in quads, rows 4u..4u + 3 interleaved column by column (column c's
    four weights side by side, row 4u's first), for k < 4·(k_len // 4); then, if k_len // 2 is odd,
    the pair of rows after them interleaved alike; then a last odd row as it was. Elsewhere the rows
    in order. NumPy."""
    lead = values.shape[:-1]
    rows = values.reshape(*lead, k_len, nr)
    head = int8_head(k_len) * nr
    out = np.empty((*lead, head + k_len * nr), np.int8)
    out[..., : SCALE_BYTES * nr] = np.ascontiguousarray(scales, np.float32).view(np.int8)
    body = rows.copy()
    if INT8_VNNI:
        q4 = 4 * (k_len // 4)
        body[..., :q4, :] = rows[..., :q4, :].reshape(*lead, q4 // 4, 4, nr).swapaxes(-1, -2).reshape(*lead, q4, nr)
        if (k_len // 2) % 2:
            body[..., q4 : q4 + 2, :] = rows[..., q4 : q4 + 2, :].swapaxes(-1, -2).reshape(*lead, 2, nr)
        block = 2 * INT8_PAIRS_PER_SUM
        starts = range(0, 2 * (k_len // 2), block)
        sums = [rows[..., k : min(k + block, q4), :].sum(axis=-2, dtype=np.int32) for k in starts]
        if sums:  # none for a single row
            out[..., SCALE_BYTES * nr : head] = np.stack(sums, axis=-2).view(np.int8).reshape(*lead, -1)
    out[..., head:] = body.reshape(*lead, k_len * nr)
    return out


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
        int8: the panel starts with its head (``int8_head``: NR float32 scales, then where
        ``INT8_VNNI`` NR int32 column sums per block), its weights follow at
        b_off + q*b_stride + int8_head(k_len)*NR, and C[r, col] += scale[col] * sum_k A[k, r] * B[k, col]
        (the sum from zero, then one fused multiply-add); where ``INT8_VNNI``, in quads and a pair of
        rows (``int8_panels``), by integer products (below).
    mr, np_, nv : integer literals (MR rows, NP panels, NV vectors per panel).

    Where ``INT8_VNNI``, int8 weights multiply A quantised per row to 16 bits: A[k, r] ≈ s_r·a_kr with s_r = max_k
    |A[k, r]| / 32767 and a_kr = round(A[k, r] / s_r) (|error| <= s_r/2 and a float32 rounding), over
    the pairs of rows (k < 2·(k_len // 2)), in exact integer sums: four rows per byte dot product
    (VPDPBUSD, ``_Int8Products``), a pair left after the quads by a multiply-add of pairs (VPMADDWD).
    The int32 sums of 128 pairs of rows (at most 2**30.1) go to float32, times s_r, into C: the same
    integers whatever the instructions or the tile, so the same bits. A row of A with an infinite or
    NaN element is multiplied in float32 instead, and a last odd row: each row's result depends on
    that row alone, whatever the tile.
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
        k_from = _Int8Products(tile).emit() if fmt == "int8" and INT8_VNNI else tile.const(0)
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
        self.first = builder.add(self.b_off, self.int8_head()) if self.fmt == "int8" else self.b_off

    def int8_head(self):
        """Emits the bytes of an int8 panel's head, ``int8_head``(k_len)·NR: NR scales and, where
        ``INT8_VNNI``, NR sums per block of INT8_PAIRS_PER_SUM pairs (an lshr, an add, a udiv, a mul)."""
        nr, builder = self.NV * self.width, self.builder
        if not INT8_VNNI:
            return self.const(SCALE_BYTES * nr)
        pairs = builder.lshr(self.k_len, self.const(1))
        blocks = builder.udiv(builder.add(pairs, self.const(INT8_PAIRS_PER_SUM - 1)), self.const(INT8_PAIRS_PER_SUM))
        return builder.add(self.const(SCALE_BYTES * nr), builder.mul(blocks, self.const(SUM_BYTES * nr)))

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


class _Int8Products:
    """The code generator of a tile's integer products of int8 weights (``INT8_VNNI``) over the pairs of
    rows k < 2·(k_len // 2), laid out as ``int8_panels`` says: quads of rows, then a pair when the
    pairs are odd. A is quantised per row to int16, into C scaled; a row with a non-finite element
    goes in float32, into the tile's accumulators.

    VPDPBUSD adds to each int32 lane the four products of unsigned bytes (A's) by signed bytes (a
    column's four weights of a quad). A's 16-bit a is therefore offset, u = a + 32768 = 256·hi + lo
    with hi and lo bytes, and Σ a·w = 256·Σ hi·w + Σ lo·w - 32768·Σ w, the last sum read from the
    panel's head (``int8_panels``). A one-row tile keeps the hi and lo sums apart in one pass
    (``one_row_quads``); a tile of several rows would need twice its registers for that, and takes
    two passes over each block's weights instead (``quads_in_passes``)."""

    def __init__(self, tile):
        """Emits the numbers of pairs and quads (lshrs); declares ``llvm.rint`` on MR float32 and the
        byte dot product (``llvm.x86.avx512.vpdpbusd.512``: the vectors are 16 int32)."""
        self.tile, builder, width = tile, tile.builder, tile.width
        i32 = ir.IntType(32)
        self.rows_f, self.rows_i = ir.VectorType(tile.scalar, tile.MR), ir.VectorType(i32, tile.MR)
        self.words, self.shorts = ir.VectorType(i32, width), ir.VectorType(ir.IntType(16), 2 * width)
        self.wide = ir.VectorType(i32, 2 * width)
        module = builder.module
        self.rint = cgutils.get_or_insert_function(
            module, ir.FunctionType(self.rows_f, [self.rows_f]), f"llvm.rint.v{tile.MR}f32"
        )
        self.dot = cgutils.get_or_insert_function(
            module, ir.FunctionType(self.words, [self.words] * 3), "llvm.x86.avx512.vpdpbusd.512"
        )
        self.pairs = builder.lshr(tile.k_len, tile.const(1))
        self.quads = builder.lshr(tile.k_len, tile.const(2))
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
        if tile.MR == 1:
            self.high = [cgutils.alloca_once(builder, self.words) for _ in tile.cols]
            self.low = [cgutils.alloca_once(builder, self.words) for _ in tile.cols]
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

    def group_bytes(self, k0, q, v, group, vector=None):
        """Emits the load of vector v of panel q at the group of ``group`` rows from k0 (a quad or a
        pair, ``int8_panels``): group·L bytes, the rows column by column (unaligned), as ``vector``
        (default: bytes)."""
        tile, builder = self.tile, self.tile.builder
        at = builder.add(
            builder.add(tile.first, builder.mul(tile.b_stride, tile.const(q))),
            builder.add(builder.mul(k0, tile.const(tile.NV * tile.width)), tile.const(v * group * tile.width)),
        )
        vector = vector or ir.VectorType(ir.IntType(8), group * tile.width)
        return builder.load(tile.vector_at(tile.b_ptr, at, vector), align=1)

    def groups(self, k0, group, vector=None):
        """``group_bytes`` of every vector of the tile's panels, in the order of ``cols``."""
        tile = self.tile
        return [self.group_bytes(k0, q, v, group, vector) for q in range(tile.NP) for v in range(tile.NV)]

    def row_of(self, vector, group, j):
        """Emits row j of a vector of a group of ``group`` rows (``group_bytes``): its byte j of each
        column (a shufflevector)."""
        width = self.tile.width
        mask = ir.Constant(ir.VectorType(ir.IntType(32), width), [group * c + j for c in range(width)])
        return self.tile.builder.shuffle_vector(vector, vector, mask)

    def integer_products(self, masked):
        """Emits the integer products, INT8_PAIRS_PER_SUM pairs at a time: a loop over the blocks whose
        body sets the int32 sums to zero, takes the block's quads (``one_row_quads`` for a one-row
        tile, else ``quads_in_passes``), then the pair after the quads in the last block where
        the pairs are odd, and adds the sums to C, each times its row's step and its column's scale
        (``add_scaled``): no float32 sums live in the loop."""
        tile, builder = self.tile, self.tile.builder
        per_quads, per_sum = tile.const(INT8_PAIRS_PER_SUM // 2), tile.const(INT8_PAIRS_PER_SUM)
        blocks = builder.udiv(builder.add(self.pairs, tile.const(INT8_PAIRS_PER_SUM - 1)), per_sum)
        odd = builder.trunc(self.pairs, ir.IntType(1))
        with cgutils.for_range(builder, blocks) as block:
            for row in self.sums:
                for slot in row:
                    builder.store(ir.Constant(self.words, None), slot)
            q0 = builder.mul(block.index, per_quads)
            count = builder.sub(self.quads, q0)
            count = builder.select(builder.icmp_signed("<", count, per_quads), count, per_quads)
            if tile.MR == 1:
                self.one_row_quads(block.index, q0, count, masked)
            else:
                self.quads_in_passes(block.index, q0, count, masked)
            last = builder.icmp_signed("==", builder.add(block.index, tile.const(1)), blocks)
            with builder.if_then(builder.and_(last, odd)):
                k0 = builder.shl(self.quads, tile.const(2))
                self.pair_products(k0, self.groups(k0, 2), masked)
            tile.add_scaled(self.sums, self.step)

    def one_row_quads(self, block, q0, count, masked):
        """Emits the quads of a one-row tile's block into its sums, four rows per byte dot product: the
        high and low sums set to zero; a loop over the quads whose body takes A's four bytes of each
        half (``a_bytes``), broadcast, and per vector of weights (16 columns × 4 rows) two VPDPBUSD;
        then sum = 256·high + low - ``offsets``, in int32 with wrap-around: Σ a·w, exact, as it fits
        in int32 (a = u - 32768)."""
        tile, builder = self.tile, self.tile.builder
        for slot in (*self.high, *self.low):
            builder.store(ir.Constant(self.words, None), slot)
        with cgutils.for_range(builder, count) as loop:
            k0 = builder.shl(builder.add(q0, loop.index), tile.const(2))
            high, low = (self.broadcast(part, 0) for part in self.a_bytes(k0, masked))
            weights = self.groups(k0, 4, self.words)
            for slots, a in ((self.high, high), (self.low, low)):
                for slot, w in zip(slots, weights):
                    builder.store(builder.call(self.dot, [builder.load(slot), a, w]), slot)
        eight = ir.Constant(self.words, [8] * tile.width)
        for slot, high, low, offset in zip(self.sums[0], self.high, self.low, self.offsets(block)):
            value = builder.add(builder.shl(builder.load(high), eight), builder.load(low))
            builder.store(builder.sub(value, offset), slot)

    def a_bytes(self, k0, masked):
        """Emits A's rows k0..k0 + 3 as two int32 per row of the tile (MR each): quantised (its bits
        cleared where ``masked``, as ``quantised``), offset to u = a + 32768 = 256·hi + lo in
        [1, 65535], and a row's four hi bytes packed into one int32, its four lo into another (a
        truncation and a shufflevector that puts a row's bytes side by side)."""
        tile, builder, mr = self.tile, self.tile.builder, self.tile.MR
        n, i32 = 4 * mr, ir.IntType(32)
        floats, ints, bytes_ = ir.VectorType(tile.scalar, n), ir.VectorType(i32, n), ir.VectorType(ir.IntType(8), n)
        rows = ir.Constant(ir.VectorType(i32, n), [j % mr for j in range(n)])  # lane j is row j mod MR
        at = builder.add(tile.a_off, builder.mul(k0, tile.const(mr)))
        a = builder.load(tile.vector_at(tile.a_ptr, at, floats), align=tile.align)
        if masked:
            keep = builder.shuffle_vector(self.keep, ir.Constant(self.rows_i, ir.Undefined), rows)
            a = builder.bitcast(builder.and_(builder.bitcast(a, ints), keep), floats)
        inverse = builder.shuffle_vector(self.inverse, ir.Constant(self.rows_f, ir.Undefined), rows)
        rint = cgutils.get_or_insert_function(builder.module, ir.FunctionType(floats, [floats]), f"llvm.rint.v{n}f32")
        u = builder.add(
            builder.fptosi(builder.call(rint, [builder.fmul(a, inverse)]), ints), ir.Constant(ints, [32768] * n)
        )
        side_by_side = ir.Constant(ir.VectorType(i32, n), [k * mr + r for r in range(mr) for k in range(4)])
        low, high = builder.trunc(u, bytes_), builder.trunc(builder.lshr(u, ir.Constant(ints, [8] * n)), bytes_)
        return tuple(
            builder.bitcast(builder.shuffle_vector(part, ir.Constant(bytes_, ir.Undefined), side_by_side), self.rows_i)
            for part in (high, low)
        )

    def broadcast(self, rows, r):
        """Emits row r's int32 of ``rows`` (MR int32) broadcast to a vector of int32."""
        return self.tile.splat(self.tile.builder.extract_element(rows, self.tile.lane(r)), self.words)

    def quads_in_passes(self, block, q0, count, masked):
        """Emits the quads of a block of a tile of several rows into its sums, four rows per byte dot
        product, in two passes over the block's weights (hi, then lo: the sums of both at once would
        need twice the registers): A's bytes of the block's quads first (``a_bytes``, into two
        arrays on the stack); then, per pass, a loop over the quads whose body loads the panels'
        vectors of the quad and, per row of the tile, its int32 broadcast and a VPDPBUSD into each
        of the row's sums; the sums times 256 between the passes, and less ``offsets`` after them:
        Σ a·w in int32, exact, as ``one_row_quads``."""
        tile, builder, mr = self.tile, self.tile.builder, self.tile.MR
        halves = [cgutils.alloca_once(builder, self.rows_i, size=INT8_PAIRS_PER_SUM // 2) for _ in (0, 1)]
        with cgutils.for_range(builder, count) as loop:
            for array, part in zip(
                halves, self.a_bytes(builder.shl(builder.add(q0, loop.index), tile.const(2)), masked)
            ):
                builder.store(part, builder.gep(array, [loop.index]))
        eight = ir.Constant(self.words, [8] * tile.width)
        for array in halves:
            with cgutils.for_range(builder, count) as loop:
                weights = self.groups(builder.shl(builder.add(q0, loop.index), tile.const(2)), 4, self.words)
                rows = builder.load(builder.gep(array, [loop.index]))
                for r in range(mr):
                    a = self.broadcast(rows, r)
                    for slot, w in zip(self.sums[r], weights):
                        builder.store(builder.call(self.dot, [builder.load(slot), a, w]), slot)
            if array is halves[0]:
                for row in self.sums:
                    for slot in row:
                        builder.store(builder.shl(builder.load(slot), eight), slot)
        offsets = self.offsets(block)
        for row in self.sums:
            for slot, offset in zip(row, offsets):
                builder.store(builder.sub(builder.load(slot), offset), slot)

    def offsets(self, block):
        """Emits what A's offset adds to the sums of ``block``, 32768·Σ w per column: the panels' int32
        column sums of the block, after their scales at their heads, each shifted left by 15 (NP·NV
        vectors, in the order of ``cols``)."""
        tile, builder = self.tile, self.tile.builder
        fifteen = ir.Constant(self.words, [15] * tile.width)
        nr = tile.NV * tile.width
        start = builder.add(tile.const(SCALE_BYTES * nr), builder.mul(block, tile.const(SUM_BYTES * nr)))
        offsets = []
        for q in range(tile.NP):
            panel = builder.add(builder.add(tile.b_off, builder.mul(tile.b_stride, tile.const(q))), start)
            for v in range(tile.NV):
                at = builder.add(panel, tile.const(SUM_BYTES * v * tile.width))
                offsets.append(builder.shl(builder.load(tile.vector_at(tile.b_ptr, at, self.words), align=1), fifteen))
        return offsets

    def pair_products(self, k0, pairs, masked):
        """Emits the products of the pair of rows (k0, k0 + 1) into the int32 sums, from ``pairs`` (its
        vectors of pairs of bytes, column by column): each sign-extended to 2·L i32 (through i16),
        A's two rows quantised and packed into one i32 per row of the tile (row k0's in the low
        half); then per row of the tile its pair broadcast and sign-extended alike and, per vector, a
        multiply of the 2·L lanes whose even and odd lanes are added (two shufflevectors and an add:
        the pattern LLVM selects a multiply-add of pairs for, VPMADDWD or VPDPWSSD) to the row's sum
        (a load, an add, a store)."""
        tile, builder = self.tile, self.tile.builder
        b_wide = [builder.sext(builder.sext(pair, self.shorts), self.wide) for pair in pairs]
        even = self.quantised(k0, masked)
        odd = self.quantised(builder.add(k0, tile.const(1)), masked)
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
        """Emits the pairs' rows of the non-finite rows of A in float32, into the tile's accumulators,
        in the order of k: the quads (a loop), then the pair after them where the pairs are odd
        (``float_rows``)."""
        tile, builder = self.tile, self.tile.builder
        with cgutils.for_range(builder, self.quads) as loop:
            self.float_rows(builder.shl(loop.index, tile.const(2)), 4)
        with builder.if_then(builder.trunc(self.pairs, ir.IntType(1))):
            self.float_rows(builder.shl(self.quads, tile.const(2)), 2)

    def float_rows(self, k0, group):
        """Emits the rows k0..k0 + group - 1 of the non-finite rows of A in float32: each vector of the
        group split into its rows (``row_of``, widened by sitofp), then per row of k A's elements of
        the tile's rows that are not finite (a select: zeros in the finite rows), broadcast and
        accumulated (``accumulate``)."""
        tile, builder = self.tile, self.tile.builder
        vectors = self.groups(k0, group)
        zeros_f = ir.Constant(self.rows_f, None)
        for j in range(group):
            b_vecs = [builder.sitofp(self.row_of(vector, group, j), tile.vec) for vector in vectors]
            a_k = builder.select(self.finite, zeros_f, self.a_rows(builder.add(k0, tile.const(j))))
            for r in range(tile.MR):
                a_vec = tile.splat(builder.extract_element(a_k, tile.lane(r)), tile.vec)
                tile.accumulate(tile.slots[r], a_vec, b_vecs)


if config.DISABLE_JIT:  # pure Python (NUMBA_DISABLE_JIT=1, e.g. for line coverage)

    def tile_fma(c, a, b, at, mr, np_, nv):  # noqa: F811
        c_off, ldc, a_off, b_off, b_stride, k_len = at
        # The same sums in the same order for every element, k = 0, 1, ... (without fusing).
        nr = nv * lanes(c.dtype)
        packed_a = a[a_off : a_off + k_len * mr].reshape(k_len, mr)
        head = int8_head(k_len) * nr if b.dtype == np.int8 else 0
        for q in range(np_):
            start_b = b_off + q * b_stride
            panel = b[start_b + head : start_b + head + k_len * nr].reshape(k_len, nr)
            if b.dtype == np.uint16:  # the pairs' halves back in column order
                lanes_ = nr // nv
                panel = panel.reshape(k_len, nv // 2, lanes_, 2).transpose(0, 1, 3, 2).reshape(k_len, nr)
                panel = (panel.astype(np.uint32) << 16).view(np.float32)
            if head and INT8_VNNI:  # int8: the quads and the pair of rows back in column order
                panel = _in_row_order(panel, k_len, nr)
            scales = b[start_b : start_b + SCALE_BYTES * nr].view(np.float32) if head else None
            for r in range(mr):
                start = c_off + r * ldc + q * nr
                if head and INT8_VNNI:
                    total = _int8_products(packed_a[:, r], panel, k_len)
                    c[start : start + nr] += total * scales
                    continue
                total = c[start : start + nr] if head == 0 else np.zeros(nr, c.dtype)
                for k in range(k_len):
                    total += packed_a[k, r] * panel[k].astype(c.dtype)
                if head:
                    c[start : start + nr] += total * scales

    def _in_row_order(panel, k_len, nr):
        q4, out = 4 * (k_len // 4), panel.copy()
        out[:q4] = panel[:q4].reshape(q4 // 4, nr, 4).swapaxes(1, 2).reshape(q4, nr)
        if (k_len // 2) % 2:
            out[q4 : q4 + 2] = panel[q4 : q4 + 2].reshape(nr, 2).T
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
