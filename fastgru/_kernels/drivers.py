"""The drivers as C callbacks, from one table: every driver (``DRIVERS``) for every format of the
weights (``FORMATS``) is a function ``int64(int64* job)`` that runs the driver on the job, compiled
once per process (or loaded from the cache) when a call first needs it (``callbacks.Callbacks``).

A job names the callback that runs it (``jobs.py``), so the code that runs jobs (the entry, the
parallel and split drivers' tasks, the partner thread's loop) holds no copy of a driver: each is
compiled once, for the one element type of weights it serves. A new weights format is a row of
``_compact.FORMATS`` (and its tile code in ``microkernel.py``); a new driver a row of ``DRIVERS``.

Numba's cache keys on a function's qualified name, so each callback is a function of its own name,
made from one template (``_template``) with the driver and its element types as its globals: its
compiled code and cache entry are its own.
"""

import types

import numpy as np
from numba import carray

from .._compact import FORMATS as COMPACT
from .._config import JIT_EXACT, kernel
from .callbacks import Callbacks
from .direct import direct_part, run_direct
from .jobs import JOB_SIZE
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
#: Drivers whose code runs a parallel region (the threading layer must be up before their code loads).
PARALLEL = ("parallel", "split")

_F32, _F64 = np.zeros(0, np.float32), np.zeros(0, np.float64)
#: Each format of the weights, by the dtype character of the weights array: the element types of
#: the float arrays and of the weights, as empty arrays (constants in the compiled code): the exact
#: float32 and float64 weights, and each compact format (``_compact.FORMATS``), computed in float32.
FORMATS = {"f": (_F32, _F32), "d": (_F64, _F64)} | {dt.char: (_F32, np.zeros(0, dt)) for dt in COMPACT.values()}


def _template(job):
    return DRIVER(carray(job, (JOB_SIZE,)), LIKE, WEIGHTS_LIKE)  # noqa: F821 (the callback's own globals)


def _callback(name, driver, like, weights_like):
    """``_template`` as a function of its own name, its globals the driver and the element types.
    A driver without a parallel region is inlined into its callback (``inlined``)."""
    scope = {"__name__": __name__, "carray": carray, "JOB_SIZE": JOB_SIZE}
    scope.update(DRIVER=driver if _parallel(driver) else inlined(driver), LIKE=like, WEIGHTS_LIKE=weights_like)
    function = types.FunctionType(_template.__code__, scope, name)
    function.__qualname__ = name
    return function


def _options(driver):
    return getattr(driver, "targetoptions", {})  # none without the JIT (NUMBA_DISABLE_JIT=1)


def _parallel(driver):
    return _options(driver).get("parallel", False)


def _exact(driver):
    return _options(driver).get("fastmath") == JIT_EXACT["fastmath"]


_INLINED = {}


def inlined(driver):
    """``driver`` as its callback compiles it: inlined into it by Numba, with the driver's options
    (its callback takes them: ``exact``). Compiled on its own and called, the driver would be
    compiled twice: once as a function, and again where the callback links it in, whose module LLVM
    optimises whole."""
    found = _INLINED.get(driver)
    if not hasattr(driver, "py_func"):  # without the JIT, a plain function
        return driver
    if found is None:
        found = _INLINED[driver] = kernel(exact=_exact(driver), inline=True)(driver.py_func)
    return found


_CALLBACKS = Callbacks(
    {
        (kind, key): _callback(f"{kind}_{key}", driver, *FORMATS[key])
        for kind, (driver, _) in DRIVERS.items()
        for key in (("f", "d") if kind in DIRECT else FORMATS)
    },
    threads={(kind, key) for kind in PARALLEL for key in FORMATS},
    exact={(kind, key) for kind, (driver, _) in DRIVERS.items() for key in FORMATS if _exact(driver)},
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
