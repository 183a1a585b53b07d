"""The drivers as C callbacks, from one table: every driver (``DRIVERS``) for every format of the
weights (``FORMATS``) is a function ``int64(int64* job)`` that runs the driver on the job, compiled
once per process (or loaded from the cache) when a call first needs it (``callbacks.Callbacks``).

A job names the callback that runs it (``jobs.py``), so the code that runs jobs (the entry, the
parallel and split drivers' tasks, the partner thread's loop) holds no copy of a driver: each is
compiled once, for the one element type of weights it serves. A new weights format is a row of
``_compact.FORMATS`` (and its tile code in ``microkernel.py``); a new driver a row of ``DRIVERS``.

Numba's cache keys on a function's qualified name, so each callback is the driver's code as a
function of its own name, with its format's element types as its globals (``callbacks.driver``):
its compiled code and cache entry are its own.
"""

import types

import numpy as np

from .._compact import FORMATS as COMPACT
from .callbacks import Callbacks
from .direct import direct_part, run_direct
from .pair import run_direct_pair, run_pair
from .rows import run_parallel, run_serial
from .split import run_split, split_part

#: Each driver, and the callback kind of its tasks (a block of the parallel driver's rows, a worker
#: of a split row or of a shared direct call), or None.
DRIVERS = {
    "serial": (run_serial, None),
    "parallel": (run_parallel, "serial"),
    "split": (run_split, "part"),
    "part": (split_part, None),
    "pair": (run_pair, "part"),
    "direct": (run_direct, None),
    "direct_part": (direct_part, None),
    "direct_pair": (run_direct_pair, "direct_part"),
}
#: The drivers that run the direct call, which multiplies the caller's float32 or float64 W and R.
DIRECT = ("direct", "direct_part", "direct_pair")
#: The drivers whose products may run on the matrix tiles (``rows.py``'s): a row's drivers never do.
TILED_KINDS = ("serial", "parallel")

_F32, _F64 = np.zeros(0, np.float32), np.zeros(0, np.float64)
#: Each format of the weights, by the dtype character of the weights array: the element types of
#: the float arrays and of the weights, as empty arrays (constants in the compiled code), and whether
#: the products may run on the matrix tiles: the exact float32 and float64 weights, each compact
#: format (``_compact.FORMATS``), computed in float32, and the formats of ops prepared with matrix
#: tiles (``_compact.TILE_KERNELS``; key: the character, then "T"), whose code the others never hold.
FORMATS = (
    {"f": (_F32, _F32, False), "d": (_F64, _F64, False)}
    | {dt.char: (_F32, np.zeros(0, dt), False) for dt in COMPACT.values()}
    | {"fT": (_F32, _F32, True), "HT": (_F32, np.zeros(0, np.uint16), True), "bT": (_F32, np.zeros(0, np.int8), True)}
)


def _callback(name, driver, like, weights_like, tiled):
    """``driver``'s code as a function of its own name, whose globals bind ``LIKE``, ``WEIGHTS_LIKE``
    and ``TILED`` (``callbacks.py``) to ``like``, ``weights_like`` and ``tiled``."""
    scope = dict(driver.__globals__, LIKE=like, WEIGHTS_LIKE=weights_like, TILED=tiled)
    function = types.FunctionType(driver.__code__, scope, name)
    function.__qualname__, function.options = name, driver.options
    return function


def _formats_of(kind):
    """The formats of driver ``kind``'s callbacks: a direct driver's float32 and float64, the rows'
    drivers' all, the others' all but those with tiles."""
    if kind in DIRECT:
        return "f", "d"
    return [key for key, (_, _, tiled) in FORMATS.items() if not tiled or kind in TILED_KINDS]


_CALLBACKS = Callbacks(
    {
        (kind, key): _callback(f"{kind}_{key}", driver, *FORMATS[key])
        for kind, (driver, _) in DRIVERS.items()
        for key in _formats_of(kind)
    }
)


def callback(kind, weights, tiled=False):
    """The address of the C callback of driver ``kind`` (``DRIVERS``) for weights like ``weights``
    (their element type's; ``tiled``: with their copies for the matrix tiles, which the rows'
    drivers take), compiled (or loaded from the cache) on its first use in the process."""
    tiled = tiled and kind in TILED_KINDS
    return _CALLBACKS.address((kind, weights.dtype.char + ("T" if tiled else "")))


def compiled():
    """The (driver, weights dtype) of each callback this process has compiled or loaded ("bfloat16
    tiles": an op's with matrix tiles)."""
    names = {key: like.dtype.name + (" tiles" if tiled else "") for key, (_, like, tiled) in FORMATS.items()}
    return {(kind, names[key]) for kind, key in _CALLBACKS.compiled()}


def driver_of(address):
    """The driver (a key of ``DRIVERS``) whose callback is at ``address``, or None."""
    key = _CALLBACKS.key_of(address)
    return None if key is None else key[0]


def task_callback(kind, weights, tiled=False):
    """The address of the callback that runs one task of driver ``kind``, or 0 when it has none."""
    tasks = DRIVERS[kind][1]
    return 0 if tasks is None else callback(tasks, weights, tiled)
