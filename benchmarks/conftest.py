"""Benchmark session set-up: tests/ on the path (the AUGRU IR recipe of tests/openvino_oracle.py), and
the machine facts every result records."""

import os
import platform
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

try:  # before any fastgru parallel launch: OpenVINO ships TBB, which Numba then prefers over OpenMP
    import openvino  # noqa: F401
except ImportError:
    pass


def machine_info():
    import numba
    import numpy as np
    from peers import THREADS

    import fastgru

    info = {
        "cpu": _cpu_model(),
        **cpu_isa(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
        "fastgru": fastgru.__version__,
        "numba_threads": numba.get_num_threads(),
        "peer_threads": THREADS,  # OpenVINO INFERENCE_NUM_THREADS, ONNX Runtime intra_op, torch.set_num_threads
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "unset"),
    }
    try:
        info["numba_threading_layer"] = numba.threading_layer()
    except ValueError:
        info["numba_threading_layer"] = "not started"
    for name in ("openvino", "onnxruntime", "torch"):
        module = sys.modules.get(name)
        if module is not None:
            info[name] = getattr(module, "__version__", "?")
    info.update(kernel_geometry())
    return info


def cpu_isa():
    """The SIMD level the kernels are compiled for, as LLVM sees the host: {"isa": "AVX-512",
    "AVX2" or "other", "cpu_name": LLVM's name of the CPU, e.g. "znver4"}."""
    from llvmlite import binding

    features = binding.get_host_cpu_features()
    isa = "AVX-512" if features.get("avx512f") else "AVX2" if features.get("avx2") else "other"
    return {"isa": isa, "cpu_name": binding.get_host_cpu_name()}


def kernel_geometry():
    """The geometry of fastgru's kernels in this process and the CPU they are compiled for (which
    FASTGRU_ISA, NUMBA_CPU_NAME and NUMBA_CPU_FEATURES may set below the host's), as facts of every
    result: they land in each result's extra_info and in the report's machine line."""
    from fastgru import _isa

    g = _isa.GEOMETRY
    return {
        "geometry": g.name,
        "float32_tiles": g.float32_tiles(),
        "compiled_for": _isa.TARGET_CPU,
        # NUMBA_CPU_NAME alone keeps the host's features: the name does not say what the code may use
        "compiled_features": "+".join(sorted(_isa.TARGET_FEATURES)),
    }


#: The geometry fastgru picks on a host of each ISA (cpu_isa()'s "isa"); any other host runs the generic one.
_HOST_GEOMETRY = {"AVX-512": "avx512", "AVX2": "avx2"}


def machine_folder(facts=None):
    """The folder of a machine's results in benchmarks/results/ and benchmarks/ab/ (benchmarks/README.md,
    "Results: one folder per CPU"): ``<family>-<isa>``, the host CPU's family as LLVM names it
    (``znver4`` written ``zen4``) and the geometry of fastgru's kernels, with ``code`` added when that
    geometry is below the host's own (AVX2 code on an AVX-512 host: ``zen4-avx2code``). ``facts`` are a
    result's machine facts (``cpu_name``, ``isa``, ``geometry``); by default this process's."""
    facts = facts or {**cpu_isa(), **kernel_geometry()}
    family = facts["cpu_name"].replace("znver", "zen")
    own = _HOST_GEOMETRY.get(facts["isa"], "generic")
    return f"{family}-{facts['geometry']}" + ("" if facts["geometry"] == own else "code")


def results_dir(facts=None, kind="results"):
    """``benchmarks/<kind>/<machine_folder(facts)>``, made when missing: where a script writes by default."""
    path = Path(__file__).resolve().parent / kind / machine_folder(facts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def compiled_line():
    """The start of a results line: "<CPU model>, geometry <name> compiled for <LLVM CPU> (<features>)"."""
    kernels = kernel_geometry()
    return (
        f"{_cpu_model()}, geometry {kernels['geometry']} compiled for {kernels['compiled_for']} "
        f"({kernels['compiled_features']})"
    )


def peer_line(machine):
    """The machine and ONNX Runtime beside fastgru, as a small-call table's note starts."""
    return (
        f"{machine['cpu']} ({machine['isa']}, geometry {machine['geometry']} compiled for "
        f"{machine['compiled_for']}), {machine['numba_threads']} threads, ONNX Runtime "
        f"{machine.get('onnxruntime', '?')} with IOBinding on {machine['peer_threads']} threads"
    )


def _cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def pytest_collection_modifyitems(items):
    """Run the benchmarks round by round (all shapes and implementations, then again)."""

    def round_of(item):
        callspec = getattr(item, "callspec", None)
        return callspec.params.get("round_", 0) if callspec else 0

    items.sort(key=round_of)  # stable: within a round, shapes and implementations keep their order


def run_conditions():
    """The environment variables a small-call figure depends on, and the date, for a results line:
    "OPENBLAS_CORETYPE ..., FASTGRU_SPIN_US ...; YYYY-MM-DD."."""
    import time

    return (
        f"OPENBLAS_CORETYPE {os.environ.get('OPENBLAS_CORETYPE', 'unset')}, "
        f"FASTGRU_SPIN_US {os.environ.get('FASTGRU_SPIN_US', 'unset (1000)')}; {time.strftime('%Y-%m-%d')}."
    )


def show(text, md=None):
    """Print a results table, and write it to ``md`` too when given (a script's --md)."""
    print(text)
    if md:
        with open(md, "w") as f:
            f.write(text)
