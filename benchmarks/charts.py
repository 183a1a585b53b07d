"""The documentation's charts, drawn with matplotlib from the committed JSON results.

    python benchmarks/charts.py            # (re)draw every chart whose JSON changed, or is new
    python benchmarks/charts.py --check    # only list the charts that are missing or stale; exit 1 if any

One chart per JSON result of ``DRAW`` in ``benchmarks/results/<cpu>/``, written beside it as
``<name>.png`` (``stacks_results.json`` -> ``stacks_results.png``): its title names the CPU, the ISA of
the host and the geometry of fastgru's kernels, as the JSON's machine facts give them, and the PNG's
text chunks name the JSON (``Source``) and the SHA-256 of its bytes (``Source-SHA256``), so that
``tests/test_docs.py`` can tell that each chart is drawn from its JSON as committed. Nothing is
measured here. Needs matplotlib (the ``docs`` or ``bench`` extra).
"""

import argparse
import hashlib
import json
import struct
import sys
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def png_text(path):
    """The tEXt chunks of a PNG file, as a dict."""
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG file"
    found, at = {}, 8
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        if kind == b"tEXt":
            key, _, value = body.partition(b"\0")
            found[key.decode("latin-1")] = value.decode("latin-1")
        elif kind == b"zTXt":
            key, _, rest = body.partition(b"\0")
            found[key.decode("latin-1")] = zlib.decompress(rest[1:]).decode("latin-1")
        at += 12 + length
    return found


def machine_title(machine):
    """The CPU, its ISA and what fastgru's kernels are compiled for, as a chart's second title line."""
    return (
        f"{machine['cpu']} ({machine['cpu_name']}, {machine['isa']}); fastgru's kernels: geometry "
        f"{machine['geometry']} compiled for {machine['compiled_for']}; {machine['numba_threads']} threads"
    )


def _bars(ax, groups, series, values, unit):
    """Horizontal bars: one group per entry of ``groups``, one bar per series, log scale."""
    height = 0.8 / len(series)
    for k, name in enumerate(series):
        ys = [g + (k - (len(series) - 1) / 2) * height for g in range(len(groups))]
        xs = [values.get((group, name), float("nan")) for group in groups]
        ax.barh(ys, xs, height, label=name)
    ax.set_yticks(range(len(groups)))
    ax.set_yticklabels(groups, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel(f"{unit} (log scale): shorter is faster", fontsize=8)
    ax.tick_params(axis="x", labelsize=8)


def draw_stacks(data, ax_pair):
    """The stack table: µs per frame and per 100-step call, per layers × hidden size."""
    series = ["stack", "ONNX Runtime", "torch", "fastgru.torch"]
    labels = {"stack": "fastgru.GRUStack", "fastgru.torch": "fastgru.torch (torch's model)"}
    for ax, case, unit in zip(ax_pair, ("frame", "seq100"), ("µs per frame", "µs per 100-step call")):
        records = [r for r in data["records"] if r["case"] == case]
        groups = [f"{r['layers']} × {r['hidden']}" for r in records]
        values = {(g, labels.get(s, s)): r["us"][s] for g, r in zip(groups, records) for s in series}
        _bars(ax, groups, [labels.get(s, s) for s in series], values, unit)
        ax.set_title(f"{case}: batch 1, input 128, float32", fontsize=9)
    return "torch.nn.GRU stacks (layers × hidden size) at batch 1: fastgru against ONNX Runtime and torch"


def draw_small_calls(data, ax_pair):
    """The small-call table: fastgru and its peer per call."""
    records = data["records"]
    groups = [r["call"] for r in records]
    values = {}
    for r in records:
        peer = "ONNX Runtime (IOBinding)" if r["peer"] == "ONNX Runtime" else r["peer"]
        values[(r["call"], "fastgru")] = r["fastgru_us"]
        values[(r["call"], f"peer: {peer}")] = r["peer_us"]
    series = list(dict.fromkeys(name for _, name in values))
    _bars(ax_pair[0], groups, series, values, "µs per call")
    return "Small calls, float32: fastgru beside ONNX Runtime, and the function API beside the prepared cell"


def draw_weight_dtypes(data, ax_pair):
    """The weight-dtype table's speed: µs per call per shape and implementation."""
    speed = [r for r in data["speed"] if r["available"]]
    groups = list(dict.fromkeys(r["shape"] for r in speed))
    series = list(dict.fromkeys(r["implementation"] for r in speed))
    values = {(r["shape"], r["implementation"]): r["us"] for r in speed}
    _bars(ax_pair[0], groups, series, values, "µs per call")
    return "Weight dtypes: fastgru's float32, bfloat16 and int8 weights beside torch and OpenVINO"


#: The JSON results drawn, by name, with their drawing and their number of panels.
DRAW = {
    "stacks_results.json": (draw_stacks, 2),
    "small_calls_results.json": (draw_small_calls, 1),
    "weight_dtypes_results.json": (draw_weight_dtypes, 1),
}


def charts():
    """(JSON path, PNG path) of every chart, in folder order."""
    return [(j, j.with_suffix(".png")) for j in sorted(RESULTS.glob("*/*.json")) if j.name in DRAW]


def stale(pairs=None):
    """The PNG paths that are missing or were not drawn from their JSON as it stands."""
    found = []
    for source, png in pairs or charts():
        if not png.exists() or png_text(png).get("Source-SHA256") != sha256(source):
            found.append(png)
    return found


def draw(source, png):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = json.loads(source.read_text())
    drawing, panels = DRAW[source.name]
    fig, axes = plt.subplots(1, panels, figsize=(6.2 * panels, 5.0) if panels > 1 else (9, 5.0), squeeze=False)
    what = drawing(data, list(axes[0]))
    fig.suptitle(f"{what}\n{machine_title(data['machine'])}", fontsize=9)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 4), fontsize=8, frameon=False)
    fig.text(0.01, 0.005, f"{source.relative_to(ROOT)}, {data['machine'].get('date', '')}", fontsize=7, color="0.4")
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    metadata = {"Source": str(source.relative_to(ROOT)), "Source-SHA256": sha256(source), "Software": "matplotlib"}
    fig.savefig(png, dpi=100, metadata=metadata)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="list the missing or stale charts; exit 1 if any")
    parser.add_argument("--all", action="store_true", help="redraw every chart, not only the stale ones")
    args = parser.parse_args(argv)
    todo = stale()
    if args.check:
        for png in todo:
            print(f"stale: {png.relative_to(ROOT)} (python benchmarks/charts.py)")
        return 1 if todo else 0
    for source, png in charts():
        if args.all or png in todo:
            draw(source, png)
            print(f"drew {png.relative_to(ROOT)} from {source.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
