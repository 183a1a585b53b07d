"""Each kernel is compiled once per set of argument types, not once more per integer constant a
caller passes (``_config.kernel``): Numba types a constant argument as a literal, and compiles the
callee again for it, with its own LLVM pass in every caller.

Two views: the cache folder's index of each kernel of ``_config.KERNELS`` (what the suite's tests
before this one compiled, every dtype and weight type among them), and, for the tile loop
``products._panels_in_tiles``, an overload compiled inside its callers with no cache index of its
own, Numba's compile events of an empty-cache warmup in a fresh process."""

import json
import os
import subprocess
import sys
import textwrap

import numba
import pytest
from numba.core import types

import fastgru
from fastgru import _config
from fastgru._isa import GEOMETRY

pytestmark = pytest.mark.skipif(numba.config.DISABLE_JIT, reason="nothing compiles")

#: Arguments meant to be literals, from the end of a signature: ``_panels_in_tiles``'s tile (rows
#: and panels), by which ``tile_fma`` unrolls it.
LITERAL_TAIL = {"_panels_in_tiles": 2}


def plain_signature(name, signature):
    """``signature`` of ``name`` with its integer literals as int64, as a string (a literal bool is
    a switch compiled for on purpose: ``layout.pack_panel`` packs, or compares)."""
    cut = len(signature) - LITERAL_TAIL.get(name, 0)
    return str(
        tuple(
            types.unliteral(t) if isinstance(t, types.IntegerLiteral) and k < cut else t
            for k, t in enumerate(signature)
        )
    )


def _twins(plains):
    return sorted({s for s in plains if plains.count(s) > 1})


def test_no_cached_kernel_is_compiled_again_for_a_literal():
    fastgru.warmup(dtypes=["float32"])
    seen = 0
    for dispatcher in _config.KERNELS:
        name = getattr(dispatcher, "__name__", "?")
        signatures = _config.cached_signatures(dispatcher)
        seen += len(signatures)
        twins = _twins([plain_signature(name, s) for s in signatures])
        assert not twins, f"{name} is compiled once per literal for {twins}"
    assert seen > 20  # warmup's paths are in the cache: the check saw them


_WARMUP_EVENTS = textwrap.dedent("""
    import json, sys
    from numba.core import event
    import fastgru
    sys.path.insert(0, {tests!r})
    from test_specialisations import plain_signature

    compiled = []

    class Compiles(event.Listener):
        def on_start(self, ev):
            name = ev.data["dispatcher"].py_func.__qualname__
            compiled.append((name, plain_signature(name, ev.data["args"])))

        def on_end(self, ev):
            pass

    event.register("numba:compile", Compiles())
    fastgru.warmup(dtypes=["float32"], ops=["gru_cell", "gru_sequence", "augru_sequence", "gru_stack"])
    print(json.dumps(compiled))
""")


def test_the_tile_loop_is_compiled_once_per_tile_in_a_warmup(tmp_path):
    """Every compilation of ``_panels_in_tiles`` in an empty-cache float32 warmup in a fresh process:
    one per tile shape, none again for a literal its callers pass on (a first panel, a C offset or a
    row stride of 0 once gave it 16 for 5 tiles). Numba's events, not the cache: an overload is
    compiled inside its callers and has no cache index of its own."""
    code = _WARMUP_EVENTS.format(tests=os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "FASTGRU_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    tiles = [plain for name, plain in json.loads(done.stdout.splitlines()[-1]) if name == "_panels_in_tiles"]
    assert len(tiles) >= len(GEOMETRY.tiles)  # the tile loop was compiled here, each tile at least once
    assert not _twins(tiles)
