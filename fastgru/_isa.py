"""The kernels' geometry for this process, chosen once, at import, from the CPU the kernels compile for.

Numba compiles for the host CPU with the host's features, unless ``NUMBA_CPU_NAME`` and
``NUMBA_CPU_FEATURES`` name another target (``NUMBA_CPU_NAME=znver3 NUMBA_CPU_FEATURES=""``
compiles AVX2 code, which an AVX-512 host also runs; ``NUMBA_CPU_NAME`` alone keeps the host's
features, AVX-512 included). The geometry follows the target: ``avx512`` where it has AVX-512,
``avx2`` where it has AVX2 and FMA, else ``generic`` (16-byte vectors: SSE2, NEON, any CPU that
Numba supports). ``FASTGRU_ISA=avx512|avx2|generic`` asks for one; asking for a geometry that
the target, or this CPU, cannot run raises ``FastGRUError`` at import, never an illegal
instruction later.

``FASTGRU_CPU=portable`` compiles for the x86-64 level of the geometry instead of for this CPU's
model: ``x86-64-v4`` for avx512 (with 512-bit vectors preferred, as the avx512 geometry's tiles
use them), ``x86-64-v3`` for avx2, ``x86-64-v2`` (or ``x86-64``) for generic, with no features
beyond the level's. Numba keys its cache by the target CPU's name and features, so kernels
compiled on one CPU load on any other CPU of that level (a cache baked into a container image
on a build machine serves the deploy machines), and a CPU without the level's features computes
another key and never loads them. ``FASTGRU_CPU=host`` compiles for this CPU's model, as Numba
does by default. ``auto`` (the default) is portable for avx2, where the level ran the kernels as
fast as the host's model (docs/tuning.md, "Compile time and portable caches"), and host
for avx512 and generic, not yet measured against the host's model. The level is used
only when this CPU has all of its features (else the host's model); it is set as Numba's
``CPU_NAME`` and ``CPU_FEATURES`` for the process, so it applies only when fastgru is imported
before any Numba function has compiled (Numba's code generator, made at the first compilation,
keeps what it was made with) and never when ``NUMBA_CPU_NAME`` or ``NUMBA_CPU_FEATURES`` is set:
they win.

The compiled kernels of each geometry live in a cache folder of their own (``_config``), so
that one geometry never loads another's code; Numba itself keys its cache by the target CPU.
"""

import ctypes
import os
import platform
import sys

import numba
from llvmlite import binding as llvm
from numba.core import registry

from ._tuning import GEOMETRIES
from ._validate import FastGRUError

#: The features the geometries care about, in LLVM's names (avx512vnni: int8 weights' integer products).
_FEATURES = ("avx512f", "avx2", "fma", "avx512vnni")

_PROBE = """
define void @probe(<16 x float>* %p) {
  %a = load <16 x float>, <16 x float>* %p
  %b = call <16 x float> @llvm.fma.v16f32(<16 x float> %a, <16 x float> %a, <16 x float> %a)
  store <16 x float> %b, <16 x float>* %p
  ret void
}
declare <16 x float> @llvm.fma.v16f32(<16 x float>, <16 x float>, <16 x float>)
"""


#: LLVM's feature map of this CPU, read once (each reading costs about 0.2 ms at import).
_HOST = llvm.get_host_cpu_features()


def host_features():
    """The features of this CPU that the geometries care about."""
    return frozenset(name for name in _FEATURES if _HOST.get(name))


def target():
    """(CPU name, features) that Numba compiles the kernels for: the host's unless NUMBA_CPU_NAME or
    NUMBA_CPU_FEATURES say otherwise (Numba's own rule: a features string overrides the CPU model's)."""
    name = numba.config.CPU_NAME or llvm.get_host_cpu_name()
    if numba.config.CPU_FEATURES is None:
        return name, host_features() if numba.config.CPU_NAME is None else _probe(name, None)
    return name, _probe(name, numba.config.CPU_FEATURES)


def _probe(cpu, features):
    """The features LLVM uses for ``cpu`` with the ``features`` string (None: the host's), read off the
    code it emits for a 16-float fused multiply-add: zmm registers mean AVX-512, ymm AVX(2)."""
    if features is None:
        features = _HOST.flatten()
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return frozenset()
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    machine = llvm.Target.from_default_triple().create_target_machine(cpu=cpu, features=features, opt=2)
    code = machine.emit_assembly(llvm.parse_assembly(_PROBE))
    found = set()
    if "zmm" in code:
        found |= {"avx512f", "avx2", "fma"}
    elif "ymm" in code and "vfmadd" in code:
        found |= {"avx2", "fma"}
    return frozenset(found)


def choose(requested, target_name, target_features, host):
    """The geometry for FASTGRU_ISA=``requested`` ('' or 'auto': the best the target has) on a target
    with ``target_features``, run by a CPU with ``host`` features; FastGRUError if it cannot run."""
    missing_on_host = sorted((target_features - host) & {"avx512f", "avx2", "fma"})
    if missing_on_host:
        raise FastGRUError(
            f"the kernels would compile for {target_name} with {', '.join(missing_on_host)}, which this CPU "
            f"({llvm.get_host_cpu_name()}) lacks: check NUMBA_CPU_NAME={numba.config.CPU_NAME!r} and "
            f"NUMBA_CPU_FEATURES={numba.config.CPU_FEATURES!r}"
        )
    name = requested.strip().lower()
    if name in ("", "auto"):
        name = next(n for n, g in GEOMETRIES.items() if set(g.requires) <= target_features)
    if name not in GEOMETRIES:
        raise FastGRUError(f"FASTGRU_ISA is {requested!r}; expected one of {', '.join(GEOMETRIES)} or auto")
    geometry = GEOMETRIES[name]
    lacking = sorted(set(geometry.requires) - target_features)
    if lacking:
        raise FastGRUError(
            f"FASTGRU_ISA={name} needs {', '.join(lacking)}, which the kernels' target CPU {target_name} lacks; "
            f"this CPU can run {', '.join(n for n, g in GEOMETRIES.items() if set(g.requires) <= target_features)}"
        )
    return geometry


#: The features of the x86-64 micro-architecture levels (psABI), in LLVM's names; each level also
#: needs those of the levels below it.
_V2 = ("cx16", "popcnt", "sahf", "sse3", "sse4.1", "sse4.2", "ssse3")
_V3 = (*_V2, "avx", "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe", "xsave")
_V4 = (*_V3, "avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")

#: The portable CPUs of each geometry on x86-64, best first: (LLVM's CPU name, the features it needs,
#: the features string Numba compiles with). The x86-64-v4 model prefers 256-bit vectors where
#: LLVM vectorises loops itself; the avx512 geometry's tiles are 512-bit, and so are the host
#: models it was measured with (znver4, znver5).
PORTABLE = {
    "avx512": (("x86-64-v4", _V4, "-prefer-256-bit"),),
    "avx2": (("x86-64-v3", _V3, ""),),
    "generic": (("x86-64-v2", _V2, ""), ("x86-64", (), "")),
}

#: The geometries whose level FASTGRU_CPU=auto takes (measured no slower than the host's model).
AUTO_PORTABLE = ("avx2",)


def portable_cpu(geometry, host):
    """(LLVM CPU name, features string) of ``geometry``'s x86-64 level if this CPU (``host``: LLVM's
    feature map) has all of its features, else None."""
    for name, needs, features in PORTABLE.get(geometry, ()):
        if all(host.get(feature) for feature in needs):
            return name, features
    return None


def level_features(cpu):
    """The features the geometries care about of the x86-64 level ``cpu`` (what ``_probe`` finds,
    without asking LLVM at every import: tests/test_portable_cache.py checks that they agree)."""
    needs = next(needs for levels in PORTABLE.values() for name, needs, _ in levels if name == cpu)
    return frozenset(needs) & frozenset(_FEATURES)


def _cpu_mode():
    """'auto', 'portable' or 'host' as FASTGRU_CPU asks, or 'host' with the reason when portable
    cannot be."""
    mode = os.environ.get("FASTGRU_CPU", "").strip().lower() or "auto"
    if mode not in ("auto", "portable", "host"):
        raise FastGRUError(f"FASTGRU_CPU is {os.environ['FASTGRU_CPU']!r}; expected auto, portable or host")
    if mode == "host":
        return "host", ""
    if numba.config.CPU_NAME is not None or numba.config.CPU_FEATURES is not None:
        return "host", "NUMBA_CPU_NAME/NUMBA_CPU_FEATURES set"
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return "host", "no portable level for this architecture"
    if "_toplevel_target_context" in vars(registry.cpu_target):
        return "host", "Numba compiled before fastgru's import"
    return mode, ""


def _setup():
    """(geometry, target CPU, target features, CPU mode, note): the geometry as chosen for the host
    target; then, in portable mode, Numba's target set to that geometry's level."""
    requested = os.environ.get("FASTGRU_ISA", "")
    mode, why = _cpu_mode()
    name, features = target()
    geometry = choose(requested, name, features, host_features())
    if mode == "auto":
        mode = "portable" if geometry.name in AUTO_PORTABLE else "host"
        why = "" if mode == "portable" else f"auto: {geometry.name}'s level is not yet measured against the host's"
    if mode == "portable":
        level = portable_cpu(geometry.name, _HOST)
        if level is None:
            return geometry, name, features, "host", f"this CPU lacks a feature of {geometry.name}'s x86-64 level"
        # Numba reads both when it makes its code generator (at the first compilation) and puts
        # them in its cache's keys; the features string adds to (+) or takes from (-) the model's.
        numba.config.CPU_NAME, numba.config.CPU_FEATURES = level
        name, features = level[0], level_features(level[0])
        geometry = choose(requested, name, features, host_features())
    return geometry, name, features, mode, why


#: The geometry of this process's kernels, the CPU they compile for with its features (those the
#: geometries care about), 'portable' or 'host', and why not portable when asked.
GEOMETRY, TARGET_CPU, TARGET_FEATURES, CPU_MODE, CPU_NOTE = _setup()

#: int8 weights multiplied as integers, each product's left operand rounded per row to 16 bits
#: (``_kernels/microkernel.tile_fma``), in their layout: where the avx512 geometry compiles for a CPU
#: with AVX512_VNNI (its own model; a portable level or a CPU named by NUMBA_CPU_NAME does not say
#: so). Elsewhere int8 weights are widened to float32, which measured faster on AVX2 code
#: (docs/tuning.md, "Tuning: compact weights").
INT8_VNNI = GEOMETRY.name == "avx512" and "avx512vnni" in TARGET_FEATURES


#: The features of the matrix tiles' products (Intel AMX), in LLVM's names.
AMX_FEATURES = ("amx-tile", "amx-bf16", "amx-int8")

#: Whether this version uses its native tile kernels (``_kernels/amx.py``). Not yet: they are
#: written, compile and are called by address as their twins (``_kernels/tiles.py``) are, but no
#: CPU with AMX has yet shown them equal to the twins bit for bit.
NATIVE_TILES = False


def tile_permission():
    """Ask Linux for this process's permission to use the tiles' register state (arch_prctl
    ARCH_REQ_XCOMP_PERM for XTILEDATA), which must be granted before the first tile instruction or
    that instruction faults; True when granted. A CPU without AMX, or another system, says no."""
    if not sys.platform.startswith("linux") or platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    arch_prctl, req_xcomp_perm, xtiledata = 158, 0x1023, 18
    return ctypes.CDLL(None, use_errno=True).syscall(arch_prctl, req_xcomp_perm, xtiledata) == 0


def tile_status(switch, host, targets_host, native, permission):
    """(which kernels, why not) of the matrix tiles: 'native', 'twin' or None (not used), and a note;
    FASTGRU_TILES=``switch`` ('', 'auto', 'off' or 'twin'),
    ``host`` LLVM's feature map of this CPU, ``targets_host`` whether the kernels compile for this
    CPU's own model (tile code is never compiled for another target, a portable level included),
    ``native`` whether tile kernels exist, ``permission`` the call that asks Linux (made last, only
    when the rest allows the tiles). 'twin' runs the tiles' twins (``_kernels/tiles.py``: their
    arithmetic in scalar code, slow) on any CPU, to test the products' road. FastGRUError for
    another switch."""
    name = switch.strip().lower() or "auto"
    if name not in ("auto", "off", "twin"):
        raise FastGRUError(f"FASTGRU_TILES is {switch!r}; expected auto, off or twin")
    lacking = [feature for feature in AMX_FEATURES if not host.get(feature)]
    if name == "off":
        return None, "off (FASTGRU_TILES=off)"
    if name == "twin":
        if numba.config.DISABLE_JIT:
            return None, "the twins (FASTGRU_TILES=twin) need Numba's JIT"
        return "twin", "the twins (FASTGRU_TILES=twin): the tiles' arithmetic in scalar code, slow, for tests"
    if lacking:
        return None, f"this CPU has no {', '.join(lacking)}"
    if not targets_host:
        return None, "the kernels compile for another CPU than this one (FASTGRU_CPU, NUMBA_CPU_NAME)"
    if not native:
        return None, "this version's native tile kernels are not yet verified on a CPU with AMX (twins only)"
    if not permission():
        return None, "Linux refused the tile state's permission (arch_prctl ARCH_REQ_XCOMP_PERM)"
    return "native", ""


#: Which tile kernels ops prepared from now on multiply by: 'native', 'twin' or None (read when an op
#: is made, ``_compact.tile_kernel``), and why not (docs/tuning.md, "Matrix tiles").
TILE_KERNELS, TILES_NOTE = tile_status(
    os.environ.get("FASTGRU_TILES", ""),
    _HOST,
    CPU_MODE == "host" and numba.config.CPU_NAME is None and numba.config.CPU_FEATURES is None,
    NATIVE_TILES,
    tile_permission,
)


def describe():
    """One line for ``python -m fastgru info`` and the benchmarks' records."""
    g = GEOMETRY
    features = ", ".join(sorted(TARGET_FEATURES)) or "none of avx512f, avx2, fma"
    int8 = "integer products (avx512vnni)" if INT8_VNNI else "widened to float32"
    return (
        f"{g.name} ({g.vector_bytes * 8}-bit vectors, float32 tiles {g.float32_tiles()}; {g.note}; "
        f"int8 weights {int8}); "
        f"compiled for {TARGET_CPU} ({features}; FASTGRU_CPU={CPU_MODE}{': ' + CPU_NOTE if CPU_NOTE else ''})"
    )
