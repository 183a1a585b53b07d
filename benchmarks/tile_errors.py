"""How far the matrix tiles' products carry a GRU from the exact result, on the benchmark's data:
max |Ho - exact| of a forward GRUSequence for float32, the three-pass mode on tiles, and bfloat16
weights on the vector kernels and on the tiles (``tests/test_tiles.gru_errors``: the NumPy
reference with its matrix product replaced by the tiles' twin, ``fastgru/_kernels/tiles.py``).
The twin computes the tile instructions' arithmetic exactly as specified, so the figures are
those of a CPU with AMX; only the float32 sums of NumPy's own products may differ between CPUs.

    python benchmarks/tile_errors.py

Writes ``benchmarks/results/<cpu>/tile_errors_results.md`` (``conftest.results_dir``).
"""

import datetime
import importlib.util
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import test_tiles  # noqa: E402  (tests/: the GRU with the tiles' products)

_spec = importlib.util.spec_from_file_location("fastgru_bench_conftest", HERE / "conftest.py")
bench = importlib.util.module_from_spec(_spec)  # benchmarks/conftest.py: the machine facts
_spec.loader.exec_module(bench)

#: (batch, steps, inputs, hidden, weight scale): the benchmark's b·s100 i256 h256 at 4 rows (the
#: twin is scalar code), its weights three times larger, and a wider layer.
CASES = [(4, 100, 256, 256, 1.0), (4, 100, 256, 256, 3.0), (2, 50, 512, 512, 1.0), (2, 20, 24, 32, 1.0)]


def main():
    facts = {"cpu": bench._cpu_model(), **bench.cpu_isa()}
    lines = [
        f"## {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d}",
        "",
        "Machine: " + ", ".join(f"{k} {v}" for k, v in facts.items()) + ".",
        "",
        "| batch, steps, inputs, hidden, weight scale | float32 | three-pass tiles | ratio to float32 "
        "| bfloat16 weights (vector kernels) | bfloat16 weights (tiles) |",
        "|---|---|---|---|---|---|",
    ]
    for case in CASES:
        began = time.perf_counter()
        e = test_tiles.gru_errors(*case)
        lines.append(
            f"| {', '.join(map(str, case))} | {e['float32']:.3g} | {e['three-pass tiles']:.3g} | "
            f"{e['three-pass tiles'] / e['float32']:.1f} | {e['bfloat16']:.3g} | {e['bfloat16 tiles']:.3g} |"
        )
        print(lines[-1], f"({time.perf_counter() - began:.0f} s)", flush=True)
    path = bench.results_dir() / "tile_errors_results.md"
    if not path.exists():
        path.write_text(
            "# max |Ho - exact| with the matrix tiles' products (benchmarks/tile_errors.py)\n\n"
            "Weights and bias uniform in ±scale/√hidden, X standard normal, H0 zero, forward, "
            "linear_before_reset 0; exact: the float64 sequence.\n\n"
        )
    with path.open("a") as f:
        f.write("\n".join(lines) + "\n\n")


if __name__ == "__main__":
    main()
