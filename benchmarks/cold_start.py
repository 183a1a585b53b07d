"""Cold start of fastgru in fresh processes: import; import + first float32 gru_sequence call; import +
warmup of every kernel path of both compute dtypes. Each with the kernels in the cache folder, and
with an empty cache folder (so that everything compiles).

``--breakdown`` instead: where the seconds of an empty-cache ``warmup()`` go (``_BREAKDOWN``), per
kernel path and per kernel, in one fresh process. ``--moved`` instead: the first call of a second
install of fastgru at another path with a copy of a cache that the first filled (``_MOVED``), as a
container image's build and its deployment make.

Run: ``python benchmarks/cold_start.py [--runs 5] [--cold-runs 3]``, with nothing else running: the
empty-cache runs compile for tens of seconds each (first call) and over a minute (warmup), on one
core. Every row is the median over ``--runs`` fresh processes with the kernels in the cache and
``--cold-runs`` with an empty one (a new temporary FASTGRU_CACHE_DIR each, removed afterwards), shown
with the min-max of the runs. It writes ``cold_start_results.json`` (every process's seconds, the
machine, the ISA and geometry, the date) and ``cold_start_results.md`` (the table and the machine
line) into ``benchmarks/results/<cpu>/`` (``conftest.results_dir``), and with ``--readme FILE``
replaces the text between ``<!-- cold-start:start -->`` and ``<!-- cold-start:end -->`` of FILE with
that markdown. ``--report`` rewrites the markdown (and ``--readme``) from the JSON without measuring.
"""

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
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


def _results_dir():
    """benchmarks/results/<cpu>/ of this machine (benchmarks/conftest.py's results_dir)."""
    sys.path.insert(0, str(HERE))
    try:
        from conftest import results_dir
    finally:
        sys.path.remove(str(HERE))
    return results_dir()


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
    """The JSON (unless None), the markdown, and the text between the markers of ``readme``."""
    if json_path is not None:
        Path(json_path).write_text(json.dumps(results, indent=1) + "\n")
    text = table(results)
    Path(md_path).write_text(text)
    from report import replace_table

    replace_table(readme, MARKER, text)
    return text


_BREAKDOWN = """
import collections, json, sys, time
from numba.core import event
import fastgru
from fastgru import _warmup

class Compiles(event.Listener):
    # per kernel: specialisations compiled and seconds spent in its own compilation (without the
    # kernels it calls, which Numba compiles on their own, inside); of those, LLVM's seconds (Numba's
    # llvm_lock events: optimisation and machine code), the rest is Numba's typing and lowering
    def __init__(self):
        self.stack, self.kernels = [], collections.defaultdict(lambda: [0, 0.0, 0.0])
    def on_start(self, ev):
        self.stack.append([ev.data["dispatcher"].py_func.__qualname__, time.perf_counter(), 0.0, 0.0])
    def on_end(self, ev):
        name, start, inner, llvm = self.stack.pop()
        took = time.perf_counter() - start
        if self.stack:
            self.stack[-1][2] += took
        row = self.kernels[name]
        row[0] += 1
        row[1] += took - inner
        row[2] += llvm

class Llvm(event.Listener):
    def __init__(self, compiles):
        self.compiles, self.depth, self.total = compiles, 0, 0.0
    def on_start(self, ev):
        self.depth += 1
        if self.depth == 1:
            self.start = time.perf_counter()
    def on_end(self, ev):
        self.depth -= 1
        if self.depth == 0:
            took = time.perf_counter() - self.start
            self.total += took
            if self.compiles.stack:
                self.compiles.stack[-1][3] += took

compiles = Compiles()
llvm = Llvm(compiles)
event.register("numba:compile", compiles)
event.register("numba:llvm_lock", llvm)
steps = []
for label, step in _warmup.steps(json.loads(sys.argv[1]), _warmup._PATHS):
    start, before, llvm_before = time.perf_counter(), sum(r[0] for r in compiles.kernels.values()), llvm.total
    step()
    steps.append((label, time.perf_counter() - start, sum(r[0] for r in compiles.kernels.values()) - before,
                  llvm.total - llvm_before))
print(json.dumps({"steps": steps, "kernels": compiles.kernels}))
"""


def breakdown(dtypes):
    """Markdown tables of an empty-cache warmup(dtypes) in a fresh process: per step (kernel path and
    dtype) its seconds, specialisations compiled and LLVM's share; per kernel the same."""
    with tempfile.TemporaryDirectory(prefix="fastgru-cold-") as empty:
        env = {**os.environ, "FASTGRU_CACHE_DIR": empty}
        done = subprocess.run(
            [sys.executable, "-c", _BREAKDOWN, json.dumps(dtypes)], env=env, capture_output=True, text=True, check=True
        )
    found = json.loads(done.stdout)
    lines = ["| warmup step | seconds | specialisations compiled | LLVM seconds |", "|---|---|---|---|"]
    for label, seconds, count, llvm in found["steps"]:
        lines.append(f"| {label} | {seconds:.2f} | {count} | {llvm:.2f} |")
    total = [sum(step[i] for step in found["steps"]) for i in (1, 2, 3)]
    lines.append(f"| all | {total[0]:.2f} | {total[1]} | {total[2]:.2f} |")
    lines += ["", "| kernel | specialisations | own seconds | of which LLVM |", "|---|---|---|---|"]
    for name, (count, seconds, llvm) in sorted(found["kernels"].items(), key=lambda kv: -kv[1][1]):
        lines.append(f"| {name} | {count} | {seconds:.2f} | {llvm:.2f} |")
    return "\n".join(lines)


_MOVED = """
import time
start = time.perf_counter()
import fastgru
from fastgru import _config
{call}
print(time.perf_counter() - start, *_config.compile_counts(), fastgru.__file__)
"""


def moved(runs):
    """Seconds from the interpreter's start to the end of the first float32 gru_sequence call of a
    second install (a copy of the fastgru package elsewhere) with a copy of the cache that the first
    install's ``python -m fastgru warmup`` filled; with the kernels loaded and compiled."""
    call = textwrap.dedent(_PROBE.split("if {call}:\n", 1)[1].split("if {warmup}", 1)[0])
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    results = []
    with tempfile.TemporaryDirectory(prefix="fastgru-moved-") as tmp:
        env = {**os.environ, "FASTGRU_CACHE_DIR": os.path.join(tmp, "build-cache")}
        subprocess.run([sys.executable, "-m", "fastgru", "warmup"], env=env, cwd=package, check=True)
        shutil.copytree(os.path.join(package, "fastgru"), os.path.join(tmp, "deploy", "fastgru"))
        shutil.copytree(env["FASTGRU_CACHE_DIR"], os.path.join(tmp, "image-cache"))
        env.update(FASTGRU_CACHE_DIR=os.path.join(tmp, "image-cache"), PYTHONPATH=os.path.join(tmp, "deploy"))
        for _ in range(runs):
            code = _MOVED.format(call=call)
            start = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-c", code], env=env, cwd=tmp, capture_output=True, text=True, check=True
            )
            whole = time.perf_counter() - start
            inner, loaded, compiled, where = done.stdout.split()
            assert where.startswith(os.path.join(tmp, "deploy")), where
            results.append((whole, float(inner), int(loaded), int(compiled)))
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per row with the kernels in the cache")
    parser.add_argument("--cold-runs", type=int, default=3, help="fresh processes per row with an empty cache")
    parser.add_argument("--json", help="default: benchmarks/results/<cpu>/cold_start_results.json")
    parser.add_argument("--md", help="default: the same folder's cold_start_results.md")
    parser.add_argument("--readme", default="/dev/null", help="a file whose cold-start markers get the table")
    parser.add_argument("--report", action="store_true", help="rewrite the markdown (and --readme) from --json only")
    parser.add_argument("--note", default="", help="a sentence on the conditions of the run, kept with it")
    parser.add_argument(
        "--breakdown",
        nargs="*",
        metavar="DTYPE",
        help="instead: where an empty-cache warmup of these dtypes (default float32) spends its time",
    )
    parser.add_argument(
        "--moved",
        action="store_true",
        help="instead: the first call of a moved install with a moved cache, over --runs processes",
    )
    args = parser.parse_args(argv)
    folder = _results_dir()
    args.json = args.json or str(folder / "cold_start_results.json")
    args.md = args.md or str(folder / "cold_start_results.md")
    if args.report:
        print(write(json.loads(Path(args.json).read_text()), None, args.md, args.readme))
        return
    if args.breakdown is not None:
        print(breakdown(args.breakdown or ["float32"]))
        return
    if args.moved:
        found = moved(args.runs)
        print("| run | seconds from the interpreter's start | in Python | kernels loaded | compiled |")
        print("|---|---|---|---|---|")
        for i, (whole, inner, loaded, compiled) in enumerate(found, 1):
            print(f"| {i} | {whole:.2f} | {inner:.2f} | {loaded} | {compiled} |")
        print(f"| median | {cell([r[0] for r in found])} | {cell([r[1] for r in found])} | | |")
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
