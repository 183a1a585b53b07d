"""A small speech-style PyTorch model, torch against ``fastgru.torch.optimize(model)``, in one process.

Run alone (it uses both cores), e.g. ``flock -x /tmp/fastgru-cpu.lock python benchmarks/torch_model.py``.

The model: Conv1d(80, 256, 3, padding=1) + ReLU over (N, 80, T) features, a 2-layer GRU with
hidden_size 256 (batch_first), a Linear head to 40 classes; float32, ``torch.set_num_threads(2)``
and fastgru's default thread count (2 here), under ``torch.inference_mode()``. Cases:

- ``b1-t100``: batch 1, 100 frames in one call;
- ``b32-t100``: batch 32, 100 frames in one call;
- ``stream-b1``: batch 1, one frame per call with the GRU state carried (the time is per frame).

Each round times every (case, implementation) in turn, interleaved, for about ``--seconds`` each;
a round's figure is the median per call, the result the median over the rounds. ``--breakdown``
also times the parts of the fastgru model (the torch layers around the GRU, the GRU module, its
prepared ops called directly with the module's thread count and with every thread, the custom
op's dispatch) to show where the time goes. ``--threads`` times a streamed frame and the batch-1
sequence under the thread settings of ``THREAD_CHOICES`` (torch's intra-op threads at 2 or 1,
fastgru's rule for a single row or ``fastgru.torch.set_num_threads(2)``); OMP_WAIT_POLICY and GOMP_SPINCOUNT are read
by libgomp when torch loads, so their effect takes a run of its own with the variable set.
"""

import argparse
import json
import os
import platform
import statistics
import time

import numba
import numpy as np
import torch

import fastgru
import fastgru._isa
import fastgru.torch
from fastgru import _import_torch
from fastgru import torch as fastgru_torch

FEATURES, CHANNELS, HIDDEN, CLASSES = 80, 256, 256, 40
CASES = {"b1-t100": (1, 100), "b32-t100": (32, 100), "stream-b1": (1, 1)}


class SpeechModel(torch.nn.Module):
    """Conv1d front end, a 2-layer GRU, a Linear head: (N, 80, T) features -> (N, T, 40) logits, h_n."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv1d(FEATURES, CHANNELS, 3, padding=1)
        self.gru = torch.nn.GRU(CHANNELS, HIDDEN, num_layers=2, batch_first=True)
        self.head = torch.nn.Linear(HIDDEN, CLASSES)

    def forward(self, features, h=None):
        x = torch.relu(self.conv(features)).transpose(1, 2)  # (N, T, 256), a strided view
        y, h = self.gru(x, h)
        return self.head(y), h


def make_run(model, case, rng):
    """A zero-argument call of ``model`` on the case's inputs (streaming: one frame, the state carried)."""
    n, t = CASES[case]
    features = torch.from_numpy(rng.standard_normal((n, FEATURES, t), dtype=np.float32))
    if case != "stream-b1":
        return lambda: model(features)
    frames = [torch.from_numpy(rng.standard_normal((1, FEATURES, 1), dtype=np.float32)) for _ in range(64)]
    state = {"h": None, "i": 0}

    def step():
        state["i"] = (state["i"] + 1) % len(frames)
        logits, state["h"] = model(frames[state["i"]], state["h"])
        return logits

    return step


def per_call(run, seconds):
    """Median seconds per call of ``run`` over about ``seconds`` (batches of calls timed together)."""
    start = time.perf_counter()
    run()
    once = max(time.perf_counter() - start, 1e-6)
    batch = max(1, int(0.005 / once))  # timer resolution: at least ~5 ms per sample
    samples = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline or len(samples) < 5:
        start = time.perf_counter()
        for _ in range(batch):
            run()
        samples.append((time.perf_counter() - start) / batch)
    return statistics.median(samples)


def interleaved(runs, rounds, seconds):
    """{name: median over rounds of each round's median per call}, the names timed in turn each round."""
    times = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            times[name].append(per_call(run, seconds))
    return {name: statistics.median(values) for name, values in times.items()}


def check(reference, fast, rng):
    """The largest |fastgru - torch| over the cases' outputs (logits and h_n)."""
    worst = 0.0
    for case in CASES:
        n, t = CASES[case]
        features = torch.from_numpy(rng.standard_normal((n, FEATURES, t), dtype=np.float32))
        for a, b in zip(reference(features), fast(features)):
            worst = max(worst, (a - b).abs().max().item())
    return worst


def breakdown(fast, rng, rounds, seconds):
    """Per case, the parts of the fastgru model's call (µs), timed interleaved."""
    gru = fast.gru
    params = gru._flat_weights
    runs = {}
    for case, (n, t) in CASES.items():
        features = torch.from_numpy(rng.standard_normal((n, FEATURES, t), dtype=np.float32))
        x = torch.relu(fast.conv(features)).transpose(1, 2)
        y, h = gru(x)
        stack = fastgru_torch._PACKS.get(params, ("gru", True, 2, False, None), None)  # packed by the call above
        ops = stack.layers
        x_np, x_contig = x.numpy(), np.ascontiguousarray(x.numpy())
        h0 = np.zeros((n, 1, HIDDEN), np.float32)
        y1 = np.empty((n, 1, t, HIDDEN), np.float32)
        y2, ho = np.empty((n, 1, t, HIDDEN), np.float32), np.empty((n, 1, HIDDEN), np.float32)
        h_t = h if case == "stream-b1" else None

        def kernels(x_contig=x_contig, h0=h0, y1=y1, y2=y2, ho=ho, ops=ops, n=n, t=t):
            ops[0](x_contig, h0, None, out=(y1, ho))
            ops[1](y1.reshape(n, t, HIDDEN), h0, None, out=(y2, ho))

        state = np.zeros((n, stack.state_size), np.float32)

        def stacked(x_contig=x_contig, state=state, y2=y2, stack=stack):
            stack(x_contig, state, None, out=(y2, state))

        args = (x, h_t, None, params, True, 2, False, True)

        def policy(fn, n=n, t=t):  # the module's thread count for this call (fastgru.torch._with_torch_threads)
            return lambda: fastgru_torch._with_torch_threads(n, t, fn)

        runs.update(
            {
                (case, "whole model"): lambda features=features, h=h_t: fast(features, h),
                (case, "conv + relu + head (torch)"): lambda features=features, y=y: (
                    torch.relu(fast.conv(features)).transpose(1, 2),
                    fast.head(y),
                ),
                (case, "GRU module"): lambda x=x, h=h_t: gru(x, h),
                (case, "  the custom op instead of the direct call"): lambda args=args: torch.ops.fastgru.gru(*args),
                (case, "  run_layers (the stack and the layouts)"): policy(
                    lambda x_np=x_np, stack=stack: _import_torch.run_layers(stack, x_np, None, None, True)
                ),
                (case, "  the stack, contiguous X, out="): policy(stacked),
                (case, "  the stack, contiguous X, out=, every thread"): stacked,
                (case, "  the prepared ops, contiguous X, out="): policy(kernels),
                (case, "  the prepared ops, contiguous X, out=, every thread"): kernels,
            }
        )
    times = interleaved(runs, rounds, seconds)
    return {f"{case} | {part}": round(value * 1e6, 1) for (case, part), value in times.items()}


#: The thread settings ``--threads`` compares: (``torch.set_num_threads``, ``fastgru.torch.set_num_threads``
#: during the call: None keeps fastgru's rule, 2 gives the GRUs fastgru's two threads, the partner included).
THREAD_CHOICES = {
    "torch's threads 2, fastgru's rule": (2, None),
    "torch's threads 1, fastgru's rule": (1, None),
    "torch's threads 2, fastgru.torch.set_num_threads(2)": (2, 2),
    "torch's threads 1, fastgru.torch.set_num_threads(2)": (1, 2),
}


def thread_choices(reference, fast, rng, rounds, seconds, cases=("stream-b1", "b1-t100")):
    """Per case, torch's model and the fastgru model under each of THREAD_CHOICES (µs), interleaved.
    Both settings are made around every call of every row, torch's included, so that each row pays
    them alike."""

    def under(run, threads, fastgru_threads):
        def call():
            torch.set_num_threads(threads)
            fastgru_torch.set_num_threads(fastgru_threads)
            try:
                return run()
            finally:
                fastgru_torch.set_num_threads(None)
                torch.set_num_threads(2)

        return call

    runs = {}
    for case in cases:
        runs[(case, "torch, torch's threads 2")] = under(make_run(reference, case, rng), 2, None)
        runs[(case, "torch, torch's threads 1")] = under(make_run(reference, case, rng), 1, None)
        for name, (threads, fastgru_threads) in THREAD_CHOICES.items():
            runs[(case, f"fastgru, {name}")] = under(make_run(fast, case, rng), threads, fastgru_threads)
    times = interleaved(runs, rounds, seconds)
    return {f"{case} | {name}": round(value * 1e6, 1) for (case, name), value in times.items()}


def machine():
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numba": numba.__version__,
        "numpy": np.__version__,
        "fastgru": fastgru.__version__,
        "torch_threads": torch.get_num_threads(),
        "fastgru_threads": fastgru.get_num_threads(),
        "numba_threading_layer": numba.threading_layer(),
        "isa": fastgru._isa.describe(),
        "GOMP_SPINCOUNT": os.environ.get("GOMP_SPINCOUNT", "unset"),
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "unset"),
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "unset"),
        "date": time.strftime("%Y-%m-%d"),
    }


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=0.3, help="per (case, implementation) and round")
    parser.add_argument("--breakdown", action="store_true", help="also time the parts of the fastgru model")
    parser.add_argument("--threads", action="store_true", help="also time the thread settings of THREAD_CHOICES")
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    reference = SpeechModel().eval()
    fast = fastgru.torch.optimize(reference)
    with torch.inference_mode():
        deviation = check(reference, fast, rng)
        runs = {}
        for case in CASES:
            runs[(case, "torch")] = make_run(reference, case, rng)
            runs[(case, "fastgru")] = make_run(fast, case, rng)
        times = interleaved(runs, args.rounds, args.seconds)
        parts = breakdown(fast, rng, args.rounds, args.seconds) if args.breakdown else {}
        threads = thread_choices(reference, fast, rng, args.rounds, args.seconds) if args.threads else {}
    info = machine()
    print(f"float32; medians of {args.rounds} interleaved rounds; {info}")
    print(f"largest |fastgru - torch| over the cases' outputs: {deviation:.2g}\n")
    print("| case | torch µs | fastgru.torch.optimize µs | speed-up |")
    print("|---|---|---|---|")
    results = {}
    for case in CASES:
        t, f = times[(case, "torch")], times[(case, "fastgru")]
        results[case] = {"torch_us": t * 1e6, "fastgru_us": f * 1e6, "speedup": t / f}
        unit = " per frame" if case == "stream-b1" else ""
        print(f"| {case} | {t * 1e6:,.1f}{unit} | {f * 1e6:,.1f} | {t / f:.2f}x |")
    if parts:
        print("\nWhere the fastgru model's time goes (µs per call):")
        for name, value in parts.items():
            print(f"  {name:<70} {value:>10,.1f}")
    if threads:
        print("\nThread settings (µs per call; torch.set_num_threads around every call of every row):")
        for name, value in threads.items():
            print(f"  {name:<70} {value:>10,.1f}")
    if args.json:
        record = {"machine": info, "deviation": deviation, "results": results, "breakdown": parts, "threads": threads}
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
