"""Compilation switches for the Numba kernels, read in one place."""

import os

#: Persist compiled kernels on disk (Numba's cache) so later processes skip the compile.
CACHE = os.environ.get("FASTGRU_NO_CACHE", "") in ("", "0")

#: LLVM fast-math flags for the kernels. Only contraction into fused multiply-add: the full
#: ``fastmath=True`` set includes no-NaN/no-inf, which would break the NaN propagation that
#: SPEC.md §6 requires, and reassociation would let two compilations of one loop round differently.
FASTMATH = {"contract"}

#: Options of every kernel. error_model="numpy": a float division by zero gives inf/NaN as in
#: NumPy instead of raising, which removes a branch per division that stops vectorisation.
JIT_OPTIONS = {"cache": CACHE, "fastmath": FASTMATH, "error_model": "numpy"}

#: The same without contraction, for code whose sums of two products (SPEC.md §3's
#: (1 - z)·h + z·H) must round alike on every path: with contraction LLVM picks which product to
#: fuse per call site, so two paths could differ in the last bit. The products themselves
#: (microkernel.tile_fma) fuse explicitly and are unaffected.
JIT_EXACT = {**JIT_OPTIONS, "fastmath": False}
