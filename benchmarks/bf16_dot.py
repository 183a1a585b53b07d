"""Does AVX512_BF16's dot product pay for bfloat16 weights on this CPU? Two measurements.

    python benchmarks/bf16_dot.py instructions
    python benchmarks/bf16_dot.py ops [--rounds 7] [--seconds 0.15]

``instructions``: the throughput and latency of VDPBF16PS (16 float32 sums of two bfloat16
products each, 32 multiply-adds) against VFMADD (16 multiply-adds) on zmm registers, in loops of
1 to 12 independent accumulators compiled by llvmlite for this CPU: ns per instruction and per
multiply-add. A CPU without AVX512_BF16 measures only the fused multiply-add.

``ops``: GRUSequence (forward, linear_before_reset, float32 inputs) with float32 and bfloat16 weights,
interleaved rounds of ``--seconds`` each, the median µs per call and the ratio bfloat16 / float32,
for the batch-1 shapes of benchmarks/weight_dtypes.py and the DIEN shape. It times whichever
fastgru is imported: the kernels that the checkout compiles (the dot products in commit 4c64853,
``PYTHONPATH`` pointing at its sources; the shifts with ``NUMBA_CPU_NAME`` set to this CPU's
name, which keeps its features but not the dot products).
"""

import argparse
import ctypes
import statistics
import sys
import time

import numpy as np


def _loop(op, accumulators):
    """LLVM IR of a loop doing ``accumulators`` independent chains of ``op`` ('fma' or 'dot')."""
    if op == "fma":
        declare = "declare <16 x float> @llvm.fma.v16f32(<16 x float>, <16 x float>, <16 x float>)"
        call = "call <16 x float> @llvm.fma.v16f32(<16 x float> %a{j}, <16 x float> %x, <16 x float> %y)"
    else:
        name = "@llvm.x86.avx512bf16.dpbf16ps.512"
        declare = f"declare <16 x float> {name}(<16 x float>, <32 x bfloat>, <32 x bfloat>)"
        call = f"call <16 x float> {name}(<16 x float> %a{{j}}, <32 x bfloat> %xb, <32 x bfloat> %yb)"
    lines = [
        "define void @run(<16 x float>* %out, <16 x float>* %in, i64 %n) {",
        "entry:",
        "  %x = load <16 x float>, <16 x float>* %in, align 4",
        "  %y = load volatile <16 x float>, <16 x float>* %in, align 4",
        "  %xb = bitcast <16 x float> %x to <32 x bfloat>",
        "  %yb = bitcast <16 x float> %y to <32 x bfloat>",
        "  br label %loop",
        "loop:",
        "  %i = phi i64 [0, %entry], [%i1, %loop]",
    ]
    lines += [f"  %a{j} = phi <16 x float> [zeroinitializer, %entry], [%n{j}, %loop]" for j in range(accumulators)]
    lines += [f"  %n{j} = " + call.format(j=j) for j in range(accumulators)]
    lines += ["  %i1 = add i64 %i, 1", "  %more = icmp ult i64 %i1, %n", "  br i1 %more, label %loop, label %exit"]
    lines += ["exit:"]
    for j in range(accumulators):
        lines.append(f"  %p{j} = getelementptr <16 x float>, <16 x float>* %out, i64 {j}")
        lines.append(f"  store <16 x float> %n{j}, <16 x float>* %p{j}, align 4")
    lines += ["  ret void", "}", declare]
    return "\n".join(lines)


def instructions(iterations=20_000_000):
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    features = llvm.get_host_cpu_features()
    print(f"CPU {llvm.get_host_cpu_name()}, avx512f {features.get('avx512f')}, avx512bf16 {features.get('avx512bf16')}")
    if not features.get("avx512f"):
        print("no AVX-512: nothing to measure")
        return
    ops = ("fma", "dot") if features.get("avx512bf16") else ("fma",)
    engines = []  # an execution engine owns its target machine and its code: kept to the end
    print("| instruction | accumulators | ns per instruction | ns per loop | ns per multiply-add |")
    print("|---|---|---|---|---|")
    for op in ops:
        for accumulators in (1, 4, 8, 12):
            module = llvm.parse_assembly(_loop(op, accumulators))
            machine = llvm.Target.from_default_triple().create_target_machine(
                cpu=llvm.get_host_cpu_name(), features=features.flatten(), opt=3
            )
            engine = llvm.create_mcjit_compiler(module, machine)
            engine.finalize_object()
            engines.append(engine)
            run = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(
                engine.get_function_address("run")
            )
            out, inp = np.zeros(16 * accumulators, np.float32), np.full(16, 0.5, np.float32)
            run(out.ctypes.data, inp.ctypes.data, 1000)
            start = time.perf_counter()
            run(out.ctypes.data, inp.ctypes.data, iterations)
            per_loop = (time.perf_counter() - start) / iterations * 1e9
            per_instruction = per_loop / accumulators
            name = "VFMADD zmm (16)" if op == "fma" else "VDPBF16PS zmm (32)"
            macs = 16 if op == "fma" else 32
            print(
                f"| {name} | {accumulators} | {per_instruction:.3f} | {per_loop:.3f} | {per_instruction / macs:.4f} |"
            )


def ops(rounds, seconds):
    import fastgru
    from fastgru import _isa

    print(f"fastgru {fastgru.__file__}: {_isa.describe()}")
    rng = np.random.default_rng(0)
    print("| shape (b, s, i, h) | float32 µs | bfloat16 µs | bfloat16 / float32 |")
    print("|---|---|---|---|")
    for n, s, i, h in [(1, 100, 256, 256), (1, 100, 256, 512), (1, 100, 1024, 1024), (128, 50, 36, 36)]:
        W = rng.uniform(-0.1, 0.1, (1, 3 * h, i)).astype(np.float32)
        R = rng.uniform(-0.1, 0.1, (1, 3 * h, h)).astype(np.float32)
        B = rng.uniform(-0.1, 0.1, (1, 4 * h)).astype(np.float32)
        args = (rng.standard_normal((n, s, i)).astype(np.float32), np.zeros((n, 1, h), np.float32), np.full(n, s))
        built = {
            wd: fastgru.GRUSequence(W, R, B, linear_before_reset=True, weight_dtype=wd) for wd in (None, "bfloat16")
        }
        times = {wd: [] for wd in built}
        for op in built.values():
            op(*args)
        for _ in range(rounds):
            for wd, op in built.items():
                calls, start = 0, time.perf_counter()
                while time.perf_counter() - start < seconds:
                    op(*args)
                    calls += 1
                times[wd].append((time.perf_counter() - start) / calls * 1e6)
        f32, bf16 = statistics.median(times[None]), statistics.median(times["bfloat16"])
        print(f"| {n}, {s}, {i}, {h} | {f32:,.1f} | {bf16:,.1f} | {bf16 / f32:.2f} |", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("instructions", "ops"))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=0.15)
    args = parser.parse_args(argv)
    if args.what == "instructions":
        instructions()
    else:
        ops(args.rounds, args.seconds)


if __name__ == "__main__":
    sys.exit(main())
