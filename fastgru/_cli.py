"""``python -m fastgru info|bench|warmup``: what fastgru runs on here, how fast, how fast against your own kernel;
compile the kernels ahead into a cache folder."""

import argparse
import importlib.util
import os
import platform
import sys

import numpy as np

from ._validate import FastGRUError
from .benchmark import OPS, SUITE_NOTES, SUITES, TOLERANCES

#: The shapes of ``bench`` without a candidate or options, (suite, shape): every suite's.
BENCH_SHAPES = [(name, shape) for name, shapes in SUITES.items() for shape in shapes]


def info():
    """Versions, threads, SIMD level and cache folder, as ``name: value`` lines."""
    import llvmlite
    import llvmlite.binding as llvm
    import numba

    import fastgru

    from ._config import CACHE, CACHE_DIR, cache_root, cached_counts, compile_counts
    from ._isa import TILE_KERNELS, TILES_NOTE, describe
    from ._partner import PARTNER, SPIN_US, off_reason
    from ._threading import BUDGET, start_pool

    features = llvm.get_host_cpu_features()
    simd = next((name for name in ("avx512f", "avx2", "avx", "sse4.2", "neon", "asimd") if features.get(name)), "none")
    folder = cache_root()
    files = sum(name.endswith(".nbc") for _, _, names in os.walk(folder) for name in names) if folder else 0
    cache = (
        f"{folder} ({files} compiled kernels)"
        if folder
        else "none: no writable folder, kernels compile in every process"
        if CACHE
        else "off (FASTGRU_NO_CACHE)"
    )
    lines = {
        "fastgru": f"{fastgru.__version__} ({os.path.dirname(fastgru.__file__)})",
        "python": f"{platform.python_version()} ({sys.executable})",
        "numpy": np.__version__,
        "numba": f"{numba.__version__} (llvmlite {llvmlite.__version__})",
        "cpu": f"{llvm.get_host_cpu_name()}, {os.cpu_count()} logical cores",
        "simd": f"{simd.upper()} (this CPU's widest vector instructions)",
        "geometry": f"{describe()} (FASTGRU_ISA={os.environ.get('FASTGRU_ISA', '') or 'auto'})",
        "matrix tiles": {"native": "used (AMX)", "twin": f"used: {TILES_NOTE}"}.get(
            TILE_KERNELS, f"not used: {TILES_NOTE}"
        ),
        "threads": f"{fastgru.get_num_threads()} for this thread; NUMBA_NUM_THREADS={BUDGET} for the process",
        "threading layer": _layer(start_pool()),
        "partner thread": (
            f"spins {SPIN_US} µs after its last job (FASTGRU_SPIN_US)"
            if PARTNER.enabled
            else f"off ({off_reason() or 'its counter did not advance'})"
        ),
        "cache folder": cache,
        "FASTGRU_CACHE_DIR": CACHE_DIR or "unset",
        "kernels": kernels_line(compile_counts(), cached_counts()),
    }
    width = max(map(len, lines))
    return "\n".join(f"{name + ':':<{width + 1}} {value}" for name, value in lines.items())


def _layer(name):
    """The threading layer's name; on aarch64, with what the other layers would need. Numba's aarch64
    wheels build no TBB layer (and PyPI has no aarch64 ``tbb``); their OpenMP layer loads the
    system's ``libgomp.so.1``, else Numba falls back to ``workqueue``."""
    if platform.machine().lower() not in ("aarch64", "arm64"):
        return name
    if name == "omp":
        return "omp (the system's libgomp; Numba has no TBB layer on aarch64)"
    return f"{name} (Numba has no TBB layer on aarch64; the system's libgomp.so.1, e.g. Debian's libgomp1, gives omp)"


def kernels_line(counts, cached):
    """Where this process's kernels came from, and what the cache folder holds for it."""
    loaded, compiled = counts
    entries, kernels = cached
    return (
        f"{loaded} loaded from the cache and {compiled} compiled in this process; the cache folder holds "
        f"{entries} for this target ({kernels} kernels)"
    )


def warmup(args, parser):
    """``warmup``: compile (or load) the kernels into the cache folder, with a progress bar on
    standard error; the kernels' origin on standard output."""
    import time

    from . import _config, _warmup

    if args.cache_dir is not None:
        if not _config.CACHE:
            parser.error("--cache-dir with FASTGRU_NO_CACHE set: nothing would persist")
        try:
            _config.use_cache_dir(args.cache_dir)
        except FastGRUError as exc:
            parser.error(f"--cache-dir {args.cache_dir}: {exc}")
    try:
        steps = _warmup.steps(args.dtypes, args.ops, args.weight_dtypes)
    except FastGRUError as exc:
        parser.error(str(exc))
    if args.jobs < 1:
        parser.error(f"--jobs {args.jobs}: expected at least 1")
    if args.steps:  # a process of --jobs: its share of the steps
        steps = [steps[int(i)] for i in args.steps.split(",")]
    start = time.perf_counter()
    jobs = min(args.jobs, len(steps))
    if jobs > 1 and _config.cache_root() is not None:
        failed = _compile_in_processes(len(steps), jobs, args, _config.CACHE_DIR)
        if failed:
            print(f"fastgru warmup: a process of --jobs failed:\n{failed}", file=sys.stderr)
            return 1
    for done, (label, step) in enumerate(steps):
        _progress(sys.stderr, done, len(steps), label)
        step()
    _progress(sys.stderr, len(steps), len(steps), f"{time.perf_counter() - start:.1f} s")
    print(f"cache folder: {_config.cache_root() or 'none (kernels compile in every process)'}")
    print(f"kernels: {kernels_line(_config.compile_counts(), _config.cached_counts())}")
    return 0


def _compile_in_processes(count, jobs, args, cache_dir):
    """Run ``count`` warmup steps in ``jobs`` processes at once, step i in process i % jobs, so that
    they compile into the cache folder side by side (Numba's compiler holds the GIL: threads would
    take turns); a bar counts the processes that are done. Returns the standard error of a process
    that failed, or ''."""
    import subprocess

    import fastgru

    env = dict(os.environ)
    if cache_dir:
        env["FASTGRU_CACHE_DIR"] = cache_dir
    # the processes import this fastgru, wherever it is installed
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.abspath(fastgru.__file__))), *filter(None, [env.get("PYTHONPATH")])]
    )
    command = [sys.executable, "-m", "fastgru", "warmup", "--dtypes", *args.dtypes, "--ops", *args.ops]
    command += ["--weight-dtypes", *args.weight_dtypes, "--steps"]
    processes = [
        subprocess.Popen(
            [*command, ",".join(str(i) for i in range(k, count, jobs))],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(jobs)
    ]
    failed = ""
    for done, process in enumerate(processes):
        _progress(sys.stderr, done, jobs, f"compiling in {jobs} processes")
        _, err = process.communicate()
        if process.returncode and not failed:
            failed = err[-3000:]
    _progress(sys.stderr, jobs, jobs, f"compiled in {jobs} processes")
    return failed


def bench(args, parser):
    """``bench``: fastgru alone, or a candidate side by side with fastgru, on the suites; the table
    on standard output, progress on standard error. Returns the exit status: 1 when the candidate's
    results differ from fastgru's."""
    import fastgru

    from .benchmark import CandidateMismatch, compare, load, plot, save_json, select, table

    if args.list_suites:
        print(suites_table())
        return 0
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        parser.error("--plot needs matplotlib, which is not installed: pip install matplotlib")
    spec = args.candidate or args.prepared
    implementation = None
    if spec:
        try:
            implementation = load(spec)
        except (ImportError, FastGRUError) as exc:
            parser.error(f"--{'candidate' if args.candidate else 'prepared'} {spec}: {exc}")
    op = args.op or ("gru_sequence" if spec else None)
    rounds, seconds = (3, 0.06) if args.quick else (5, 0.25)
    rounds = args.rounds if args.rounds is not None else rounds
    seconds = args.seconds if args.seconds is not None else seconds
    tolerance = None
    if args.rtol is not None or args.atol is not None:
        rtol, atol = TOLERANCES[args.dtype]
        tolerance = (rtol if args.rtol is None else args.rtol, atol if args.atol is None else args.atol)
    try:  # the settings, before anything runs; a FastGRUError of the candidate's own is no usage error
        chosen = {name for name, _ in select(args.suite, op)}
    except FastGRUError as exc:
        parser.error(str(exc))
    for name in args.suite or []:
        if name not in chosen:
            print(f"fastgru bench: {name} has no {op} shape: left out", file=sys.stderr)
    if rounds < 1 or seconds <= 0:
        parser.error(f"--rounds {rounds} --seconds {seconds}: expected at least one round and a positive budget")
    if args.threads is not None:
        fastgru.set_num_threads(args.threads)
    progress = sys.stderr
    try:
        records = compare(
            None if args.prepared else implementation,
            prepared=implementation if args.prepared else None,
            op=op,
            suite=args.suite,
            dtype=args.dtype,
            rounds=rounds,
            seconds=seconds,
            tolerance=tolerance,
            name=spec,
            progress=lambda done, total, label: _progress(progress, done, total, label),
        )
    except CandidateMismatch as mismatch:
        print(f"fastgru bench: {spec} is wrong; nothing was timed:", file=sys.stderr)
        for line in mismatch.failures:
            print(f"FAIL {line}", file=sys.stderr)
        if args.json:
            save_json(mismatch.records, args.json)
        return 1
    print(table(records), end="")
    if args.json:
        save_json(records, args.json)
    if args.plot:
        plot(records, args.plot)
    return 0


def suites_table():
    """The suites as a markdown table: per shape its op, sizes, FLOPs and float32 weight bytes."""
    lines = ["| suite | shape | op | batch-seq-input-hidden | FLOPs | weights (float32) |", "|---" * 6 + "|"]
    for name, shapes in SUITES.items():
        for shape in shapes:
            lines.append(
                f"| {name} | {shape.id} | {shape.op} | {shape.batch}-{shape.seq}-{shape.inputs}-{shape.hidden} | "
                f"{shape.flops:,} | {shape.weight_bytes() / 1024:,.1f} KiB |"
            )
    notes = "\n".join(f"- {name}: {note}" for name, note in SUITE_NOTES.items())
    return "\n".join(lines) + "\n\n" + notes


def _progress(stream, done, total, label):
    """A one-line progress bar, redrawn in place on a terminal."""
    bar = "#" * (20 * done // total) + "." * (20 - 20 * done // total)
    end = "\n" if done == total or not stream.isatty() else ""
    stream.write(f"\r[{bar}] {done}/{total} {label:<40}{end}")
    stream.flush()


def _info_parser(commands):
    """Adds the ``info`` subcommand to ``commands`` (the subparsers); returns its parser."""
    return commands.add_parser(
        "info", help="versions, threading layer, SIMD level, cache folder, where this process's kernels came from"
    )


def _print_info(args, parser):
    """``info``: the lines of ``info()`` on standard output."""
    print(info())
    return 0


def _bench_parser(commands):
    """Adds the ``bench`` subcommand to ``commands`` (the subparsers); returns its parser."""
    timing = commands.add_parser(
        "bench",
        help="a latency table of fastgru, or of your kernel side by side with fastgru (--candidate)",
        description="Time fastgru's prepared ops and functions on the named suites; with --candidate or "
        "--prepared, check your implementation against fastgru on every shape first (exit status 1 if it "
        "differs), then time it side by side. docs/benchmarking.md has the details.",
    )
    given = timing.add_mutually_exclusive_group()
    given.add_argument(
        "--candidate",
        metavar="MODULE:FUNCTION",
        help="a function called with the arguments of fastgru's function of --op (MODULE may be a .py path)",
    )
    given.add_argument(
        "--prepared",
        metavar="MODULE:FACTORY",
        help="a factory called with the weights and attributes, as fastgru's prepared op, returning the callable",
    )
    timing.add_argument(
        "--op", choices=OPS, default=None, help="the op of the candidate (default gru_sequence; alone: every op)"
    )
    timing.add_argument(
        "--suite",
        action="append",
        choices=list(SUITES),
        help="a suite to run, repeatable (default: every suite with shapes of the op)",
    )
    timing.add_argument("--list-suites", action="store_true", help="print the suites' shapes, FLOPs and weight bytes")
    timing.add_argument("--dtype", default="float32", choices=["float16", "float32", "float64"])
    timing.add_argument("--threads", type=int, default=None, help="fastgru's threads per call (default: all cores)")
    timing.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 5; --quick 3)")
    timing.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="timing budget per implementation and shape, over all rounds (default 0.25; --quick 0.06)",
    )
    timing.add_argument(
        "--quick",
        action="store_true",
        help="3 rounds and 0.06 s per implementation and shape: a rough table in a third of the time",
    )
    timing.add_argument("--rtol", type=float, default=None, help="relative tolerance instead of the dtype's")
    timing.add_argument("--atol", type=float, default=None, help="absolute tolerance instead of the dtype's")
    timing.add_argument("--json", metavar="PATH", help="write the records and the machine's facts as JSON")
    timing.add_argument("--plot", metavar="PATH", help="write a bar chart of the times as PNG (needs matplotlib)")
    return timing


def _warmup_parser(commands):
    """Adds the ``warmup`` subcommand to ``commands`` (the subparsers); returns its parser."""
    ahead = commands.add_parser(
        "warmup",
        help="compile the kernels into the cache folder (for a container image: docs/deployment.md)",
        description="Compile every kernel path of the dtypes and ops, or load it from the cache folder, as "
        "fastgru.warmup() does, with a progress bar on standard error. The folder (--cache-dir, else "
        "FASTGRU_CACHE_DIR, else the default) then serves other processes, also of another install of the same "
        "fastgru version at another path, on any CPU of the same x86-64 level (docs/deployment.md).",
    )
    ahead.add_argument(
        "--cache-dir",
        metavar="FOLDER",
        help="the cache folder to fill (default: FASTGRU_CACHE_DIR, else fastgru's default); processes that "
        "should load from it need FASTGRU_CACHE_DIR=FOLDER",
    )
    ahead.add_argument(
        "--dtypes",
        nargs="+",
        default=["float32"],
        metavar="DTYPE",
        help="T1 dtypes among float16, float32, float64, bfloat16 (default float32; float16 and bfloat16 run "
        "float32's kernels)",
    )
    ahead.add_argument(
        "--ops",
        nargs="+",
        default=["gru_cell", "gru_sequence", "augru_sequence"],
        metavar="OP",
        help="among gru_cell, gru_sequence, augru_sequence, gru_stack (default: the three ops; gru_stack adds "
        "the kernels of GRUStack, from_torch and fastgru.torch GRUs)",
    )
    ahead.add_argument(
        "--weight-dtypes",
        nargs="+",
        default=["exact"],
        metavar="WEIGHTS",
        help="among exact, bfloat16, int8, bfloat16x3: the kernels of ops built with weight_dtype= (default exact)",
    )
    ahead.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="compile in this many processes at once, into the cache folder, then load (default 1; each "
        "process takes one core)",
    )
    ahead.add_argument("--steps", help=argparse.SUPPRESS)  # a process of --jobs: the indices of its steps
    return ahead


#: The subcommands, in the order of the usage line: the function that adds each one's parser, and
#: the one that runs it with the parsed arguments and that parser (for its usage errors),
#: returning the exit status.
COMMANDS = {
    "info": (_info_parser, _print_info),
    "bench": (_bench_parser, bench),
    "warmup": (_warmup_parser, warmup),
}


def main(argv=None):
    """``python -m fastgru``: runs the subcommand ``argv`` names (default: the command line's);
    returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m fastgru", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    parsers = {name: add(commands) for name, (add, _) in COMMANDS.items()}
    args = parser.parse_args(argv)
    return COMMANDS[args.command][1](args, parsers[args.command])
