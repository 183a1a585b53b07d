"""Compilation switches for the Numba kernels and where compiled kernels persist, read in one place.

Environment:

- ``FASTGRU_CACHE_DIR``: the folder for compiled kernels (default: Numba's choice, the
  ``__pycache__`` folders next to fastgru's sources when writable, else a per-user cache folder).
- ``FASTGRU_NO_CACHE=1``: compile in every process, persist nothing.
"""

import os

import numba

#: Persist compiled kernels on disk (Numba's cache) so later processes skip the compile.
CACHE = os.environ.get("FASTGRU_NO_CACHE", "") in ("", "0")

#: The folder asked for by FASTGRU_CACHE_DIR, or None for Numba's default locations.
CACHE_DIR = os.environ.get("FASTGRU_CACHE_DIR") or None

#: LLVM fast-math flags for the kernels. Only contraction into fused multiply-add: the full
#: ``fastmath=True`` set includes no-NaN/no-inf, which would break the NaN propagation that
#: SPEC.md §6 requires, and reassociation would let two compilations of one loop round differently.
FASTMATH = {"contract"}

#: Options of every kernel. error_model="numpy": a float division by zero gives inf/NaN as in
#: NumPy instead of raising, which removes a branch per division that stops vectorisation.
#: nogil: a call releases the GIL while its kernels run, so that calls from several Python threads
#: (a Dask worker's or scheduler's threads, a thread-pool server) overlap instead of taking turns,
#: and a Dask worker's event loop keeps serving transfers and heartbeats during a task.
JIT_OPTIONS = {"fastmath": FASTMATH, "error_model": "numpy", "nogil": True}

#: The same without contraction, for code whose sums of two products (SPEC.md §3's
#: (1 - z)·h + z·H) must round alike on every path: with contraction LLVM picks which product to
#: fuse per call site, so two paths could differ in the last bit. The products themselves
#: (microkernel.tile_fma) fuse explicitly and are unaffected.
JIT_EXACT = {**JIT_OPTIONS, "fastmath": False}


def kernel(*, exact=False, parallel=False):
    """``numba.njit`` with the options above, cached in CACHE_DIR when it is writable.

    Numba picks a function's cache folder when it decorates it: the first writable one of
    ``numba.config.CACHE_DIR`` (set here to FASTGRU_CACHE_DIR for the duration of the decoration
    only, so that other Numba users in the process keep theirs), the source tree, a per-user folder.
    With none writable, Numba refuses to cache; the kernel then compiles in every process.
    Concurrent processes may share a folder: Numba writes each file under a temporary name and
    renames it into place, so a reader sees the old file or the new one, never a torn one.
    """
    options = {**(JIT_EXACT if exact else JIT_OPTIONS), "parallel": parallel}

    def decorate(func):
        if not CACHE:
            return numba.njit(**options)(func)
        saved = numba.config.CACHE_DIR
        if CACHE_DIR:
            numba.config.CACHE_DIR = CACHE_DIR
        try:
            return numba.njit(cache=True, **options)(func)
        except RuntimeError:  # "cannot cache function ...: no locator available": nowhere writable
            return numba.njit(**options)(func)
        finally:
            numba.config.CACHE_DIR = saved

    return decorate


def cache_folder(dispatcher):
    """Where ``dispatcher`` (a kernel) persists its compiled code, or None when it does not."""
    cache = getattr(dispatcher, "_cache", None)
    return getattr(cache, "_cache_path", None)
