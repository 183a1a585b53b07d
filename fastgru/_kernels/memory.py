"""Flat buffers: 64-byte aligned allocation, and element access at an offset without Numba's
negative-index wraparound.

Numba turns ``a[i]`` for a signed ``i`` into ``a[i + len(a) if i < 0 else i]``. For ``i = off + j``
with an offset LLVM cannot prove non-negative, that select stays in the loop and stops
vectorisation (measured: 52 ns instead of 8 ns for 36 elements). Making a view ``a[off:]``
instead costs a reference count, with atomic operations, each time it is made. These intrinsics
load and store through the data pointer, as C would; the kernels only pass offsets they have
computed within the buffer.
"""

import numpy as np
from numba import config, njit, types
from numba.extending import intrinsic

from .._config import kernel

#: Every buffer the kernels stream starts on a cache line: vector loads and stores that cross
#: lines run 1.3-2x slower, and NumPy promises 16 bytes only.
LINE_BYTES = 64


def aligned(size, dtype, zero=False):
    """A 1-D array of ``size`` elements of ``dtype`` whose data starts on a 64-byte line (zeroed with
    ``zero``). Python only: the kernels allocate nothing."""
    dtype = np.dtype(dtype)
    lanes = LINE_BYTES // dtype.itemsize
    buf = (np.zeros if zero else np.empty)(size + lanes, dtype=dtype)
    first = (-buf.ctypes.data // dtype.itemsize) % lanes
    return buf[first : first + size]


@kernel()
def _equal_words(a, b):
    """Whether two 1-D arrays of unsigned words of one size hold the same words: differences are
    gathered per block of a fixed 1024 words (a loop LLVM vectorises), then tested."""
    n = a.shape[0]
    blocks = n // 1024
    for k in range(blocks):
        diff = a.dtype.type(0)
        for i in range(k * 1024, k * 1024 + 1024):
            diff |= a[i] ^ b[i]
        if diff != 0:
            return False
    diff = a.dtype.type(0)
    for i in range(blocks * 1024, n):
        diff |= a[i] ^ b[i]
    return diff == 0


def same_bits(a, b):
    """Whether two C-contiguous arrays of one dtype and shape hold the same bits (NaN payloads
    included: a NaN equals itself here). Python only; the comparison runs compiled."""
    words = np.dtype(f"u{a.dtype.itemsize}")
    return (
        a.shape == b.shape and a.dtype == b.dtype and _equal_words(a.reshape(-1).view(words), b.reshape(-1).view(words))
    )


def element_pointer(context, builder, array_type, array, index):
    """LLVM code: the address of the element at flat ``index`` of a C-contiguous ``array``."""
    data = context.make_array(array_type)(context, builder, array).data
    return builder.gep(data, [index], inbounds=True)


@intrinsic
def load(typingctx, array, index):
    """The element at flat ``index`` (0 <= index < size) of a C-contiguous array of any rank."""

    def codegen(context, builder, signature, args):
        return builder.load(element_pointer(context, builder, signature.args[0], args[0], args[1]))

    return array.dtype(array, index), codegen


@intrinsic
def store(typingctx, array, index, value):
    """Set the element at flat ``index`` (0 <= index < size) of a C-contiguous array of any rank."""

    def codegen(context, builder, signature, args):
        cast = context.cast(builder, args[2], signature.args[2], signature.args[0].dtype)
        builder.store(cast, element_pointer(context, builder, signature.args[0], args[0], args[1]))
        return context.get_dummy_value()

    return types.void(array, index, value), codegen


@intrinsic
def load_as(typingctx, array, index, like):
    """The element of ``like``'s dtype at flat ``index`` of ``array``'s memory read as an array of that
    dtype (the float32 bias and scales that follow bfloat16 or int8 weights in one buffer)."""

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        as_type = context.get_data_type(signature.args[2].dtype).as_pointer()
        return builder.load(builder.gep(builder.bitcast(data, as_type), [args[1]], inbounds=True))

    return like.dtype(array, index, like), codegen


if config.BOUNDSCHECK and not config.DISABLE_JIT:  # NUMBA_BOUNDSCHECK=1: checked, for debugging

    @njit
    def load(array, index):  # noqa: F811
        flat = array.reshape(-1)
        if index < 0 or index >= flat.shape[0]:
            raise IndexError("load: index out of bounds")
        return flat[index]

    @njit
    def store(array, index, value):  # noqa: F811
        flat = array.reshape(-1)
        if index < 0 or index >= flat.shape[0]:
            raise IndexError("store: index out of bounds")
        flat[index] = value

    @njit
    def load_as(array, index, like):  # noqa: F811
        flat = array.reshape(-1).view(like.dtype)
        if index < 0 or index >= flat.shape[0]:
            raise IndexError("load_as: index out of bounds")
        return flat[index]


if config.DISABLE_JIT:  # pure Python (NUMBA_DISABLE_JIT=1): plain indexing

    def load(array, index):  # noqa: F811
        return (array if array.ndim == 1 else array.reshape(-1))[index]

    def store(array, index, value):  # noqa: F811
        (array if array.ndim == 1 else array.reshape(-1))[index] = value

    def load_as(array, index, like):  # noqa: F811
        return array.reshape(-1).view(like.dtype)[index]
