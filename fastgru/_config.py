"""Compilation switches for the Numba kernels and where compiled kernels persist, read in one place.

Environment:

- ``FASTGRU_CACHE_DIR``: the folder for compiled kernels (default: ``__pycache__`` next to
  fastgru's sources when writable, else ``$XDG_CACHE_HOME/fastgru`` or ``~/.cache/fastgru``).
- ``FASTGRU_NO_CACHE=1``: compile in every process, persist nothing.
- ``FASTGRU_CPU=auto|portable|host`` (read by ``_isa``): the CPU the kernels compile for, which
  Numba's cache keys name.

Compiled kernels go to a sub-folder named after the geometry (``_isa``) and a digest of the
kernels' sources: a process never loads another geometry's code, nor code compiled from other
sources (Numba's own cache keys on each function's file only, not on the modules it calls), and
Numba keys the entries of a folder by the target CPU and its features (``_isa``: by default an
x86-64 level, not this CPU's model).

Inside it, each source file's kernels go to a folder named after the file's path inside the
package (``_kernels``), not after its absolute path as Numba's own locators name it: a cache
filled by one install (``python -m fastgru warmup --cache-dir``) serves another install of the
same sources at another path, e.g. a container image's cache copied to other machines. Numba
stamps sources by their content, so copies of the sources match. The Numba internals this takes
(``numba.core.caching``, a dispatcher's ``_cache``, ``_cache_hits`` and ``_cache_misses``) are
used in the functions and classes at the end of this file only, from ``compile_counts`` on.
"""

import functools
import hashlib
import inspect
import os
import sys
import tempfile
from pathlib import Path

import numba
from numba.core import caching

from ._isa import GEOMETRY, INT8_VNNI
from ._validate import FastGRUError

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


#: The sub-folder of this geometry (with its int8 weights' layout) and these sources; kernels
#: compiled with Numba's bounds checking (NUMBA_BOUNDSCHECK=1, ``_kernels/memory.py``) in their own.
CACHE_TAG = (
    f"numba-{GEOMETRY.name}{'-vnni' if INT8_VNNI else ''}{'-boundscheck' if numba.config.BOUNDSCHECK else ''}"
    f"-{_sources_digest()}"
)


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


def _readable(folder):
    return os.path.isdir(folder) and os.access(folder, os.R_OK | os.X_OK)


def cache_root():
    """The folder compiled kernels go to (a CACHE_TAG sub-folder of the first writable of
    FASTGRU_CACHE_DIR, fastgru's __pycache__ and the user's cache folder), or None. A
    FASTGRU_CACHE_DIR whose sub-folder exists but cannot be written (a cache baked into a
    read-only image) is used as it is: kernels load from it, and what it lacks compiles in every
    process."""
    if not CACHE:
        return None
    if (
        CACHE_DIR
        and not _writable(os.path.join(CACHE_DIR, CACHE_TAG))
        and _readable(os.path.join(CACHE_DIR, CACHE_TAG))
    ):
        return os.path.join(CACHE_DIR, CACHE_TAG)
    for base in (CACHE_DIR, str(_PACKAGE / "__pycache__"), _user_cache()):
        if base and _writable(os.path.join(base, CACHE_TAG)):
            return os.path.join(base, CACHE_TAG)
    return None


def use_cache_dir(folder):
    """Make ``folder`` this process's FASTGRU_CACHE_DIR, also for the kernels made at import (for
    ``python -m fastgru warmup --cache-dir``, before anything compiled); FastGRUError if it cannot
    be written."""
    global CACHE_DIR
    if not _writable(os.path.join(folder, CACHE_TAG)):
        raise FastGRUError(f"the cache folder {folder!r} cannot be made or written")
    CACHE_DIR = os.path.abspath(folder)
    for dispatcher in KERNELS:
        if hasattr(dispatcher, "enable_caching") and not _is_callback(dispatcher):  # (a callback is made compiled)
            _enable_cache(dispatcher, cache_root())


#: Every kernel made by ``kernel()``, for ``compile_counts``.
KERNELS = []


def kernel(*, exact=False, parallel=False, inline=False, signature=None, callback=None):
    """``numba.njit`` with the options above, cached in ``cache_root()`` when there is one;
    ``inline``: inlined into its callers by Numba, so that LLVM sees one function (the stages:
    their loops then share the caller's single scratch array and vectorise without checks of
    overlap between arguments); ``signature``: compiled for these argument types only, now (a
    call with others raises TypeError instead of compiling); ``callback``: a C callback of this
    signature (``numba.cfunc``: called through its address from compiled code), compiled now.

    The cache is fastgru's own (``_enable_cache``), not ``cache=True``: Numba's global
    ``CACHE_DIR`` stays as it is for other Numba users of the process. Concurrent processes may
    share a folder: Numba writes each file under a temporary name and renames it into place, so
    a reader sees the old file or the new one, never a torn one.

    A kernel called from another with an integer constant (``f(x, 0)``) is compiled again for it:
    Numba types the constant as a literal, and each literal is a specialisation of its own, with
    its own LLVM pass in every caller. Kernels therefore pass constants as ``np.int64(k)``, unless
    the callee is meant to be specialised on them (``products._panels_in_tiles``: its tile's rows
    and panels); tests/test_specialisations.py checks that no kernel is compiled twice for the
    same types but literals, the tile loop's other arguments included.
    """
    options = {**(JIT_EXACT if exact else JIT_OPTIONS), "parallel": parallel}
    if inline:
        options["inline"] = "always"

    def decorate(func):
        root = cache_root()
        if callback is not None:
            return _callback(func, callback, options, root)
        dispatcher = numba.njit(**options)(func)
        if root is not None and hasattr(dispatcher, "enable_caching"):  # not with NUMBA_DISABLE_JIT
            _enable_cache(dispatcher, root)
        KERNELS.append(dispatcher)
        if signature is not None and hasattr(dispatcher, "disable_compile"):
            dispatcher.compile(signature)
            dispatcher.disable_compile()
        return dispatcher

    return decorate


def cache_folder(dispatcher):
    """Where ``dispatcher`` (a kernel) persists its compiled code, or None when it does not."""
    cache = getattr(dispatcher, "_cache", None)
    return getattr(cache, "_cache_path", None)


def compile_counts():
    """(loaded, compiled): how many kernel specialisations this process loaded from the cache and
    how many it compiled (each kernel a function calls is counted too: Numba compiles it on its own;
    a C callback is one, made once)."""
    loaded = compiled = 0
    for k in KERNELS:
        if _is_callback(k):
            loaded, compiled = loaded + k._cache_hits, compiled + 1 - k._cache_hits
        elif hasattr(k, "_cache_hits"):
            loaded += sum(k._cache_hits.values())
            compiled += sum(k._cache_misses.values())
    return loaded, compiled


def _is_callback(kernel):
    """Whether ``kernel`` is a C callback (``numba.cfunc``, compiled or loaded once, when made)."""
    return isinstance(getattr(kernel, "_cache_hits", None), int)


def cached_counts():
    """(entries, kernels): how many compiled specialisations the cache folder holds for this
    process's target (CPU, features, sources and Numba version), and over how many kernels."""
    entries = kernels = 0
    for dispatcher in KERNELS:
        found = len(cached_signatures(dispatcher))
        entries += found
        kernels += found > 0
    return entries, kernels


def cached_signatures(dispatcher):
    """The signatures (tuples of Numba types) of ``dispatcher``'s specialisations that the cache
    folder holds for this process's target; none when it is not cached (or its index unreadable)."""
    cache = getattr(dispatcher, "_cache", None)
    if not isinstance(cache, _FunctionCache):
        return []
    context = dispatcher._targetdescr.target_context if _is_callback(dispatcher) else dispatcher.targetctx
    magic = context.codegen().magic_tuple()
    try:
        keys = [key[0] for key in cache._cache_file._load_index() if key[1] == magic]
    except Exception:  # an unreadable index is an empty one, as for Numba
        return []
    return [getattr(key, "args", key) for key in keys]  # a C callback's key is its Signature


# Numba's private caching API, here only (and in ``cached_signatures``, which reads an index). A
# dispatcher's cache is a ``caching.FunctionCache``, whose implementation asks its locator for
# the folder; the locator below names it after the source file's place in the package. Numba's
# index key (signature, target CPU and features, a hash of the function's bytecode) and source
# stamp (a hash of the file's content) are kept.


class _PackageLocator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
    """The folder ``root``/<the source file's folder relative to the package> (``fastgru`` for the
    package's own folder); a file outside the package gets Numba's name (its folder's path hashed)."""

    def __init__(self, py_func, py_file, root):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        folder = Path(py_file).resolve().parent
        try:
            sub = os.path.join(_PACKAGE.name, folder.relative_to(_PACKAGE))
        except ValueError:
            sub = self.get_suitable_cache_subpath(py_file)
        self._cache_path = os.path.normpath(os.path.join(root, sub))

    def get_cache_path(self):
        return self._cache_path


class _CacheImpl(caching.CompileResultCacheImpl):
    """Numba's implementation with ``_PackageLocator`` instead of the locators Numba tries in turn
    (which NUMBA_CACHE_LOCATOR_CLASSES may replace): ``CacheImpl.__init__`` less that search."""

    root = None  # set by _cache_class

    def __init__(self, py_func):
        self._lineno = py_func.__code__.co_firstlineno
        self._locator = _PackageLocator(py_func, inspect.getfile(py_func), self.root)
        if not _readable(self._locator.get_cache_path()):
            self._locator.ensure_cache_path()
        modname = os.path.splitext(os.path.basename(inspect.getfile(py_func)))[0]
        qualname = getattr(py_func, "__qualname__", py_func.__name__)
        self._filename_base = self.get_filename_base(f"{modname}.{qualname}", getattr(sys, "abiflags", ""))


class _FunctionCache(caching.FunctionCache):
    """Numba's, except that a kernel that cannot be saved (a read-only cache folder) is kept in
    memory only, where Numba would raise."""

    def save_overload(self, sig, data):
        try:
            super().save_overload(sig, data)
        except OSError:
            pass


@functools.cache
def _cache_class(root):
    impl = type("_CacheImpl", (_CacheImpl,), {"root": root})
    return type("_FunctionCache", (_FunctionCache,), {"_impl_class": impl})


def _callback(func, signature, options, root):
    """``func`` compiled now as a C callback (``numba.cfunc``) of ``signature``, cached under ``root``."""
    from numba.core.ccallback import CFunc
    from numba.core.sigutils import normalize_signature

    options = {k: v for k, v in options.items() if k != "nogil"}  # a C callback holds no GIL
    callback = CFunc(func, normalize_signature(signature), locals={}, options=options)
    if root is not None:
        try:
            callback._cache = _cache_class(root)(func)
        except OSError:  # the folder went away or turned read-only meanwhile
            pass
    callback.compile()
    KERNELS.append(callback)
    return callback


def _enable_cache(dispatcher, root):
    """Persist ``dispatcher``'s compiled code under ``root`` (what ``enable_caching`` does with
    Numba's locators); without a usable folder it compiles in every process instead."""
    try:
        dispatcher._cache = _cache_class(root)(dispatcher.py_func)
    except OSError:  # the folder went away or turned read-only meanwhile
        pass
