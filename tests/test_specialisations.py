"""Each kernel is compiled once per set of argument types, not once more per integer constant a
caller passes (``_config.kernel``): Numba types a constant argument as a literal, and compiles the
callee again for it, with its own LLVM pass in every caller. The cache folder's index of each
kernel lists what this target compiled (after the suite's other tests, and warmup's paths here)."""

import numba
import pytest
from numba.core import types

import fastgru
from fastgru import _config

#: Kernels meant to be specialised on a literal: products._panels_in_tiles on its tile's shape.
SPECIALISED = {"_panels_in_tiles"}


def _unliteral(signature):
    """The signature with its integer literals as int64 (a literal bool is a switch that a kernel is
    compiled for on purpose: ``layout.pack_panel`` packs, or compares with what it would pack)."""
    return tuple(types.unliteral(t) if isinstance(t, types.IntegerLiteral) else t for t in signature)


@pytest.mark.skipif(numba.config.DISABLE_JIT, reason="nothing compiles")
def test_no_kernel_is_compiled_again_for_a_literal():
    fastgru.warmup(dtypes=["float32"])
    seen = 0
    for dispatcher in _config.KERNELS:
        name = getattr(dispatcher, "__name__", "?")
        signatures = _config.cached_signatures(dispatcher)
        seen += len(signatures)
        if name in SPECIALISED:
            continue
        plain = [_unliteral(s) for s in signatures]
        twins = {s for s in plain if plain.count(s) > 1}
        assert not twins, f"{name} is compiled once per literal for {sorted(map(str, twins))}"
    assert seen > 20  # warmup's paths are in the cache: the check saw them
