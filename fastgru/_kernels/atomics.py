"""Sequentially consistent atomic operations on int64 array elements, and the few other machine
operations the two-thread kernels need (a cycle counter, a spin-wait hint, raw addresses).

Numba has no atomics; these intrinsics emit LLVM's ``atomicrmw``, ``cmpxchg`` and atomic loads
and stores. Sequential consistency makes every write a thread did before ``atomic_add`` or
``atomic_store`` visible to a thread that then reads the new value with ``atomic_load``.
"""

import ctypes
import platform
import time

import numpy as np
from llvmlite import ir
from numba import config, types
from numba.extending import intrinsic

from .memory import element_pointer

_MACHINE = platform.machine().lower()
X86 = _MACHINE in ("x86_64", "amd64", "i386", "i686")
AARCH64 = _MACHINE in ("aarch64", "arm64")

#: Whether ``cycles`` reads a counter that user space may read and that runs at a constant rate,
#: which the partner thread needs to time its spinning (``fastgru._partner``): x86's time-stamp
#: counter, aarch64's generic timer. Elsewhere ``llvm.readcyclecounter`` may read 0 or trap.
STEADY_COUNTER = X86 or AARCH64


@intrinsic
def atomic_add(typingctx, array, index, value):
    """array[index] += value, atomically; returns the old value."""
    if array.dtype != types.int64:
        return None

    def codegen(context, builder, signature, args):
        ptr = element_pointer(context, builder, signature.args[0], args[0], args[1])
        return builder.atomic_rmw(
            "add", ptr, builder.sext(args[2], ir.IntType(64)) if args[2].type.width < 64 else args[2], "seq_cst"
        )

    return types.int64(array, index, value), codegen


@intrinsic
def atomic_load(typingctx, array, index):
    """array[index], read atomically."""
    if array.dtype != types.int64:
        return None

    def codegen(context, builder, signature, args):
        ptr = element_pointer(context, builder, signature.args[0], args[0], args[1])
        return builder.load_atomic(ptr, "seq_cst", 8)

    return types.int64(array, index), codegen


@intrinsic
def atomic_store(typingctx, array, index, value):
    """array[index] = value, written atomically."""
    if array.dtype != types.int64 or not isinstance(value, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        ptr = element_pointer(context, builder, signature.args[0], args[0], args[1])
        value = context.cast(builder, args[2], signature.args[2], types.int64)
        builder.store_atomic(value, ptr, "seq_cst", 8)
        return context.get_dummy_value()

    return types.void(array, index, value), codegen


@intrinsic
def atomic_swap(typingctx, array, index, expected, new):
    """Set array[index] from ``expected`` to ``new`` atomically; True if this call did it
    (compare-and-swap)."""
    if array.dtype != types.int64 or not isinstance(expected, types.Integer) or not isinstance(new, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        ptr = element_pointer(context, builder, signature.args[0], args[0], args[1])
        old = context.cast(builder, args[2], signature.args[2], types.int64)
        new = context.cast(builder, args[3], signature.args[3], types.int64)
        pair = builder.cmpxchg(ptr, old, new, "seq_cst", "seq_cst")
        return builder.extract_value(pair, 1)

    return types.boolean(array, index, expected, new), codegen


@intrinsic
def cycles(typingctx):
    """A counter of constant rate that user space reads in a few cycles: x86's time-stamp counter;
    on aarch64 the generic timer's virtual count ``cntvct_el0`` (LLVM's ``readcyclecounter`` reads
    the PMU's cycle counter there, which Linux does not let user space read). Its rate is measured
    by the caller (``fastgru._partner``), not read from ``cntfrq_el0``, so both are treated alike."""

    def codegen(context, builder, signature, args):
        if AARCH64:  # as clang's __builtin_arm_rsr64("cntvct_el0"): no inline asm, which Numba's JIT cannot assemble
            read = builder.module.declare_intrinsic(
                "llvm.read_volatile_register.i64", fnty=ir.FunctionType(ir.IntType(64), [ir.MetaDataType()])
            )
            return builder.call(read, [builder.module.add_metadata([ir.MetaDataString(builder.module, "cntvct_el0")])])
        counter = builder.module.declare_intrinsic("llvm.readcyclecounter", fnty=ir.FunctionType(ir.IntType(64), []))
        return builder.call(counter, [])

    return types.int64(), codegen


@intrinsic
def spin_pause(typingctx):
    """Tell the core that this thread spins: x86 ``pause`` yields the core's resources to the other
    hardware thread and eases the exit from the loop; on aarch64 ``isb``, which stalls the core
    for a few tens of cycles as ``pause`` does (``yield`` is a no-op on most aarch64 cores; Rust's
    ``spin_loop`` hint uses ``isb`` for the same reason). Nothing elsewhere."""

    def codegen(context, builder, signature, args):
        if X86:
            hint = builder.module.declare_intrinsic("llvm.x86.sse2.pause", fnty=ir.FunctionType(ir.VoidType(), []))
            builder.call(hint, [])
        elif AARCH64:  # isb sy (15: the full system)
            hint = builder.module.declare_intrinsic(
                "llvm.aarch64.isb", fnty=ir.FunctionType(ir.VoidType(), [ir.IntType(32)])
            )
            builder.call(hint, [ir.Constant(ir.IntType(32), 15)])
        return context.get_dummy_value()

    return types.void(), codegen


@intrinsic
def address_of(typingctx, array):
    """The address of an array's first element, as an int64."""
    if not isinstance(array, types.Array):
        return None

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        return builder.ptrtoint(data, ir.IntType(64))

    return types.int64(array), codegen


@intrinsic
def pointer_to(typingctx, address, like):
    """``address`` (from ``address_of``) as a pointer to elements of the array ``like``'s dtype, for
    ``numba.carray``."""
    if not isinstance(like, types.Array) or not isinstance(address, types.Integer):
        return None
    pointer = types.CPointer(like.dtype)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(pointer))

    return pointer(address, like), codegen


if config.DISABLE_JIT:  # pure Python: one thread runs the kernels, plain operations suffice

    def atomic_add(array, index, value):  # noqa: F811
        old = array[index]
        array[index] += value
        return old

    def atomic_load(array, index):  # noqa: F811
        return array[index]

    def atomic_store(array, index, value):  # noqa: F811
        array[index] = value

    def atomic_swap(array, index, expected, new):  # noqa: F811
        if array[index] == expected:
            array[index] = new
            return True
        return False

    def cycles():  # noqa: F811
        return time.perf_counter_ns()

    def spin_pause():  # noqa: F811
        pass

    def address_of(array):  # noqa: F811
        return array.ctypes.data

    def pointer_to(address, like):  # noqa: F811
        # a ctypes pointer, which numba.carray takes in pure Python too
        return ctypes.cast(int(address), ctypes.POINTER(np.ctypeslib.as_ctypes_type(like.dtype)))
