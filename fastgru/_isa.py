"""The kernels' geometry for this process, chosen once, at import, from the CPU the kernels compile for.

Numba compiles for the host CPU with the host's features, unless ``NUMBA_CPU_NAME`` and
``NUMBA_CPU_FEATURES`` name another target (``NUMBA_CPU_NAME=znver3 NUMBA_CPU_FEATURES=""``
compiles AVX2 code, which an AVX-512 host also runs; ``NUMBA_CPU_NAME`` alone keeps the host's
features, AVX-512 included). The geometry follows the target: ``avx512`` where it has AVX-512,
``avx2`` where it has AVX2 and FMA, else ``generic`` (16-byte vectors: SSE2, NEON, any CPU that
Numba supports). ``FASTGRU_ISA=avx512|avx2|generic`` asks for one; asking for a geometry that
the target, or this CPU, cannot run raises ``FastGRUError`` at import, never an illegal
instruction later.

The compiled kernels of each geometry live in a cache folder of their own (``_config``), so
that one geometry never loads another's code; Numba itself keys its cache by the target CPU.
"""

import os
import platform

import numba
from llvmlite import binding as llvm

from ._tuning import GEOMETRIES
from ._validate import FastGRUError

#: The features the geometries care about, in LLVM's names.
_FEATURES = ("avx512f", "avx2", "fma")

_PROBE = """
define void @probe(<16 x float>* %p) {
  %a = load <16 x float>, <16 x float>* %p
  %b = call <16 x float> @llvm.fma.v16f32(<16 x float> %a, <16 x float> %a, <16 x float> %a)
  store <16 x float> %b, <16 x float>* %p
  ret void
}
declare <16 x float> @llvm.fma.v16f32(<16 x float>, <16 x float>, <16 x float>)
"""


def host_features():
    """The features of this CPU that the geometries care about."""
    features = llvm.get_host_cpu_features()
    return frozenset(name for name in _FEATURES if features.get(name))


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
        features = llvm.get_host_cpu_features().flatten()
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


TARGET_CPU, TARGET_FEATURES = target()

#: The geometry of this process's kernels.
GEOMETRY = choose(os.environ.get("FASTGRU_ISA", ""), TARGET_CPU, TARGET_FEATURES, host_features())


def describe():
    """One line for ``python -m fastgru info`` and the benchmarks' records."""
    g = GEOMETRY
    features = ", ".join(sorted(TARGET_FEATURES)) or "none of avx512f, avx2, fma"
    return (
        f"{g.name} ({g.vector_bytes * 8}-bit vectors, float32 tiles {g.float32_tiles()}; {g.note}); "
        f"compiled for {TARGET_CPU} ({features})"
    )
