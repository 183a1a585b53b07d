"""Sequentially consistent atomic operations on int64 array elements, for the split kernel.

Numba has no atomics; these intrinsics emit LLVM's ``atomicrmw``, ``cmpxchg`` and atomic loads.
Sequential consistency makes every write a thread did before ``atomic_add`` visible to a thread
that then reads the new value with ``atomic_load``.
"""

from llvmlite import ir
from numba import config, types
from numba.extending import intrinsic


def _pointer(context, builder, array_type, array, index):
    data = context.make_array(array_type)(context, builder, array).data
    return builder.gep(data, [index])


@intrinsic
def atomic_add(typingctx, array, index, value):
    """array[index] += value, atomically; returns the old value."""
    if array.dtype != types.int64:
        return None

    def codegen(context, builder, signature, args):
        ptr = _pointer(context, builder, signature.args[0], args[0], args[1])
        return builder.atomic_rmw("add", ptr, builder.sext(args[2], ir.IntType(64))
                                  if args[2].type.width < 64 else args[2], "seq_cst")

    return types.int64(array, index, value), codegen


@intrinsic
def atomic_load(typingctx, array, index):
    """array[index], read atomically."""
    if array.dtype != types.int64:
        return None

    def codegen(context, builder, signature, args):
        ptr = _pointer(context, builder, signature.args[0], args[0], args[1])
        return builder.load_atomic(ptr, "seq_cst", 8)

    return types.int64(array, index), codegen


@intrinsic
def atomic_claim(typingctx, array, index):
    """Set array[index] from 0 to 1 atomically; True if this call did it (compare-and-swap)."""
    if array.dtype != types.int64:
        return None

    def codegen(context, builder, signature, args):
        ptr = _pointer(context, builder, signature.args[0], args[0], args[1])
        i64 = ir.IntType(64)
        pair = builder.cmpxchg(ptr, ir.Constant(i64, 0), ir.Constant(i64, 1), "seq_cst", "seq_cst")
        return builder.extract_value(pair, 1)

    return types.boolean(array, index), codegen


if config.DISABLE_JIT:  # pure Python: one thread runs the kernels, plain operations suffice

    def atomic_add(array, index, value):  # noqa: F811
        old = array[index]
        array[index] += value
        return old

    def atomic_load(array, index):  # noqa: F811
        return array[index]

    def atomic_claim(array, index):  # noqa: F811
        if array[index] == 0:
            array[index] = 1
            return True
        return False
