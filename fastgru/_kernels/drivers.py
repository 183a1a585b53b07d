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

_F32, _F64 = np.zeros(0, np.float32), np.zeros(0, np.float64)
#: Each format of the weights, by the dtype character of the weights array: the element types of
#: the float arrays and of the weights, as empty arrays (constants in the compiled code): the exact
#: float32 and float64 weights, and each compact format (``_compact.FORMATS``), computed in float32.
FORMATS = {"f": (_F32, _F32), "d": (_F64, _F64)} | {dt.char: (_F32, np.zeros(0, dt)) for dt in COMPACT.values()}


def _callback(name, driver, like, weights_like):
    """``driver``'s code as a function of its own name, whose globals bind ``LIKE`` and
    ``WEIGHTS_LIKE`` (``callbacks.py``) to ``like`` and ``weights_like``."""
    scope = dict(driver.__globals__, LIKE=like, WEIGHTS_LIKE=weights_like)
    function = types.FunctionType(driver.__code__, scope, name)
    function.__qualname__, function.options = name, driver.options
    return function


_CALLBACKS = Callbacks(
    {
        (kind, key): _callback(f"{kind}_{key}", driver, *FORMATS[key])
        for kind, (driver, _) in DRIVERS.items()
        for key in (("f", "d") if kind in DIRECT else FORMATS)
    }
)


def callback(kind, weights):
    """The address of the C callback of driver ``kind`` (``DRIVERS``) for weights like ``weights``
    (their element type's), compiled (or loaded from the cache) on its first use in the process."""
    return _CALLBACKS.address((kind, weights.dtype.char))


def compiled():
    """The (driver, weights dtype) of each callback this process has compiled or loaded."""
    return {(kind, FORMATS[key][1].dtype.name) for kind, key in _CALLBACKS.compiled()}


def driver_of(address):
    """The driver (a key of ``DRIVERS``) whose callback is at ``address``, or None."""
    key = _CALLBACKS.key_of(address)
    return None if key is None else key[0]


def task_callback(kind, weights):
    """The address of the callback that runs one task of driver ``kind``, or 0 when it has none."""
    tasks = DRIVERS[kind][1]
    return 0 if tasks is None else callback(tasks, weights)
