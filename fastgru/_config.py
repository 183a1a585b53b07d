"""Compilation switches for the Numba kernels and where compiled kernels persist, read in one place.

Environment:

- ``FASTGRU_CACHE_DIR``: the folder for compiled kernels (default: ``__pycache__`` next to
  fastgru's sources when writable, else ``$XDG_CACHE_HOME/fastgru`` or ``~/.cache/fastgru``).
- ``FASTGRU_NO_CACHE=1``: compile in every process, persist nothing.

Compiled kernels go to a sub-folder named after the geometry (``_isa``) and a digest of the
kernels' sources: a process never loads another geometry's code, nor code compiled from other
sources (Numba's own cache keys on each function's file only, not on the modules it calls), and
Numba keys the entries of a folder by the target CPU and its features.
"""

import hashlib
import os
import tempfile
from pathlib import Path

import numba

from ._isa import GEOMETRY

#: Persist compiled kernels on disk (Numba's cache) so later processes skip the compile.
CACHE = os.environ.get("FASTGRU_NO_CACHE", "") in ("", "0")

#: The folder asked for by FASTGRU_CACHE_DIR, or None for the default ones.
CACHE_DIR = os.environ.get("FASTGRU_CACHE_DIR") or None

#: LLVM fast-math flags for the kernels. Only contraction into fused multiply-add: the full
#: ``fastmath=True`` set includes no-NaN/no-inf, which would break the NaN and infinity
#: propagation the formulas require, and reassociation would let two compilations of one loop
#: round differently.
FASTMATH = {"contract"}

#: Options of every kernel. error_model="numpy": a float division by zero gives inf/NaN as in
#: NumPy instead of raising, which removes a branch per division that stops vectorisation.
#: nogil: a call releases the GIL while its kernels run, so that calls from several Python threads
#: overlap instead of taking turns.
JIT_OPTIONS = {"fastmath": FASTMATH, "error_model": "numpy", "nogil": True}

#: The same without contraction, for the gate equations (``_kernels/stages.py``), whose sums of
#: products must round alike on every path: with contraction LLVM picks which product to fuse per
#: call site, so two paths could differ in the last bit. The matrix products
#: (microkernel.tile_fma) fuse explicitly and are unaffected.
JIT_EXACT = {**JIT_OPTIONS, "fastmath": False}

_PACKAGE = Path(__file__).resolve().parent


def _sources_digest():
    """A digest of the sources the kernels are compiled from (the kernels, the tuning table, this file)."""
    digest = hashlib.sha256()
    for path in sorted(
        [*(_PACKAGE / "_kernels").glob("*.py"), _PACKAGE / "_tuning.py", _PACKAGE / "_isa.py", Path(__file__).resolve()]
    ):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:12]


#: The sub-folder of this geometry and these sources.
CACHE_TAG = f"numba-{GEOMETRY.name}-{_sources_digest()}"


def _writable(folder):
    """Whether ``folder`` exists or can be made, and takes a new file."""
    try:
        os.makedirs(folder, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def _user_cache():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "fastgru")


def cache_root():
    """The folder compiled kernels go to (a CACHE_TAG sub-folder of the first writable of
    FASTGRU_CACHE_DIR, fastgru's __pycache__ and the user's cache folder), or None."""
    if not CACHE:
        return None
    for base in (CACHE_DIR, str(_PACKAGE / "__pycache__"), _user_cache()):
        if base and _writable(os.path.join(base, CACHE_TAG)):
            return os.path.join(base, CACHE_TAG)
    return None


def kernel(*, exact=False, parallel=False, inline=False, signature=None, callback=None):
    """``numba.njit`` with the options above, cached in ``cache_root()`` when there is one;
    ``inline``: inlined into its callers by Numba, so that LLVM sees one function (the stages:
    their loops then share the caller's single scratch array and vectorise without checks of
    overlap between arguments); ``signature``: compiled for these argument types only, now (a
    call with others raises TypeError instead of compiling); ``callback``: a C callback of this
    signature (``numba.cfunc``: called through its address from compiled code), compiled now.

    ``numba.config.CACHE_DIR`` is set to that folder for the decoration only, so that other Numba
    users in the process keep theirs. Concurrent processes may share a folder: Numba writes each
    file under a temporary name and renames it into place, so a reader sees the old file or the
    new one, never a torn one.
    """
    options = {**(JIT_EXACT if exact else JIT_OPTIONS), "parallel": parallel}
    if inline:
        options["inline"] = "always"

    def decorate(func):
        root = cache_root()
        if callback is not None:
            jit = lambda **kw: numba.cfunc(callback, **{k: v for k, v in kw.items() if k != "nogil"})  # noqa: E731
        elif signature is not None:
            jit = lambda **kw: numba.njit(signature, **kw)  # noqa: E731
        else:
            jit = numba.njit
        if root is None:
            return jit(**options)(func)
        saved = numba.config.CACHE_DIR
        numba.config.CACHE_DIR = root
        try:
            return jit(cache=True, **options)(func)
        except RuntimeError:  # "cannot cache function": the folder went away meanwhile
            return jit(**options)(func)
        finally:
            numba.config.CACHE_DIR = saved

    return decorate


def cache_folder(dispatcher):
    """Where ``dispatcher`` (a kernel) persists its compiled code, or None when it does not."""
    cache = getattr(dispatcher, "_cache", None)
    return getattr(cache, "_cache_path", None)
