"""Turn pytest-benchmark's JSON into the markdown tables and the PNG chart of the peer benchmark.

    python benchmarks/report.py benchmarks/results.json [--md ...] [--png ...] [--readme FILE] [--marker bench]

First table, calls back to back: per shape, the median time of each implementation in µs, the
GFLOP/s of fastgru_prepared and of the best peer (FLOPs = 2·B·T·3H·(I+H)·D), and fastgru_prepared's
time over the best peer's. Second table, spaced calls (a pause of 2-20 ms before each call, the
same schedule for every implementation): the median time of each implementation and the same
ratio. The best peer is the fastest row among the peers and their variants (OpenVINO, ONNX Runtime
with IOBinding and with plain ``session.run``, torch); below 1 means fastgru is faster. By default
the tables go to ``bench_gru_results.md`` and the chart to ``bench_gru_results.png`` in the folder of
the machine the JSON names, ``benchmarks/results/<cpu>/`` (``conftest.results_dir``), where the
documentation's performance pages include them; ``--readme FILE`` also replaces the text between the
markers ``<!-- bench:start -->`` and ``<!-- bench:end -->`` of FILE (``--marker NAME``: those of NAME).
"""

import argparse
import json
import statistics
from pathlib import Path

from peers import IMPLS, PEERS


def markers(name):
    """The README's comments around the table of ``name``."""
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def replace_table(path, name, text):
    """Put ``text`` between the markers of ``name`` in the file ``path``, when it has them."""
    doc, (start, end) = Path(path), markers(name)
    if doc.exists() and start in doc.read_text():
        before, rest = doc.read_text().split(start, 1)
        doc.write_text(f"{before}{start}\n{text}{end}{rest.split(end, 1)[1]}")


#: extra_info keys that describe one benchmark, not the machine.
_PER_BENCHMARK = ("shape", "suite", "impl", "flops", "round", "mode", "pause_ms")


def load(path):
    """({mode: {shape: {"flops": F, impl: median of the rounds' medians (s)}}}, the machine facts,
    the pause range of the spaced mode in ms or None); mode is "back-to-back" or "spaced"."""
    data = json.loads(Path(path).read_text())
    medians, flops, machine, pause = {}, {}, {}, None
    for bench in data["benchmarks"]:
        info = bench["extra_info"]
        mode = info.get("mode", "back-to-back")
        medians.setdefault(mode, {}).setdefault(info["shape"], {}).setdefault(info["impl"], []).append(
            bench["stats"]["median"]
        )
        flops[info["shape"]] = info["flops"]
        pause = info.get("pause_ms", pause)
        machine = {k: v for k, v in info.items() if k not in _PER_BENCHMARK}
    modes = {
        mode: {
            shape: {"flops": flops[shape], **{impl: statistics.median(m) for impl, m in impls.items()}}
            for shape, impls in shapes.items()
        }
        for mode, shapes in medians.items()
    }
    return modes, machine, pause


def _best_peer(row):
    """The fastest peer (variant) of a row, or None."""
    return min((p for p in PEERS if p in row), key=row.get, default=None)


def _ratio(row):
    prepared, best = row.get("fastgru_prepared"), _best_peer(row)
    return f"{prepared / row[best]:.2f}" if prepared and best else "–"


def _impls(rows):
    return [impl for impl in IMPLS if any(impl in row for row in rows.values())]


def table(rows, machine, spaced=None, pause=None):
    """The markdown of the back-to-back table, the spaced table when ``spaced`` has rows, and the
    machine facts."""
    impls = _impls(rows)
    lines = [
        "| shape | "
        + " | ".join(f"{impl} µs" for impl in impls)
        + " | fastgru_prepared GFLOP/s | best peer | best peer GFLOP/s | prepared / best peer |",
        "|---" * (len(impls) + 5) + "|",
    ]
    for shape, row in rows.items():
        cells = [f"{row[impl] * 1e6:,.1f}" if impl in row else "–" for impl in impls]
        best = _best_peer(row)
        lines.append(
            f"| {shape} | " + " | ".join(cells) + f" | {_gflops(row, 'fastgru_prepared')} | {best or '–'} | "
            f"{_gflops(row, best)} | {_ratio(row)} |"
        )
    text = "\n".join(lines) + (
        "\n\nfloat32, calls back to back; medians of each round's median, rounds "
        "interleaved over all implementations, in one run.\n"
    )
    if spaced:
        impls = _impls(spaced)
        low, high = pause or ("?", "?")
        lines = [
            "| shape, spaced calls | "
            + " | ".join(f"{impl} µs" for impl in impls)
            + " | best peer | prepared / best peer |",
            "|---" * (len(impls) + 3) + "|",
        ]
        for shape, row in spaced.items():
            cells = [f"{row[impl] * 1e6:,.1f}" if impl in row else "–" for impl in impls]
            lines.append(f"| {shape} | " + " | ".join(cells) + f" | {_best_peer(row) or '–'} | {_ratio(row)} |")
        text += (
            "\n" + "\n".join(lines) + f"\n\nfloat32, spaced calls: a pause of {low:g}-{high:g} ms before "
            "each call (the same pseudo-random schedule for every implementation), only the calls timed; "
            "medians of each round's median, in the same run.\n"
        )
    facts = ", ".join(f"{k} {v}" for k, v in machine.items())
    return text + f"\nMachine: {facts}.\n"


def _gflops(row, impl):
    """FLOPs / median time, three significant digits (the tiny shape is well below 1 GFLOP/s)."""
    if impl not in row:
        return "–"
    return f"{row['flops'] / row[impl] / 1e9:#.3g}".rstrip(".")


def chart(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    impls = [impl for impl in IMPLS if any(impl in row for row in rows.values())]
    shapes = list(rows)
    width = 0.8 / len(impls)
    fig, ax = plt.subplots(figsize=(max(10, len(shapes) * 1.1), 5.5))
    for k, impl in enumerate(impls):
        xs = [j + (k - (len(impls) - 1) / 2) * width for j in range(len(shapes))]
        ys = [rows[s].get(impl, float("nan")) * 1e6 for s in shapes]
        ax.bar(xs, ys, width, label=impl)
    ax.set_yscale("log")
    ax.set_ylabel("median time per call (µs, log scale)")
    ax.set_xticks(range(len(shapes)))
    ax.set_xticklabels(shapes, rotation=35, ha="right", fontsize=8)
    ax.legend(ncol=3, fontsize=8)
    ax.set_title("GRU ops on CPU, float32, calls back to back: lower is better")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json")
    parser.add_argument("--md", help="default: benchmarks/results/<cpu>/bench_gru_results.md, <cpu> from the JSON")
    parser.add_argument("--png", help="default: the same folder's bench_gru_results.png")
    parser.add_argument("--readme", help="file whose text between the markers (--marker) is replaced by the table")
    parser.add_argument("--marker", default="bench", help="the markers' NAME: <!-- NAME:start -->, <!-- NAME:end -->")
    args = parser.parse_args()
    modes, machine, pause = load(args.json)
    rows = modes.get("back-to-back", {})
    text = table(rows, machine, modes.get("spaced"), pause)
    if args.md is None or args.png is None:
        from conftest import results_dir

        folder = results_dir(machine)
        args.md = args.md or folder / "bench_gru_results.md"
        args.png = args.png or folder / "bench_gru_results.png"
    Path(args.md).write_text(text)
    chart(rows, args.png)
    if args.readme:
        replace_table(args.readme, args.marker, text)


if __name__ == "__main__":
    main()
