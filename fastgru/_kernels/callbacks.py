"""C callbacks: kernels compiled as functions of their own, ``int64(int64* job)``, that other compiled
code calls through their address (``call_job``), with the job (an int64 array of addresses and
sizes, ``jobs.py``) saying on what.

A driver compiled into each of its callers would be compiled again for each: the entry
(``entry.py``), the drivers that share their work and the partner thread's loop (``pair.serve``)
instead call the driver's callback (``drivers.py``), compiled once per process (or loaded from the
cache) when a call first needs it. ``Callbacks`` maps keys to such functions.

A driver (marked ``driver``) is a function of the job's address only, and its code is compiled as
its callbacks themselves, nothing else: once per format of the weights, with the names ``LIKE`` and
``WEIGHTS_LIKE`` of its globals bound to the format's element types. A callback that called the
driver would compile its code again, linked into the callback (and optimised again by LLVM) or
inlined by Numba (which copies the whole function's code, block by block).
"""

import ctypes

import numpy as np
from llvmlite import ir
from numba import config, types
from numba.extending import intrinsic

from .._config import kernel
from .._threading import start_pool
from .memory import element_pointer
from .tiles import INT8_TILE_SIGNATURE, TILE_SIGNATURE

SIGNATURE = types.int64(types.CPointer(types.int64))
#: The element types of a driver's float arrays (``LIKE``) and of its weights (``WEIGHTS_LIKE``), as
#: empty arrays (constants in the compiled code), and whether its products may run on the matrix
#: tiles (``TILED``): each of the driver's callbacks binds them to its format's (``drivers.py``);
#: these are float32's, without tiles.
LIKE = WEIGHTS_LIKE = np.zeros(0, np.float32)
TILED = False


def driver(exact=False, parallel=False):
    """Mark a driver: a function ``f(address)`` of a job's address, compiled only as callbacks
    (``drivers.py``), with these options of ``_config.kernel``."""

    def mark(function):
        function.options = {"exact": exact, "parallel": parallel}
        return function

    return mark


class Callbacks:
    """Callbacks by key (functions of one job format, each of its own qualified name: Numba's cache
    keys on it), compiled on first use."""

    def __init__(self, functions):
        self._functions = functions  # a driver's with its ``options`` (``driver``)
        self._compiled = {}

    def compiled(self):
        """The keys of the callbacks compiled (or loaded from the cache) in this process."""
        return set(self._compiled)

    def key_of(self, address):
        """The key of the callback at ``address`` (one this process has made), or None."""
        return next((key for key, compiled in self._compiled.items() if compiled.address == address), None)

    def address(self, key):
        """The address of ``key``'s callback, compiled (or loaded from the cache) once per process."""
        compiled = self._compiled.get(key)
        if compiled is None:
            function = self._functions[key]
            options = getattr(function, "options", {})
            if options.get("parallel"):  # code loaded from the cache links to the threading layer's symbols
                start_pool()
            compiled = kernel(**options, callback=SIGNATURE)(function)
            self._compiled[key] = compiled
        return compiled.address


@intrinsic
def call_job(typingctx, address, jobs, at):
    """Call the C function int64(int64*) at ``address`` with a pointer to element ``at`` of the
    C-contiguous int64 array ``jobs`` (a job's first element: row k of jobs (L, JOB_SIZE) is at
    k·JOB_SIZE). A pointer, not a view of the row: a view of an array that Python made counts a
    reference, an atomic operation, where it is made and where it goes."""
    if not isinstance(address, types.Integer) or not isinstance(jobs, types.Array) or not isinstance(at, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        function = ir.FunctionType(ir.IntType(64), [ir.IntType(64).as_pointer()])
        target = builder.inttoptr(args[0], function.as_pointer())
        return builder.call(target, [element_pointer(context, builder, signature.args[1], args[1], args[2])])

    return types.int64(address, jobs, at), codegen


def _tile_caller(name, signature):
    """An intrinsic that calls a tile kernel of ``signature`` (``tiles.TILE_SIGNATURE`` or
    ``INT8_TILE_SIGNATURE``: eleven arguments, pointers and 64- or 16-bit integers) at an address:
    ``call(address, *arguments)``, every argument an int64 (the pointers' addresses among them)."""
    pointer = ir.IntType(8).as_pointer()
    kinds = [pointer if arg == types.voidptr else ir.IntType(arg.bitwidth) for arg in signature.args]
    function = ir.FunctionType(ir.VoidType(), kinds)

    def cast(builder, value, kind):
        if kind == pointer:
            return builder.inttoptr(value, kind)
        return value if kind.width == 64 else builder.trunc(value, kind)

    def codegen(context, builder, signature, args):
        target = builder.inttoptr(args[0], function.as_pointer())
        builder.call(target, [cast(builder, value, kind) for value, kind in zip(args[1:], kinds)])
        return context.get_dummy_value()

    def call(typingctx, address, x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10):
        if not all(isinstance(arg, types.Integer) for arg in (address, x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10)):
            return None
        return types.none(*(types.int64,) * 12), codegen

    call.__name__ = call.__qualname__ = name
    return intrinsic(call)


#: Calls of the bfloat16 tile kernel (c, ldc, a0, a1, lda, b0, b1, m, n_bytes, k_tiles, last_bytes)
#: and of the int8 one (hi_out, lo_out, ld_out, a_hi, a_lo, lda, b, m, n_bytes, k_tiles, last_bytes)
#: at an address, the native kernel's (``amx.py``) or its twin's.
call_tile = _tile_caller("call_tile", TILE_SIGNATURE)
call_int8_tile = _tile_caller("call_int8_tile", INT8_TILE_SIGNATURE)


if config.DISABLE_JIT:  # pure Python (NUMBA_DISABLE_JIT=1): nothing compiles, so a callback's address
    # is its Python function's id, which call_job looks up and calls with a ctypes pointer to the job
    _BY_ADDRESS = {}

    def _python_address(self, key):
        function = self._functions[key]
        _BY_ADDRESS[id(function)] = function
        return id(function)

    Callbacks.address = _python_address
    Callbacks.key_of = lambda self, address: next((k for k, f in self._functions.items() if id(f) == address), None)

    def call_job(address, jobs, at):  # noqa: F811
        pointer = ctypes.cast(jobs.ctypes.data + int(at) * jobs.itemsize, ctypes.POINTER(ctypes.c_int64))
        return _BY_ADDRESS[int(address)](pointer)
