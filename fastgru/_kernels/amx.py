"""Native matrix-tile kernels (Intel AMX) as LLVM IR: the code that ``tiles.py``'s twins specify.

Each function emitted here does one tile of C's work with LLVM's AMX intrinsics, the ``.internal``
forms, whose shapes are operands (LLVM writes the tile configuration, LDTILECFG, and releases the
tiles itself):

- ``bf16_tile`` (``fastgru_tile_bf16_<terms>``): C's tile (m ≤ 16 rows of n ≤ 64 bytes: 16
  float32) read, then for each tile of K (16 pairs of bfloat16, 64 bytes of A's rows; the last may
  be partial) each term's A tile and B tile by TDPBF16PS, in ``tiles.product``'s order, and C's
  tile written back. A term is (which A, which B): two for bfloat16 weights, (hi, W'), (lo, W');
  three for the three-pass mode, (hi, Whi), (hi, Wlo), (lo, Whi).
- ``int8_block`` (``fastgru_tile_int8``): the hi and lo int32 tiles of one block of K
  (``tiles.int8_product``), from zero, by TDPBUSD per tile of 16 quads, written to memory, where
  the vector code makes 256·hi + lo - 32768·Σ w of them and scales it.

B's tiles are ``tiles.pack``'s and ``tiles.pack_int8``'s: rows of 64 bytes, one tile of K after
the other (16 rows, 1,024 bytes). Operand strides are in bytes.

LLVM compiles these intrinsics only for a target with amx-tile, amx-bf16 and amx-int8: for any
other it stops the process (not a Python exception). So only ``module_for`` makes them, and
``address`` compiles them with LLVM's JIT for a CPU named by its caller: ops prepared where
``_isa.TILE_KERNELS`` (this CPU's own model, with AMX, and ``_isa.NATIVE_TILES``) call them by that address
(``products.on_tiles``), and the tests compile them for Sapphire Rapids with llvmlite alone, in a
process of their own, on every machine. No CPU of the sessions so far has run them: on one with AMX
they must equal the twins bit for bit before ``_isa.NATIVE_TILES`` says they exist.
"""

import llvmlite.binding as llvm
from llvmlite import ir

#: Bytes of a tile's row, and rows of a tile of B per tile of K (16 pairs or quads of K).
ROW_BYTES = 64
K_ROWS = 16


class _AmxType(ir.Type):
    """LLVM's x86_amx, the type of a tile register's value (llvmlite.ir has no such type)."""

    def _to_string(self):
        return "x86_amx"

    def __eq__(self, other):
        return isinstance(other, _AmxType)

    def __hash__(self):
        return hash("x86_amx")


AMX = _AmxType()
_I16, _I64, _PTR = ir.IntType(16), ir.IntType(64), ir.PointerType(ir.IntType(8))
_B_STRIDE = ir.Constant(_I64, ROW_BYTES)


def _intrinsics(module):
    """The intrinsics the tile kernels call, declared in ``module``."""

    def declare(name, result, *args):
        name = f"llvm.x86.{name}.internal"
        if name in module.globals:
            return module.globals[name]
        return ir.Function(module, ir.FunctionType(result, args), name=name)

    return {
        "load": declare("tileloadd64", AMX, _I16, _I16, _PTR, _I64),
        "store": declare("tilestored64", ir.VoidType(), _I16, _I16, _PTR, _I64, AMX),
        "zero": declare("tilezero", AMX, _I16, _I16),
        "bf16": declare("tdpbf16ps", AMX, _I16, _I16, _I16, AMX, AMX, AMX),
        "int8": declare("tdpbusd", AMX, _I16, _I16, _I16, AMX, AMX, AMX),
    }


def _k_loop(builder, fn, accumulators, k_tiles, body):
    """Emits ``body(builder, k_offset_bytes_of_A, k_offset_bytes_of_B, accumulators)`` for each of
    ``k_tiles`` whole tiles of K, the accumulators (tile values) carried by phis; returns them after
    the loop."""
    entry = builder.block
    head, loop, done = (fn.append_basic_block(name) for name in ("k_head", "k_loop", "k_done"))
    builder.branch(head)
    builder.position_at_end(head)
    index = builder.phi(_I64, name="k")
    index.add_incoming(ir.Constant(_I64, 0), entry)
    carried = [builder.phi(AMX, name=f"acc{i}") for i in range(len(accumulators))]
    for phi, value in zip(carried, accumulators):
        phi.add_incoming(value, entry)
    builder.cbranch(builder.icmp_signed("<", index, k_tiles), loop, done)
    builder.position_at_end(loop)
    a_at = builder.mul(index, ir.Constant(_I64, ROW_BYTES))
    b_at = builder.mul(index, ir.Constant(_I64, K_ROWS * ROW_BYTES))
    updated = body(builder, a_at, b_at, carried)
    index.add_incoming(builder.add(index, ir.Constant(_I64, 1)), builder.block)
    for phi, value in zip(carried, updated):
        phi.add_incoming(value, builder.block)
    builder.branch(head)
    builder.position_at_end(done)
    return carried


def _gep(builder, pointer, offset):
    return builder.gep(pointer, [offset], inbounds=True)


def bf16_tile(module, terms):
    """Emits ``void fastgru_tile_bf16_<len(terms)>(ptr c, i64 ldc, ptr a0, ptr a1, i64 lda, ptr b0,
    ptr b1, i16 m, i16 n_bytes, i64 k_tiles, i16 last_bytes)``: C's tile (m rows, n_bytes each, ldc
    apart) += Σ over tiles of K and, within each, over ``terms`` ((A index, B index) pairs) of
    A[ai]'s tile (m rows of 64 bytes, lda apart; the last tile of K ``last_bytes`` wide, none when 0)
    by B[bi]'s (16 rows of 64 bytes; the last last_bytes / 4 rows), TDPBF16PS each."""
    ops = _intrinsics(module)
    args = (_PTR, _I64, _PTR, _PTR, _I64, _PTR, _PTR, _I16, _I16, _I64, _I16)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), args), name=f"fastgru_tile_bf16_{len(terms)}")
    c, ldc, a0, a1, lda, b0, b1, m, n_bytes, k_tiles, last = fn.args
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    # Every shape first: LLVM's tile configuration needs them defined before the first tile.
    full, k_rows = ir.Constant(_I16, ROW_BYTES), ir.Constant(_I16, K_ROWS)
    last_rows = builder.lshr(last, ir.Constant(_I16, 2))
    a, b = (a0, a1), (b0, b1)
    tile = builder.call(ops["load"], [m, n_bytes, c, ldc])

    def step(builder, a_at, b_at, carried, width=full, rows=k_rows):
        (acc,) = carried
        a_tiles = [
            builder.call(ops["load"], [m, width, _gep(builder, a[i], a_at), lda]) for i in sorted({t[0] for t in terms})
        ]
        b_tiles = [
            builder.call(ops["load"], [rows, n_bytes, _gep(builder, b[i], b_at), _B_STRIDE])
            for i in sorted({t[1] for t in terms})
        ]
        for ai, bi in terms:  # each tile of A and B loaded once, in the twin's order of terms
            acc = builder.call(ops["bf16"], [m, n_bytes, width, acc, a_tiles[ai], b_tiles[bi]])
        return [acc]

    tiles = _k_loop(builder, fn, [tile], k_tiles, step)
    (tile,) = _last_k(builder, fn, tiles, last, k_tiles, lambda *a: step(*a, width=last, rows=last_rows))
    builder.call(ops["store"], [m, n_bytes, c, ldc, tile])
    builder.ret_void()
    return fn


def _last_k(builder, fn, tiles, last, k_tiles, step):
    """Emits the partial last tile of K (``step`` with its widths) when ``last`` is not zero; returns
    the tiles after it (phis of both branches)."""
    before = builder.block
    partial, joined = fn.append_basic_block("k_last"), fn.append_basic_block("k_end")
    builder.cbranch(builder.icmp_unsigned("!=", last, ir.Constant(_I16, 0)), partial, joined)
    builder.position_at_end(partial)
    a_at = builder.mul(k_tiles, ir.Constant(_I64, ROW_BYTES))
    b_at = builder.mul(k_tiles, ir.Constant(_I64, K_ROWS * ROW_BYTES))
    after = step(builder, a_at, b_at, tiles)
    partial_end = builder.block
    builder.branch(joined)
    builder.position_at_end(joined)
    results = []
    for tile, value in zip(tiles, after):
        phi = builder.phi(AMX)
        phi.add_incoming(tile, before)
        phi.add_incoming(value, partial_end)
        results.append(phi)
    return results


def int8_block(module):
    """Emits ``void fastgru_tile_int8(ptr hi_out, ptr lo_out, i64 ld_out, ptr a_hi, ptr a_lo, i64 lda,
    ptr b, i16 m, i16 n_bytes, i64 k_tiles, i16 last_bytes)``: two int32 tiles from zero, hi += A_hi's
    tile by B's and lo += A_lo's by B's (TDPBUSD) for each tile of K (16 quads, 64 bytes of A's rows;
    the last ``last_bytes`` wide, none when 0), written to hi_out and lo_out (m rows, ld_out apart)."""
    ops = _intrinsics(module)
    args = (_PTR, _PTR, _I64, _PTR, _PTR, _I64, _PTR, _I16, _I16, _I64, _I16)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), args), name="fastgru_tile_int8")
    hi_out, lo_out, ld_out, a_hi, a_lo, lda, b, m, n_bytes, k_tiles, last = fn.args
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    full, k_rows = ir.Constant(_I16, ROW_BYTES), ir.Constant(_I16, K_ROWS)
    last_rows = builder.lshr(last, ir.Constant(_I16, 2))
    zero = [builder.call(ops["zero"], [m, n_bytes]) for _ in (0, 1)]

    def step(builder, a_at, b_at, carried, width=full, rows=k_rows):
        b_tile = builder.call(ops["load"], [rows, n_bytes, _gep(builder, b, b_at), _B_STRIDE])
        sums = []
        for acc, a in zip(carried, (a_hi, a_lo)):
            a_tile = builder.call(ops["load"], [m, width, _gep(builder, a, a_at), lda])
            sums.append(builder.call(ops["int8"], [m, n_bytes, width, acc, a_tile, b_tile]))
        return sums

    tiles = _k_loop(builder, fn, zero, k_tiles, step)
    tiles = _last_k(builder, fn, tiles, last, k_tiles, lambda *a: step(*a, width=last, rows=last_rows))
    for out, tile in zip((hi_out, lo_out), tiles):
        builder.call(ops["store"], [m, n_bytes, out, ld_out, tile])
    builder.ret_void()
    return fn


def module_for():
    """An LLVM module with every tile kernel: ``bf16_tile`` of two and of three terms, ``int8_block``."""
    module = ir.Module(name="fastgru_tiles")
    module.triple = "x86_64-unknown-linux-gnu"
    bf16_tile(module, ((0, 0), (1, 0)))
    bf16_tile(module, ((0, 0), (0, 1), (1, 0)))
    int8_block(module)
    return module


_engines = {}


def address(name, cpu=None, features=None):
    """The address of the tile kernel ``name`` ("bf16_2" and "bf16_3": ``bf16_tile`` of two and three
    terms; "int8": ``int8_block``), compiled once per process by LLVM's JIT for ``cpu`` and
    ``features`` (default: this CPU's own, which must have AMX: LLVM stops the process otherwise;
    ``_isa.TILE_KERNELS`` says whether it may). The code lives as long as the process."""
    cpu = cpu or llvm.get_host_cpu_name()
    features = llvm.get_host_cpu_features().flatten() if features is None else features
    engine = _engines.get((cpu, features))
    if engine is None:
        module = llvm.parse_assembly(str(module_for()))
        module.verify()
        machine = llvm.Target.from_triple(module.triple).create_target_machine(cpu=cpu, features=features, opt=2)
        engine = llvm.create_mcjit_compiler(module, machine)
        engine.finalize_object()
        _engines[(cpu, features)] = engine
    return engine.get_function_address(f"fastgru_tile_{name}")
