"""Cold start of fastgru in fresh processes: import; import + first float32 gru_sequence call; import +
warmup of every kernel path of both compute dtypes. Each with the kernels in the cache folder, and
with an empty cache folder (so that everything compiles).

Run: ``python benchmarks/cold_start.py [--runs 5] [--cold-runs 3]``, with nothing else running: the
empty-cache runs compile for tens of seconds each (first call) and over a minute (warmup), on one
core. Every row is the median over ``--runs`` fresh processes with the kernels in the cache and
``--cold-runs`` with an empty one (a new temporary FASTGRU_CACHE_DIR each, removed afterwards), shown
with the min-max of the runs. It writes ``cold_start_results.json`` (every process's seconds, the
machine, the ISA and geometry, the date) and ``cold_start_results.md`` (the table and the machine
line), and replaces the text between ``<!-- cold-start:start -->`` and ``<!-- cold-start:end -->`` of
README.md with that markdown. ``--report`` rewrites the markdown and the README from the JSON
without measuring.
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MARKER = "cold-start"

_PROBE = """
import time
start = time.perf_counter()
import fastgru
imported = time.perf_counter() - start
if {call}:
    import numpy as np
    rng = np.random.default_rng(0)
    X = rng.standard_normal((4, 10, 16), dtype=np.float32)
    W = rng.standard_normal((1, 96, 16), dtype=np.float32)
    R = rng.standard_normal((1, 96, 32), dtype=np.float32)
    fastgru.gru_sequence(X, np.zeros((4, 1, 32), np.float32), [10, 7, 3, 0], W, R, np.zeros((1, 96), np.float32))
if {warmup}:
    fastgru.warmup(dtypes=["float32", "float64"])
print(imported, time.perf_counter() - start)
"""

#: (key in the JSON, row of the README's table, first gru_sequence call, warmup of both dtypes)
ROWS = [
    ("import", "`import fastgru`", False, False),
    ("first_call", "`import fastgru` + first float32 `gru_sequence`", True, False),
    ("warmup", '`import fastgru` + `warmup(dtypes=["float32", "float64"])` (every kernel path)', False, True),
]


def measure(call, warmup, cache_dir):
    """Seconds of one fresh process: (import, whole probe); ``cache_dir`` None is the default folder."""
    env = dict(os.environ)
    if cache_dir is not None:
        env["FASTGRU_CACHE_DIR"] = cache_dir
    code = _PROBE.format(call=call, warmup=warmup)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return [float(v) for v in done.stdout.split()]


def cell(seconds):
    """The median and the min-max of some runs, as the table shows them."""
    if len(seconds) == 1:
        return f"{seconds[0]:.2f}"
    return f"{np.median(seconds):.2f} ({min(seconds):.2f}-{max(seconds):.2f})"


def machine_info():
    """The machine, the ISA the kernels are compiled for and fastgru's geometry (as the other
    benchmarks record them: benchmarks/conftest.py), with the versions that matter here."""
    import platform

    import numba

    import fastgru

    sys.path.insert(0, str(HERE))
    try:
        from conftest import _cpu_model, cpu_isa, kernel_geometry
    finally:
        sys.path.remove(str(HERE))
    return {
        "cpu": _cpu_model(),
        **cpu_isa(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
        "fastgru": fastgru.__version__,
        **kernel_geometry(),
    }


def table(results):
    """The markdown of ``results`` (the JSON's content): the table, then the machine line."""
    lines = [
        f"| fresh process, seconds: median (min-max) | kernels in the cache, median of {results['runs']} | "
        f"empty cache, median of {results['cold_runs']} |",
        "|---|---|---|",
    ]
    for row in results["rows"]:
        lines.append(f"| {row['label']} | {cell(row['cached'])} | {cell(row['empty'])} |")
    facts = ", ".join(f"{k} {v}" for k, v in results["machine"].items())
    note = f" {results['note']}" if results.get("note") else ""
    lines += ["", f"Measured {results['date']} by `benchmarks/cold_start.py`. Machine: {facts}.{note}", ""]
    return "\n".join(lines)


def write(results, json_path, md_path, readme):
    """The JSON (unless None), the markdown, and the README's text between the markers."""
    if json_path is not None:
        Path(json_path).write_text(json.dumps(results, indent=1) + "\n")
    text = table(results)
    Path(md_path).write_text(text)
    readme = Path(readme)
    start, end = f"<!-- {MARKER}:start -->", f"<!-- {MARKER}:end -->"
    if readme.exists() and start in readme.read_text():
        before, rest = readme.read_text().split(start, 1)
        readme.write_text(f"{before}{start}\n{text}{end}{rest.split(end, 1)[1]}")
    return text


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per row with the kernels in the cache")
    parser.add_argument("--cold-runs", type=int, default=3, help="fresh processes per row with an empty cache")
    parser.add_argument("--json", default=str(HERE / "cold_start_results.json"))
    parser.add_argument("--md", default=str(HERE / "cold_start_results.md"))
    parser.add_argument("--readme", default=str(HERE.parent / "README.md"), help="/dev/null leaves it alone")
    parser.add_argument("--report", action="store_true", help="rewrite the markdown and README from --json only")
    parser.add_argument("--note", default="", help="a sentence on the conditions of the run, kept with it")
    args = parser.parse_args(argv)
    if args.report:
        print(write(json.loads(Path(args.json).read_text()), None, args.md, args.readme))
        return
    measure(True, True, None)  # fill the default cache folder
    results = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "runs": args.runs,
        "cold_runs": args.cold_runs,
        "machine": machine_info(),
        "note": args.note,
        "rows": [],
    }
    for key, label, call, warmup in ROWS:
        cached = [measure(call, warmup, None)[-1] for _ in range(args.runs)]
        empty = []
        for _ in range(args.cold_runs):
            with tempfile.TemporaryDirectory(prefix="fastgru-cold-") as folder:
                empty.append(measure(call, warmup, folder)[-1])
        results["rows"].append({"key": key, "label": label, "cached": cached, "empty": empty})
        print(f"| {label} | {cell(cached)} | {cell(empty)} |", file=sys.stderr, flush=True)  # progress
    print(write(results, args.json, args.md, args.readme))


if __name__ == "__main__":
    main()
