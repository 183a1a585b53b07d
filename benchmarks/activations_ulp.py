"""The largest error in ulp of fastgru's float32 sigmoid and tanh over all 2**32 inputs, as
``tests/test_activations.py`` measures it, appended with the machine to
``benchmarks/results/<cpu>/activations_ulp_results.md`` (``conftest.results_dir``).

    python benchmarks/activations_ulp.py                     # the host's geometry, with FMA where it has it
    FASTGRU_ISA=generic NUMBA_CPU_NAME=x86-64 NUMBA_CPU_FEATURES="" python benchmarks/activations_ulp.py

The second compiles for a processor without FMA (the multiply-adds are then not fused). Each run
appends a section: the date, the CPU, the ISA and what the kernels are compiled for, the table of
``tests/test_activations.py`` (the largest error per function, sign and range of x) and the
largest error of each function.
"""

import datetime
import importlib.util
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import test_activations  # noqa: E402  (tests/: the exhaustive sweep and its table; tests/conftest.py)

_spec = importlib.util.spec_from_file_location("fastgru_bench_conftest", HERE / "conftest.py")
bench = importlib.util.module_from_spec(_spec)  # benchmarks/conftest.py: the machine facts
_spec.loader.exec_module(bench)


def main():
    began = time.perf_counter()
    worst, where, broken = test_activations.sweep()
    seconds = time.perf_counter() - began
    from fastgru import _isa

    fma = "fma" in _isa.TARGET_FEATURES  # what the kernels are compiled for, not the host
    facts = {
        "cpu": bench._cpu_model(),
        **bench.cpu_isa(),
        **bench.kernel_geometry(),
        "fma": "yes" if fma else "no",
        "FASTGRU_ISA": os.environ.get("FASTGRU_ISA", "unset"),
        "NUMBA_CPU_NAME": os.environ.get("NUMBA_CPU_NAME", "unset"),
        "NUMBA_CPU_FEATURES": repr(os.environ.get("NUMBA_CPU_FEATURES", "unset")),
    }
    lines = [
        f"## {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d}, compiled for {facts['compiled_for']}, "
        f"FMA {facts['fma']}",
        "",
        "Machine: " + ", ".join(f"{k} {v}" for k, v in facts.items()) + ".",
        "",
        "```",
        *test_activations.table(worst, where),
        "```",
        "",
        f"Largest error over all 2**32 inputs: sigmoid {worst[0].max()} ulp, tanh {worst[1].max()} ulp; exact "
        f"values missed: sigmoid {broken[0]}, tanh {broken[1]}; {seconds:.1f} s.",
        "",
    ]
    path = bench.results_dir() / "activations_ulp_results.md"
    if not path.exists():
        path.write_text("# float32 activations: largest error in ulp (benchmarks/activations_ulp.py)\n\n")
    with path.open("a") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
