"""Every figure of README.md, CHANGELOG.md, the pages of docs/ and fastgru's docstrings, with the committed file
it comes from; ``tests/test_figures.py`` checks them (docs/contributing.md, "Figures", says how to add one).

``table(doc, marker, source, command)``: a table that a benchmark script writes between
``<!-- marker:start -->`` and ``<!-- marker:end -->`` of ``doc``, and into ``source``; the two must
be the same text.

``figure(doc, quote, source, *figures)``: ``quote`` is text of ``doc`` (line breaks and indents
count as one space); ``figures`` are the numbers of the quote that come from ``source`` (a committed
results file, a list of them, or the code for a constant). A figure ``"A"`` must be some number of
the source rounded to A's decimals; ``"A = B"`` says the source writes it as B (another unit, a
constant's line): B is in the source verbatim and one of its numbers, times a power of ten, rounds to A.
"""

TABLES = []
FIGURES = []


def table(doc, marker, source, command):
    TABLES.append({"doc": doc, "marker": marker, "source": source, "command": command})


def figure(doc, quote, source, *figures):
    FIGURES.append({"doc": doc, "quote": quote, "source": source, "figures": list(figures)})


README, CHANGELOG = "README.md", "CHANGELOG.md"
# The documentation's pages that quote figures.
OPS, STACKS, PYTORCH = "docs/guide/ops.md", "docs/guide/stacks.md", "docs/guide/pytorch.md"
MODELS, STREAMS, SERVING = "docs/guide/models.md", "docs/guide/streams.md", "docs/guide/serving.md"
PLATFORMS = "docs/guide/platforms.md"
PERF_Z4, PERF_Z4C = "docs/performance/zen4-avx512.md", "docs/performance/zen4-avx2code.md"
PERF_ER = "docs/performance/emeraldrapids-avx512.md"
# The folders of the results (benchmarks/README.md, "Results: one folder per CPU") and of the A/B records.
Z4, Z4C, Z3 = "benchmarks/results/zen4-avx512/", "benchmarks/results/zen4-avx2code/", "benchmarks/results/zen3-avx2/"
ER, ERC = "benchmarks/results/emeraldrapids-avx512/", "benchmarks/results/emeraldrapids-avx2code/"
AB_Z4, AB_Z4C, AB_Z3 = "benchmarks/ab/zen4-avx512/", "benchmarks/ab/zen4-avx2code/", "benchmarks/ab/zen3-avx2/"
AB_ER, AB_ERC = "benchmarks/ab/emeraldrapids-avx512/", "benchmarks/ab/emeraldrapids-avx2code/"
RESULTS, RESULTS_AVX2 = Z4 + "bench_gru_results.md", Z4C + "bench_gru_results.md"
TORCH = [Z4 + "torch_model_results_2026-11-24.json", Z4 + "torch_model_results_spincount.json"]
TUNING, TUNING_CODE = "docs/tuning.md", "fastgru/_tuning.py"
WAKE, POOL, MICRO = (
    Z4 + "partner_wake_results.md",
    Z4 + "pool_results.md",
    Z4 + "microkernel_results.json",
)
COLD, ULP = ER + "cold_start_results.md", Z3 + "activations_ulp_results.md"
AARCH64_CI = Z3 + "aarch64_ci_results.md"

# ------------------------------------------------------------------------------ README.md
# The performance charts' captions (benchmarks/stacks.py, the "stack / ORT" column)
figure(
    README,
    "AMD EPYC Zen 4, AVX-512** (avx512 code): the stack took 0.64-0.85",
    Z4 + "stacks_results.md",
    "0.64",
    "0.85",
)
figure(README, "AMD EPYC Zen 3, AVX2** (avx2 code): the stack took 0.58-0.91", Z3 + "stacks_results.md", "0.58", "0.91")
figure(
    README,
    "Intel Xeon, Emerald Rapids, AVX-512** (avx512 code): the stack took 0.49-0.95",
    ER + "stacks_results.md",
    "0.49",
    "0.95",
)
figure(
    README,
    "(12 s for a first float32 `gru_sequence` on a 2-core Intel Xeon, Emerald Rapids, AVX-512",
    COLD,
    "12",
)

# ---------------------------------------------------------------- the user guide and the performance pages
figure(
    STACKS,
    "On an AMD EPYC Zen 3 with AVX2 code the stack took 0.58-0.91 of ONNX Runtime's time",
    Z3 + "stacks_results.md",
    "0.58",
    "0.91",
)
# Platforms (.ci/aarch64.sh, FASTGRU_CI_RECORD)
figure(
    PLATFORMS,
    "the step took 481 s from nothing and 92 s with its cache kept",
    AARCH64_CI,
    "481",
    "92",
)
figure(PLATFORMS, "and 160 s with the stack tests added", AARCH64_CI, "160")
# Start-up (benchmarks/cold_start.py)
figure(
    SERVING,
    "about 12 s for a first float32 `gru_sequence` and 51 s for every path of both dtypes (medians on a 2-core "
    "Intel Xeon, Emerald Rapids, AVX-512",
    COLD,
    "12",
    "51",
)
# PyTorch models (benchmarks/torch_model.py: results and --breakdown, default and GOMP_SPINCOUNT=10000)
figure(
    PYTORCH,
    "the partner for 1 ms after each call",
    TUNING_CODE,
    "1 ms = SPIN_US = 1000",
)
figure(
    PYTORCH,
    "the batch-1 GRU takes 2,451 µs on one thread by default, 1,371 µs with the partner",
    TORCH,
    "2,451",
    "1,371",
)
figure(
    PYTORCH,
    "| batch 1, 100 frames per call | 6,932 µs | 2,766 µs | 2.51x | 7,076 µs | 1,810 µs | 3.91x |",
    TORCH,
    "6,932",
    "2,766",
    "2.51",
    "7,076",
    "1,810",
    "3.91",
)
figure(
    PYTORCH,
    "| batch 32, 100 frames per call | 56,368 µs | 35,824 µs | 1.57x | 53,505 µs | 29,517 µs | 1.81x |",
    TORCH,
    "56,368",
    "35,824",
    "1.57",
    "53,505",
    "29,517",
    "1.81",
)
figure(
    PYTORCH,
    "| batch 1, one frame per call, the state carried | 198.2 µs per frame | 147.4 µs | 1.34x | 195.5 µs | "
    "146.5 µs | 1.33x |",
    TORCH,
    "198.2",
    "147.4",
    "1.34",
    "195.5",
    "146.5",
    "1.33",
)
figure(
    PYTORCH,
    "torch's own model runs as fast with it here (7.1 ms at batch 1)",
    TORCH,
    "7.1 = 7076.128000335302",
)
figure(
    PYTORCH,
    "the whole batch-32 model takes 29.5 ms instead of 36.5 ms (the breakdown below), its GRU module the same "
    "26.2 and 26.0 ms",
    TORCH,
    '29.5 = "b32-t100 | whole model": 29503.6',
    '36.5 = "b32-t100 | whole model": 36459.3',
    '26.2 = "b32-t100 | GRU module": 26224.3',
    '26.0 = "b32-t100 | GRU module": 25990.7',
)
figure(
    PYTORCH,
    "132 µs in torch's Conv1d, ReLU and Linear and 2,451 µs in the GRU on one thread (its prepared ops alone "
    "2,389 µs), 1,371 µs with `GOMP_SPINCOUNT=10000` and the partner thread; at batch 32, of the whole model's "
    "36,459 µs, 2,700 µs in torch's layers and 25,991 µs in the GRU (25,114 µs its prepared ops)",
    TORCH,
    '132 = "b1-t100 | conv + relu + head (torch)": 132.1',
    '2,451 = "b1-t100 | GRU module": 2451.0',
    '2,389 = "b1-t100 |   the prepared ops, contiguous X, out=": 2389.2',
    '1,371 = "b1-t100 | GRU module": 1371.2',
    '36,459 = "b32-t100 | whole model": 36459.3',
    '2,700 = "b32-t100 | conv + relu + head (torch)": 2699.9',
    '25,991 = "b32-t100 | GRU module": 25990.7',
    '25,114 = "b32-t100 |   the prepared ops, contiguous X, out=": 25113.6',
)
figure(
    PYTORCH,
    "one frame at a time, of the whole model's 142.6 µs, 28.9 µs in torch's layers and 79.4 µs in the GRU "
    "module, of which 63.4 µs in its prepared ops with their layouts and 58.1 µs in the two prepared ops alone "
    "(one thread; 46.2 µs on both)",
    TORCH,
    '142.6 = "stream-b1 | whole model": 142.6',
    '28.9 = "stream-b1 | conv + relu + head (torch)": 28.9',
    '79.4 = "stream-b1 | GRU module": 79.4',
    '63.4 = "stream-b1 |   run_layers (the prepared ops and the layouts)": 63.4',
    '58.1 = "stream-b1 |   the prepared ops, contiguous X, out=": 58.1',
    '46.2 = "stream-b1 |   the prepared ops, contiguous X, out=, every thread": 46.2',
)
figure(
    PYTORCH,
    "the GRU module took 86.9 µs per frame against 79.4 µs called directly, 2,487 µs against 2,451 µs at batch 1 "
    "over 100 frames, and 26,263 µs against 25,991 µs at batch 32",
    TORCH,
    '86.9 = "stream-b1 |   the custom op instead of the direct call": 86.9',
    '79.4 = "stream-b1 | GRU module": 79.4',
    '2,487 = "b1-t100 |   the custom op instead of the direct call": 2487.2',
    '2,451 = "b1-t100 | GRU module": 2451.0',
    '26,263 = "b32-t100 |   the custom op instead of the direct call": 26262.5',
    '25,991 = "b32-t100 | GRU module": 25990.7',
)
figure(
    PYTORCH,
    "torch's 195.5-198.2 µs here: torch's layers (28.9 µs) and fastgru's two cells on both threads (46.2 µs)",
    TORCH,
    "195.5",
    "198.2",
    '28.9 = "stream-b1 | conv + relu + head (torch)": 28.9',
    '46.2 = "stream-b1 |   the prepared ops, contiguous X, out=, every thread": 46.2',
)
# PyTorch models: the thread settings (benchmarks/torch_model.py --threads, default and OMP_WAIT_POLICY=passive)
THREADS_TM = [Z4 + "torch_model_results_threads.json", Z4 + "torch_model_results_threads_passive.json"]
figure(
    PYTORCH, "| torch's, 2 | 196.3 | 7,162.6 | 429.5 | 19,576.4 |", THREADS_TM, "196.3", "7,162.6", "429.5", "19,576.4"
)
figure(
    PYTORCH, "| torch's, 1 | 191.6 | 7,420.8 | 190.9 | 6,847.6 |", THREADS_TM, "191.6", "7,420.8", "190.9", "6,847.6"
)
figure(
    PYTORCH,
    "| fastgru's, 2, the rule (the default) | 117.1 | 2,804.7 | 238.9 | 1,630.7 |",
    THREADS_TM,
    "117.1",
    "2,804.7",
    "238.9",
    "1,630.7",
)
figure(
    PYTORCH,
    "| fastgru's, 1, the rule | 119.1 | 2,848.0 | 118.6 | 2,697.4 |",
    THREADS_TM,
    "119.1",
    "2,848.0",
    "118.6",
    "2,697.4",
)
figure(
    PYTORCH,
    "| fastgru's, 2, `fastgru.torch.set_num_threads(2)` | 262.0 | 2,902.4 | 132.7 | 1,801.4 |",
    THREADS_TM,
    "262.0",
    "2,902.4",
    "132.7",
    "1,801.4",
)
figure(
    PYTORCH,
    "| fastgru's, 1, `fastgru.torch.set_num_threads(2)` | 108.8 | 1,712.3 | 106.0 | 1,591.2 |",
    THREADS_TM,
    "108.8",
    "1,712.3",
    "106.0",
    "1,591.2",
)
figure(
    PYTORCH,
    "With the recipe a frame took 108.8 µs against torch's best 191.6 µs, and 100 frames 1,712.3 µs against 7,162.6 µs",
    THREADS_TM,
    "108.8",
    "191.6",
    "1,712.3",
    "7,162.6",
)
figure(PYTORCH, "(429.5 µs a frame at two threads)", THREADS_TM, "429.5")
# Load a model: the tests' tolerances
figure(
    MODELS,
    "The tests require each float32 result within rtol 1e-5 and atol 2e-6 of the framework's, and each float64 "
    "result within rtol 1e-12 and atol 1e-13",
    "tests/conftest.py",
    '1e-5 = "float32": (1e-5',
    '2e-6 = "float32": (1e-5, 2e-6)',
    '1e-12 = "float64": (1e-12',
    '1e-13 = "float64": (1e-12, 1e-13)',
)
# Accuracy
figure(
    OPS,
    "at most 4 ulp from the correctly rounded value for every float32 input",
    "tests/test_activations.py",
    "4 = MAX_ULP = 4",
)
figure(OPS, "2 ulp at most over all 2³² inputs, with or without FMA", ULP, "2 = sigmoid 2 ulp, tanh 2 ulp")
# Performance, AVX-512 (benchmarks/results/zen4-avx512/bench_gru_results.md, the table above it)
figure(
    PERF_Z4,
    "(0.53-0.92) and behind on the batch-1 cell (1.17 with lbr0, 1.12 with lbr1) and the tiny shape (1.40)",
    RESULTS,
    "0.53",
    "0.92",
    "1.17",
    "1.12",
    "1.40",
)
figure(PERF_Z4, "(6.7 against 4.8 µs)", RESULTS, "6.7", "4.8")
figure(
    PERF_Z4,
    "A 2 × 256 frame took 19.0 µs with bfloat16 weights against 28.7 µs with float32 ones and 38.6 µs for "
    "ONNX Runtime's float32 graph (0.49x), a 3 × 256 frame 36.8 µs (0.52x)",
    Z4 + "stacks_results_bf16.md",
    *("19.0", "28.7", "38.6", "0.49", "36.8", "0.52"),
)
figure(
    PERF_Z4,
    "by at most 0.00044 in a frame and 0.0014 after 100 steps",
    Z4 + "stacks_results_bf16.json",
    *("0.00044", "0.0014"),
)

ROOFLINE_Z4 = Z4 + "roofline_results.md"
figure(PERF_Z4, "Half of the 1.57 MB of weights of i256 h256", ROOFLINE_Z4, "1.57")
figure(PERF_Z4, "reads it in 9.0 µs", ROOFLINE_Z4, "9.0")
figure(PERF_Z4, "is 1.1-1.8x that floor here", ROOFLINE_Z4, "1.1", "1.8")
figure(
    PERF_Z4,
    "ONNX Runtime leads on the batch-1 cell (1.24) and on batch 1 × 100 steps × hidden_size 256 (1.20); the tiny "
    "shape is level (0.99). After a pause of 2-20 ms",
    [RESULTS, "benchmarks/bench_gru.py"],
    "1.24",
    "1.20",
    "0.99",
    "2-20 = PAUSE = (0.002, 0.020)",
)
figure(
    PERF_Z4,
    "that sequence takes 1,191 µs after pauses against 537 µs back to back on 2 threads, and 1,196 against "
    "1,075 µs on one thread",
    Z4 + "spaced_results.md",
    "1,191",
    "537",
    "1,196",
    "1,075",
)
figure(
    PERF_Z4,
    "Such a call (49 MFLOP) runs on its own thread, since waking the sleeping partner first took 1.23x the time "
    "alone at this shape",
    WAKE,
    "49",
    "1.23",
)
figure(
    PERF_Z4,
    "the same calls take 841 µs after pauses against 602 µs back to back",
    Z4 + "spaced_results_spin30ms.md",
    "841",
    "602",
)
figure(PERF_Z4, "below ONNX Runtime's 948 µs in the table above", RESULTS, "948")
# Performance, AVX2 (benchmarks/results/zen4-avx2code/bench_gru_results.md)
figure(
    PERF_Z4C,
    "(0.40-0.96) and behind on the batch-1 cell (1.16-1.22) and the tiny shape (1.37, ONNX Runtime's 4.9 µs "
    "with IOBinding against fastgru's 6.7 µs)",
    RESULTS_AVX2,
    "0.40",
    "0.96",
    "1.16",
    "1.22",
    "1.37",
    "4.9",
    "6.7",
)
figure(
    PERF_Z4C,
    "36.7 GFLOP/s on one thread on b64 s100 i256 h256 (`docs/tuning.md`), the avx2 geometry 92.9",
    [TUNING, MICRO],
    "36.7",
    "92.9",
)
for row, numbers in [
    ("| avx512 | znver4 on znver4 | 101.1 | 97.2 (host) | 1.04 |", ("101.1", "97.2", "1.04")),
    ("| avx2 | znver3 on znver4 | 92.9 | 96.6 (host) | 0.96 |", ("92.9", "96.6", "0.96")),
    ("| generic | znver4 on znver4 | 47.7 | 97.0 (host) | 0.49 |", ("47.7", "97.0", "0.49")),
    ("| generic | znver4 on znver4 | 49.7 | 28.9 (Nehalem) | 1.72 |", ("49.7", "28.9", "1.72")),
    ("| avx2 | znver3 on znver4 | 90.5 | 84.3 (Haswell) | 1.07 |", ("90.5", "84.3", "1.07")),
]:
    figure(PERF_Z4, row, MICRO, *numbers)
# Threads
figure(
    SERVING,
    "Entering a parallel region costs 20-30 µs with TBB on the 2-core AMD EPYC Zen 4 test machines (AVX-512; about "
    "100 µs after a pause; `docs/tuning.md`), "
    "so work under 6·10⁶ flops",
    [TUNING, TUNING_CODE],
    "20-30 = 20-30 µs with Numba's TBB",
    "100 = about 100 µs after 50 ms idle",
    "6·10⁶ = SERIAL_BELOW_FLOPS = 6_000_000",
)
figure(SERVING, "at least 4·10⁵ flops", TUNING_CODE, "4·10⁵ = PAIR_FROM_FLOPS = 400_000")
figure(
    SERVING,
    "a call of at least 1.5·10⁸ flops wakes it first and shares the steps left when it arrives. That threshold "
    "lies below the point where waking was measured to pay: after 2-20 ms pauses (AMD EPYC Zen 4, AVX-512, "
    "`benchmarks/results/zen4-avx512/partner_wake_results.md`) waking first took 1.23x the time alone at 49 "
    "MFLOP (h256 × 100 steps) "
    "and at 177 MFLOP (h512), and 0.46x at 668 MFLOP (h1024), so calls between 150 and 668 MFLOP",
    [TUNING_CODE, WAKE],
    "1.5·10⁸ = PAIR_WAKE_FLOPS = 150_000_000",
    "2-20 = after 2-20 ms pauses",
    "1.23",
    "49",
    "177",
    "0.46",
    "668",
    "150 = PAIR_WAKE_FLOPS = 150_000_000",
)
# Many streams (benchmarks/pool.py)
figure(
    STREAMS,
    "at 64 streams a tick of one `pool.step` advances 228,925 streams per second against 40,609 for 64 "
    "`cell(x, h, out=h)` calls, **5.6x**, and 4.4x ONNX Runtime's batch-1 runs per stream. From 1 to 1024 streams "
    "the pool gives 0.9x to 5.9x the per-stream calls",
    POOL,
    "228,925",
    "40,609",
    "5.6",
    "4.4",
    "0.9",
    "5.9",
)
figure(STREAMS, "per-stream calls stay between 36,632 and 45,967 steps per second", POOL, "36,632", "45,967")

# ------------------------------------------------------------------------------ CHANGELOG.md
figure(
    CHANGELOG,
    "17 s for a first float32 call, 103 s for every kernel path, from an empty cache",
    Z3 + "cold_start_results.md",
    "17",
    "103",
)
figure(CHANGELOG, "one step per tick: 5.6x the steps per second", POOL, "5.6")
# The one engine (issue 41)
ENGINE_AB, COMPILE_AB = AB_Z4 + "engine_ab_one_engine.md", AB_Z4 + "compile_one_engine.md"
figure(
    CHANGELOG,
    "the tiny cell 0.92x, the tiny sequence 0.94x, the cell b1 i256 0.99x, the function API's tiny call "
    "0.60x and its i256 call 0.92x, the stack's frame 0.88x and 100 steps 1.01x, the state pool's step "
    "0.98x and the torch frame 1.01x",
    ENGINE_AB,
    *("0.92", "0.94", "0.99", "0.60", "0.92", "0.88", "1.01", "0.98", "1.01"),
)
figure(CHANGELOG, "62 specialisations (66 before)", COMPILE_AB, "62", "66")
figure(
    CHANGELOG,
    "(28.3-31.4 s against 30.9-34.7 s on a noisy host, 25.2-26.2 against 25.4-26.2 s before",
    COMPILE_AB,
    *("28.3", "31.4", "30.9", "34.7", "25.2", "26.2", "25.4", "26.2"),
)
figure(
    CHANGELOG,
    "2.51x torch at batch 1 over 100 frames, 1.57x at batch 32, 1.34x per streamed frame; with "
    "`GOMP_SPINCOUNT=10000` 3.91x, 1.81x and 1.33x",
    TORCH,
    "2.51",
    "1.57",
    "1.34",
    "3.91",
    "1.81",
    "1.33",
)
figure(
    CHANGELOG,
    "avx512 101.1 GFLOP/s (1.04), avx2 compiled for Zen 3 92.9 (0.96 against OpenBLAS's host kernels, 1.07 "
    "against its Haswell ones; the AVX-512 tiles compiled for Zen 3 reached 36.7 before), generic 47.7-49.7 (0.49 "
    "against the host kernels, 1.72 against OpenBLAS's SSE ones)",
    [MICRO, TUNING],
    "101.1",
    "1.04",
    "92.9",
    "0.96",
    "1.07",
    "36.7",
    "47.7",
    "49.7",
    "0.49",
    "1.72",
)
figure(
    CHANGELOG,
    "within 2 ulp of the correctly rounded value over all 2^32 inputs, with or without FMA",
    ULP,
    "2 = sigmoid 2 ulp, tanh 2 ulp",
)
figure(CHANGELOG, "promised bound, 4 ulp, exhaustively", "tests/test_activations.py", "4 = MAX_ULP = 4")
figure(CHANGELOG, "calls spaced by 2-20 ms pauses", "benchmarks/bench_gru.py", "2-20 = PAUSE = (0.002, 0.020)")
figure(
    CHANGELOG,
    "entering a TBB parallel region costs 20-30 µs on the test machines (`docs/tuning.md`)",
    TUNING,
    "20-30 = 20-30 µs with Numba's TBB",
)
figure(CHANGELOG, "below 6·10⁶ flops", TUNING_CODE, "6·10⁶ = SERIAL_BELOW_FLOPS = 6_000_000")
figure(
    CHANGELOG,
    "(`FASTGRU_SPIN_US`, default 1000 µs; 0 turns it off): a b1 i256 h256 cell 15.3 µs against 21.9 µs on one "
    "thread and 17.9 µs through a TBB parallel region",
    [TUNING_CODE, TUNING],
    "1000 = SPIN_US = 1000",
    "15.3",
    "21.9",
    "17.9",
)
figure(
    CHANGELOG,
    "went from 0.69-1.35 (4 above 1, 2 at or below 0.8) at 0.1.0 "
    "(`benchmarks/results/zen4-avx512/bench_gru_results_0.1.0.md`, that release's run)",
    Z4 + "bench_gru_results_0.1.0.md",
    "0.69",
    "1.35",
)
figure(
    CHANGELOG,
    "to 0.53-1.40 on AVX-512 (3 above 1: the batch-1 cell 1.17 and 1.12, the tiny shape 1.40; 7 at or below 0.8)",
    RESULTS,
    "0.53",
    "1.40",
    "1.17",
    "1.12",
)
figure(CHANGELOG, "and 0.40-1.37 with the AVX2 geometry", RESULTS_AVX2, "0.40", "1.37")
figure(
    CHANGELOG,
    "Calls spaced by 2-20 ms: 0.99-1.24 of ONNX Runtime's time on AVX-512 (0.87-1.68 with AVX2)",
    [RESULTS, RESULTS_AVX2, "benchmarks/bench_gru.py"],
    "2-20 = PAUSE = (0.002, 0.020)",
    "0.99",
    "1.24",
    "0.87",
    "1.68",
)
figure(
    CHANGELOG,
    "wakes it first only from 1.5·10⁸ flops (was 2·10⁷)",
    [TUNING_CODE, TUNING],
    "1.5·10⁸ = PAIR_WAKE_FLOPS = 150_000_000",
    "2·10⁷ = 20 MFLOP",
)
figure(
    CHANGELOG,
    "Measured on b1 s100 sequences after 2-20 ms pauses (AVX-512, "
    "`benchmarks/results/zen4-avx512/partner_wake_results.md`), waking "
    "first took 1.23x the time alone at h256 (49 MFLOP) and also at h512 (177 MFLOP, above the new threshold), "
    "and 0.46x at h1024 (668 MFLOP): waking pays somewhere between 177 and 668 MFLOP, so calls from 150 MFLOP",
    [WAKE, TUNING_CODE],
    "2-20 = after 2-20 ms pauses",
    "1.23",
    "49",
    "177",
    "0.46",
    "668",
    "150 = PAIR_WAKE_FLOPS = 150_000_000",
)
figure(
    CHANGELOG,
    "ratio lies between 0.69 and 1.35 over the 15 benchmark shapes",
    Z4 + "bench_gru_results_0.1.0.md",
    "0.69",
    "1.35",
)
figure(
    CHANGELOG,
    "Per call on a 4x4 one-step sequence, in that run: 6.9 µs (prepared op), 20.1 µs (function)",
    Z4 + "bench_gru_results_0.1.0.md",
    "6.9",
    "20.1",
)

# ------------------------------------------------------------------------------ docs/contributing.md (its examples)
figure("docs/contributing.md", "the pool advances 228,925 streams per second, **5.6x**", POOL, "228,925", "5.6")
figure("docs/contributing.md", "spins for 1 ms after its last job", TUNING_CODE, "1 = SPIN_US = 1000")

# ------------------------------------------------------------------------------ docstrings
figure(
    "fastgru/_kernels/activations.py",
    "Error bound: at most 4 ulp from the correctly rounded value",
    "tests/test_activations.py",
    "4 = MAX_ULP = 4",
)
# The docstring names a Zen 4 (AVX-512, FMA) run, not kept; the kept runs (Zen 3 with FMA, x86-64 without)
# give the same 2 ulp. The module's owner may name those instead.
figure(
    "fastgru/_kernels/activations.py",
    "at most 2 ulp for sigmoid and for tanh",
    ULP,
    "2 = sigmoid 2 ulp, tanh 2 ulp",
)
figure("fastgru/_partner.py", "The cycle counter's rate, measured over 2 ms", "fastgru/_partner.py", "2 = sleep(0.002)")

# ------------------------------------------------------------------------------ not yet sourced
# Figures in modules that other work is changing: their owners source them (a results file and a
# figure(...) above) or remove them. test_figures lets these pass and lists them; add none.
PENDING = [
    ("fastgru/_kernels/marks.py", "64 ids took 8.8 µs as eight NumPy calls"),
    ("fastgru/_threading.py", "(0.6 µs, against 0.15 µs once the pool runs)"),
    ("fastgru/_threading.py", "(0.25 µs instead of 1.1 µs)"),
]

# ------------------------------------------------------------------------------ docs/benchmarking.md
BENCHMARKING = "docs/benchmarking.md"
figure(
    BENCHMARKING,
    "(default 0.25); `--quick`: 3 rounds, 0.06 s",
    "fastgru/_cli.py",
    "0.06 = (3, 0.06) if args.quick else (5, 0.25)",
)
figure(BENCHMARKING, "fastgru's sigmoid and tanh are within 2 ulp", ULP, "2 = sigmoid 2 ulp, tanh 2 ulp")
figure(
    BENCHMARKING, "its partner thread spins for up to 1 ms after a one-row call", TUNING_CODE, "1 ms = SPIN_US = 1000"
)

# ------------------------------------------------------------------------------ caches that travel (tuning.md)
DEPLOYMENT = "docs/deployment.md"
figure(CHANGELOG, "float32 in 32.5 s with `--jobs 2` against 45 s", TUNING, "32.5", "45")
figure(
    CHANGELOG,
    "a moved install with a moved cache makes its first call in 0.62-0.73 s from the interpreter's start, "
    "loading 3 kernels and compiling none, against 10.6 s",
    TUNING,
    "0.62",
    "0.73",
    "10.6",
)
figure(CHANGELOG, "(b1 s100 i64 h256 645 against 642 µs, b64 s100 i256 h256 1.2 % faster)", TUNING, "645", "642", "1.2")
figure(DEPLOYMENT, "32.5 s instead of 45 s", TUNING, "32.5", "45")

# ------------------------------------------------------------------------------ small calls
SMALL, SMALL_BEFORE = Z4 + "small_calls_results.md", AB_Z3 + "small_calls_before.md"
SMALL_ZEN3 = Z3 + "small_calls_results.md"
LAYERS, LAYERS_BEFORE = Z3 + "small_call_layers_results.md", AB_Z3 + "small_call_layers_before.md"
figure(
    PERF_Z4,
    "the tiny cell took 7.49 µs (1.17x ONNX Runtime), the tiny sequence 8.81 µs (1.40x) and the function API "
    "10.54x the prepared cell",
    SMALL_BEFORE,
    "7.49",
    "1.17",
    "8.81",
    "1.40",
    "10.54",
)
figure(
    CHANGELOG,
    "GRUCell i4 h4 `cell(x, h, out=h)` 7.49 -> 2.83 µs (1.17x -> 0.44x ONNX Runtime with IOBinding), GRUSequence "
    "b1 s1 i4 h4 with out= 8.81 -> 2.87 µs (1.40x -> 0.45x;",
    [SMALL_BEFORE, SMALL_ZEN3],
    "7.49",
    "2.83",
    "1.17",
    "0.44",
    "8.81",
    "2.87",
    "1.40",
    "0.45",
)
figure(
    CHANGELOG,
    "with the same arrays 10.54x -> 3.34x the prepared cell's time",
    [SMALL_BEFORE, SMALL_ZEN3],
    "10.54",
    "3.34",
)
figure(
    PERF_ER,
    "tiny cell and sequence take 0.47x and 0.48x ONNX Runtime's time, the hidden-size-256 cell 1.11x (spaced calls "
    "1.30x), and the function API 4.96x the prepared cell",
    ER + "small_calls_results.md",
    "0.47",
    "0.48",
    "1.11",
    "1.30",
    "4.96",
)
figure(
    PERF_Z4,
    "the tiny cell and sequence took 0.50x and 0.51x ONNX Runtime's time, the hidden-size-256 cell 1.42x (spaced "
    "calls 1.13x), and the function API 3.36x the prepared cell",
    AB_Z4 + "small_calls_results_before_shared.md",
    "0.50",
    "0.51",
    "1.42",
    "1.13",
    "3.36",
)
figure(
    PERF_Z4,
    "in a process of its own it takes 17.92 µs, against ONNX Runtime's 19.10 µs with its workers spinning",
    Z4 + "peer_spinning_results.md",
    "17.92",
    "19.10",
)
SHARED, SHARED_AVX2 = AB_Z4 + "direct_calls_ab_shared.md", AB_Z4C + "direct_calls_ab_shared.md"
SMALL_AB = AB_Z4 + "small_calls_ab_shared.md"
SMALL_AB_AVX2 = AB_Z4C + "small_calls_ab_shared.md"
figure(
    CHANGELOG,
    "256 took 61.8 -> 48.9 µs with avx512 code (3.54x -> 2.95x the prepared cell's time) and 65.2 -> 55.4 µs with "
    "AVX2 code (2.58x -> 2.37x), hidden size 512 313.1 -> 160.6 µs",
    [SHARED, SHARED_AVX2],
    "61.8",
    "48.9",
    "3.54",
    "2.95",
    "65.2",
    "55.4",
    "2.58",
    "2.37",
    "313.1",
    "160.6",
)
figure(CHANGELOG, "The prepared cell of hidden size 256 took 17.6 -> 16.7 µs", SHARED, "17.6", "16.7")
figure(
    CHANGELOG,
    "spaced 2-20 ms apart went from 1.11x to 0.88x ONNX Runtime's time (AVX2 code 1.25x to 0.89x;",
    [SMALL_AB, SMALL_AB_AVX2],
    "1.11",
    "0.88",
    "1.25",
    "0.89",
)
figure(
    PERF_Z4,
    "the function API went from 3.22x to 2.71x the prepared cell (AVX2 code 2.57x to 2.36x), and the spaced "
    "hidden-size-256 cell from 1.11x to 0.88x ONNX Runtime's time (1.25x to 0.89x)",
    [SMALL_AB, SMALL_AB_AVX2],
    "3.22",
    "2.71",
    "2.57",
    "2.36",
    "1.11",
    "0.88",
    "1.25",
    "0.89",
)
figure(
    PERF_Z4,
    "(1.33x and 1.29x; AVX2 code 1.11x and 1.20x, whose processes spread from 0.95x to 1.39x)",
    [SMALL_AB, SMALL_AB_AVX2],
    "1.33",
    "1.29",
    "1.11",
    "1.20",
    "0.95",
    "1.39",
)
figure(
    CHANGELOG,
    "an empty cache it took 21.6 -> 25.4 s",
    AB_Z4 + "cold_ab_results_shared_direct.md",
    "21.6",
    "25.4",
)
RACE = Z4 + "wavefront_results.md"
figure(STACKS, "it ran within 1.00-1.03 of the faster way", RACE, "1.00", "1.03")
figure(
    CHANGELOG,
    "had taken 1,283.7 µs as a wavefront against 470.3 µs on its layers' paths",
    AB_Z4 + "stacks_results_before_race.md",
    "1,283.7",
    "470.3",
)
figure(CHANGELOG, "the race runs within 1.00-1.03 of the faster way", RACE, "1.00", "1.03")
DIRECT, DIRECT_AVX2 = AB_ER + "packing_results_direct.md", AB_ERC + "packing_results_direct.md"
figure(
    PERF_ER,
    "the same-weights call at hidden size 256 went from 245.3 to 114.6 µs, a call with new weights from 456.8 to "
    "206.2 µs",
    DIRECT,
    "245.3",
    "114.6",
    "456.8",
    "206.2",
)
figure(PERF_ER, "from 368.7 to 239.3 and from 711.3 to 266.1 µs", DIRECT_AVX2, "368.7", "239.3", "711.3", "266.1")
figure(
    CHANGELOG,
    "H = 256 245.3 -> 114.6 µs and H = 512 944.8 -> 513.6 µs with avx512 code",
    DIRECT,
    "245.3",
    "114.6",
    "944.8",
    "513.6",
)
figure(
    CHANGELOG,
    "368.7 -> 239.3 and 1,274.7 -> 807.3 µs with AVX2 code",
    DIRECT_AVX2,
    "368.7",
    "239.3",
    "1,274.7",
    "807.3",
)
figure(CHANGELOG, "H = 256 456.8 -> 206.2 µs (avx512)", DIRECT, "456.8", "206.2")
figure(
    CHANGELOG,
    "54.1 -> 60.1 s, the first one-row function call 5.4 -> 6.9 s",
    AB_ER + "cold_ab_results_direct.md",
    "54.1",
    "60.1",
    "5.4",
    "6.9",
)
figure(CHANGELOG, "711.3 -> 266.1 µs (AVX2 code)", DIRECT_AVX2, "711.3", "266.1")
figure(
    TUNING,
    "with avx512 code the pair took 0.92, 0.95 and 0.81 of the time alone at h256, h384 and h512, and 1.42 and 1.25 "
    "at h64 and h128; with AVX2 code 0.86 at h256, 1.04 at h384 and h512",
    [AB_ER + "direct_pair_experiment.md", AB_ERC + "direct_pair_experiment.md"],
    "0.92",
    "0.95",
    "0.81",
    "1.42",
    "1.25",
    "0.86",
    "1.04",
)
figure(
    PERF_ER,
    "The one-row function call at hidden size 256 takes 5.76x the prepared cell's time in "
    "`benchmarks/results/emeraldrapids-avx512/direct_calls_results.md` (6.53x with the avx2 geometry compiled "
    "with that host's AVX-512 "
    "features",
    [ER + "direct_calls_results.md", ERC + "direct_calls_results.md"],
    "5.76",
    "6.53",
)
for doc, quote in (
    (
        "docs/architecture.md",
        "took the batch-1 cell of 256 units from 30.57 to 23.16 µs alone in its process, and from 1.35x to 1.16x ONNX "
        "Runtime's time beside it",
    ),
    (CHANGELOG, "30.57 -> 23.16 µs alone in its process, 1.35x -> 1.16x ONNX Runtime beside it"),
):
    figure(doc, quote, AB_ER + "small_calls_pair_plan_ab.md", "30.57", "23.16", "1.35", "1.16")
figure(
    CHANGELOG,
    "went from 1.93x-2.03x to 2.74x-2.88x torch's speed",
    AB_ER + "torch_plans_ab.md",
    "1.93",
    "2.03",
    "2.74",
    "2.88",
)
SPIN0 = Z3 + "small_calls_results_spin0.md"
figure(
    TUNING,
    "24.89 µs on the pair path against 26.86 µs on one thread; the whole `cell(x, h, out=h)` 31.20 µs",
    LAYERS,
    "24.89",
    "26.86",
    "31.20",
)
figure(TUNING, "has the cell at 41.66 µs against ONNX Runtime's 27.87", SMALL_ZEN3, "41.66", "27.87")
figure(TUNING, "the cell on one thread) 32.06 µs against 27.75", SPIN0, "32.06", "27.75")
figure(
    TUNING,
    "The dispatcher costs 133 ns a call with no argument and grows by about 70 ns per array argument: 326 ns for "
    "one array, 601 for four, 754 for seven, 968 for twelve.",
    LAYERS,
    "133",
    "326",
    "601",
    "754",
    "968",
)
figure(TUNING, "costs nothing more: 751 ns for seven", LAYERS, "751")
figure(
    TUNING,
    "took 7.34 µs: `Packed.compute` 5.04, `_paths.run` 3.20, the serial kernel with its twelve arguments 1.96",
    LAYERS_BEFORE,
    "7.34",
    "5.04",
    "3.20",
    "1.96",
)
figure(TUNING, "With them, 2.80 µs: the plan 2.03, its kernel 1.63.", LAYERS, "2.80", "2.03", "1.63")
ARCH = "docs/architecture.md"
figure(ARCH, "| `cell(x, h, out=h)` | 7.34 | 2.80 |", [LAYERS_BEFORE, LAYERS], "7.34", "2.80")
figure(
    ARCH,
    "| checks and conversions: `Packed.compute` / the plan | 5.04 | 2.03 |",
    [LAYERS_BEFORE, LAYERS],
    "5.04",
    "2.03",
)
figure(ARCH, "| choosing the path: `_paths.run` | 3.20 | (none) |", LAYERS_BEFORE, "3.20")
figure(
    ARCH,
    "| the kernel with its arguments: `run_serial`, 12 / `run_planned`, 7 | 1.96 | 1.63 |",
    [LAYERS_BEFORE, LAYERS],
    "1.96",
    "1.63",
)
figure(ARCH, "326 ns with one array, 968 with twelve", LAYERS, "326", "968")
table(
    BENCHMARKING,
    "numpy-candidate",
    Z3 + "candidate_numpy_results.md",
    "python -m fastgru bench --candidate fastgru.reference:gru_sequence --suite tiny-v1 --suite latency-v1; the same "
    "with fastgru.reference:gru_cell --op gru_cell (docs/benchmarking.md)",
)
PACKING, PACKING_AVX2 = AB_ER + "packing_results.md", AB_ERC + "packing_results.md"
figure(
    CHANGELOG,
    "H = 256 521.7 -> 185.4 µs, H = 512 8,734.6 -> 682.5 µs with avx512 code; 517.2 -> 248.9 and 6,221.9 -> 966.3 µs "
    "with AVX2 code",
    [PACKING, PACKING_AVX2],
    "521.7",
    "185.4",
    "8,734.6",
    "682.5",
    "517.2",
    "248.9",
    "6,221.9",
    "966.3",
)
figure(
    CHANGELOG,
    "H = 256 1,276.4 -> 376.9 µs (avx512), 1,253.7 -> 509.7 µs (AVX2 code)",
    [PACKING, PACKING_AVX2],
    "1,276.4",
    "376.9",
    "1,253.7",
    "509.7",
)
figure(
    CHANGELOG,
    "H = 256 223.2 -> 186.1 µs with avx512 code, 224.2 -> 216.1 µs with AVX2 code; at H = 512, whose weights and "
    "packed weights do not fit a core's L2, 737.4 -> 756.0 µs (avx512) and 753.9 -> 903.4 µs (AVX2 code)",
    [PACKING, PACKING_AVX2],
    "223.2",
    "186.1",
    "224.2",
    "216.1",
    "737.4",
    "756.0",
    "753.9",
    "903.4",
)
figure(
    PERF_ER,
    "took the same-weights call from 223.2 to 186.1 µs "
    "(`benchmarks/ab/emeraldrapids-avx512/packing_results.md`), as packing itself "
    "got faster (prepared `GRUCell` construction 521.7 to 185.4 µs)",
    PACKING,
    "223.2",
    "186.1",
    "521.7",
    "185.4",
)
PAIR_OR_ALONE = [ER + "pair_or_alone_results.md", ERC + "pair_or_alone_results.md"]
figure(
    TUNING,
    "(sequences s4-s100 i64 h128 1.11-1.19x the time alone, the cells i192 h192 and i512 h128 even at 1.01 and 0.96), "
    "and wins from there on (sequence s100 i64 h256 0.86, cells i256 h256 0.59, i384 h384 0.36); with AVX2 code on "
    "the same machine, whose steps take longer, h128 sequences gain (s100 0.90) and the cells as before (i256 h256 "
    "0.68)",
    PAIR_OR_ALONE,
    "1.11",
    "1.19",
    "1.01",
    "0.96",
    "0.86",
    "0.59",
    "0.36",
    "0.90",
    "0.68",
)
figure(
    TUNING,
    "With no optimisation (0) the first call takes 8.3 s against 14.4 s at Numba's default (3)",
    ER + "cold_opt_results.md",
    "8.3",
    "14.4",
)
figure(
    TUNING,
    "(14.1 and 13.2 s, within the runs' spread) and make the kernels slower (b64 s100 i256 h256: 27,873.5 µs at 3, "
    "30,707.0 at 2, 37,753.2 at 1)",
    ER + "cold_opt_results.md",
    "14.1",
    "13.2",
    "27,873.5",
    "30,707.0",
    "37,753.2",
)

# ------------------------------------------------------------------------------ the layer wavefront
WAVEFRONT = [ER + "wavefront_results.md", ERC + "wavefront_results.md"]
for row in (
    "| 2 × 64 | 0.77 | 0.88 | yes |",
    "| 2 × 128 | 0.56 | 0.70 | yes |",
    "| 2 × 256 | 0.81 | 0.80 | yes |",
    "| 2 × 384 | 1.43 | 1.58 | no |",
    "| 2 × 512 | 2.22 | 2.31 | no |",
    "| 3 × 128 | 0.73 | 0.89 | yes |",
    "| 3 × 256 | 0.97 | 1.20 | no |",
    "| 4 × 128 | 0.64 | 0.92 | yes |",
):
    figure(TUNING, row, WAVEFRONT, *row.split(" | ")[1:3])
figure(
    TUNING,
    "0.83 at 2 × 128, but 1.11 at 2 × 256 and 1.18 at 2 × 64",
    AB_ER + "wavefront_experiment_per_step.md",
    "0.83",
    "1.11",
    "1.18",
)
figure(
    CHANGELOG,
    "2 × 128 layers 0.56 of the time, 2 × 256 0.81, 4 × 128 0.64; with AVX2 code 0.70, 0.80 and 0.92",
    WAVEFRONT,
    "0.56",
    "0.81",
    "0.64",
    "0.70",
    "0.80",
    "0.92",
)
figure(
    STACKS,
    "it took 0.56 of the split's time for 2 × 128 layers and 0.81 for 2 × 256",
    ER + "wavefront_results.md",
    "0.56",
    "0.81",
)
figure(
    TUNING,
    "chained 0.94, 0.93 and 1.00 of the modules apart at hidden sizes 64, 128 and 256. One 2-layer `torch.nn.GRU` "
    "of the same sizes took 43.1, 86.8 and 273.4 µs per frame, where the modules apart took 67.4, 116.9 and 290.1",
    AB_ER + "torch_chains_experiment.md",
    "0.94",
    "0.93",
    "1.00",
    "43.1",
    "86.8",
    "273.4",
    "67.4",
    "116.9",
    "290.1",
)
figure(
    TUNING,
    "the wavefront's ratios were 0.52-1.02 with 8, 0.59-0.79 with 16 and 0.65-1.00 with 32",
    AB_ER + "wavefront_steps_experiment.md",
    "0.52",
    "1.02",
    "0.59",
    "0.79",
    "0.65",
    "1.00",
)

# ---------------------------------------------------------------------- compile time: driver callbacks (issue 23)
BREAKDOWN = AB_ER + "compile_breakdown_results_callbacks.md"
COLD_CALLBACKS = AB_ER + "cold_ab_results_callbacks.md"
for row in (
    "| float32 serial | 14.47, 17.44 | 14.41, 13.00 |",
    "| float32 parallel | 13.69, 11.71 | 3.91, 4.44 |",
    "| float32 pair | 17.35, 15.04 | 13.09, 11.97 |",
    "| float32 split | 8.45, 7.70 | 0.64, 0.72 |",
    "| float32 plans | 15.08, 14.28 | 4.19, 3.62 |",
    "| all | 73.53, 71.49 | 40.80, 37.67 |",
    "| of which LLVM | 52.53, 49.98 | 21.98, 20.74 |",
):
    figure(TUNING, row, BREAKDOWN, *[f.strip(" |") for f in row.replace(",", " |").split(" | ")[1:5]])
figure(TUNING, "| specialisations compiled | 126 | 105 |", BREAKDOWN, "126", "105")
figure(
    TUNING,
    "the same before code took 56.10 and 53.52 s there, against 44.94 and 36.41 s for f7bb58f",
    BREAKDOWN,
    "56.10",
    "53.52",
    "44.94",
    "36.41",
)
figure(
    TUNING,
    "took 1.86 s of LLVM in run 3's before); what went is the drivers' second, third and fourth copies, which only "
    "the other paths compiled: `run_parallel` (8.75 s of LLVM in run 3's before), `run_split` (6.00), the plans' "
    "`_serial` and `_pair` (2.48, 2.22), `_serve_job` (1.45).",
    BREAKDOWN,
    "1.86",
    "8.75",
    "6.00",
    "2.48",
    "2.22",
    "1.45",
)
for row in (
    "| `warmup()` (float32, every path) | 66.2 | 37.5 | 0.567 |",
    "| first `gru_sequence` call (b4 s10 i16 h32 bidirectional) | 15.9 | 15.0 | 0.939 |",
    "| three calls of a one-row GRUCell, h256 (the pair path and its plan) | 37.9 | 33.2 | 0.876 |",
    "| first function call of one row, `gru_cell` h256 | 7.2 | 6.4 | 0.891 |",
):
    figure(TUNING, row, COLD_CALLBACKS, *[f.strip(" |") for f in row.split(" | ")[1:4]])
figure(
    CHANGELOG,
    "alternating pairs of fresh processes): 73.53 and 71.49 s before, 40.80 and 37.67 s after; LLVM's share 52.53 "
    "and 49.98 s before, 21.98 and 20.74 s after.",
    BREAKDOWN,
    "73.53",
    "71.49",
    "40.80",
    "37.67",
    "52.53",
    "49.98",
    "21.98",
    "20.74",
)
figure(
    CHANGELOG,
    "`warmup()` 66.2 -> 37.5 s, the first `gru_sequence` call 15.9 -> 15.0 s, three one-row GRUCell h256 calls "
    "37.9 -> 33.2 s.",
    COLD_CALLBACKS,
    "66.2",
    "37.5",
    "15.9",
    "15.0",
    "37.9",
    "33.2",
)
figure(
    TUNING,
    "took 0.843-1.026 of their time before (`benchmarks/ab/emeraldrapids-avx512/ab_results_callbacks.md`",
    AB_ER + "ab_results_callbacks.md",
    "0.843",
    "1.026",
)
figure(
    TUNING,
    "a one-row h256 sequence on the pair path took 1.097 of its time before (12 pairs); padded to 56, 0.964.",
    AB_ER + "ab_results_callbacks.md",
    "1.097",
    "0.964",
)
figure(
    TUNING,
    "took 0.931-1.019 of their time before, but the one-row h256 cell on the pair path 1.089 (12 pairs; 28.6 -> 31.1 "
    "µs), against 0.969 for the old code against itself",
    AB_ERC + "ab_results_callbacks.md",
    "0.931",
    "1.019",
    "1.089",
    "28.6",
    "31.1",
    "0.969",
)
figure(TUNING, "It is there already at af8ef1e (1.125)", AB_ERC + "ab_results_callbacks.md", "1.125")
figure(
    TUNING,
    "moved from 0.92 to 1.14 within an hour. Over 20 alternating pairs every change together gave 1.082, 95% "
    "interval 0.958-1.159",
    AB_ERC + "ab_results_pair_cell.md",
    "1.082",
    "0.958",
    "1.159",
)
figure(
    TUNING,
    "20 more processes each, 1.044 (0.971-1.184)",
    AB_ERC + "ab_results_pair_cell.md",
    "1.044",
    "0.971",
    "1.184",
)
figure(
    CHANGELOG,
    "and with 20 pairs 1.082, 95% interval 0.958-1.159",
    AB_ERC + "ab_results_pair_cell.md",
    "1.082",
    "0.958",
    "1.159",
)

# Literal arguments (issue 23): docs/tuning.md, "Literal arguments: one compilation per constant"
BREAKDOWN_LITERALS = AB_ER + "compile_breakdown_results_literals.md"
COLD_LITERALS = AB_ER + "cold_ab_results_literals.md"
AB_LITERALS, AB_LITERALS_AVX2 = AB_ER + "ab_results_literals.md", AB_ERC + "ab_results_literals.md"
for row in (
    "| float32 serial | 11.02 | 9.76 |",
    "| float32 pair | 9.16 | 7.84 |",
    "| float32 plans | 3.32 | 2.84 |",
    "| float32 function calls | 3.24 | 2.12 |",
    "| all | 30.80 | 26.62 |",
    "| of which LLVM | 16.50 | 14.62 |",
    "| specialisations compiled | 105 | 83 |",
):
    figure(TUNING, row, BREAKDOWN_LITERALS, *[f.strip(" |") for f in row.split(" | ")[1:3]])
figure(
    TUNING,
    "`warmup()` 32.6 -> 26.1 s (0.800), the first `gru_sequence` call 12.2 -> 9.9 s (0.814), three calls of a "
    "one-row GRUCell h256 27.6 -> 22.2 s (0.803); the first function call of one row 6.0 -> 6.3 s (1.049",
    COLD_LITERALS,
    "32.6",
    "26.1",
    "0.800",
    "12.2",
    "9.9",
    "0.814",
    "27.6",
    "22.2",
    "0.803",
    "6.0",
    "6.3",
    "1.049",
)
figure(TUNING, "Nearly the same code (923f987) took 37.5 s for `warmup()` a few hours earlier", COLD_CALLBACKS, "37.5")
figure(TUNING, "inside its processes' spread, 5.38-6.84 s", COLD_LITERALS, "5.38", "6.84")
figure(TUNING, "the breakdown's function-call step went 3.24 -> 2.12 s", BREAKDOWN_LITERALS, "3.24", "2.12")
figure(TUNING, "from 0.779 to 1.132 with avx512 code", AB_LITERALS, "0.779", "1.132")
figure(TUNING, "from 0.880 to 1.118 with the avx2 geometry compiled for haswell", AB_LITERALS_AVX2, "0.880", "1.118")
figure(TUNING, "augru b128's interval is 0.700-1.441", AB_LITERALS, "0.700", "1.441")
figure(TUNING, "(h128 lbr1 1.118, h256 1.088)", AB_LITERALS_AVX2, "1.118", "1.088")
figure(
    CHANGELOG,
    "`warmup()` 32.6 -> 26.1 s, the first `gru_sequence` call 12.2 -> 9.9 s.",
    COLD_LITERALS,
    "32.6",
    "26.1",
    "12.2",
    "9.9",
)
figure(
    TUNING,
    "h128 lbr1 0.956 (0.883-1.062), h256 1.053 (0.875-1.170)",
    AB_ERC + "ab_results_literals_rows.md",
    "0.956",
    "0.883",
    "1.062",
    "1.053",
    "0.875",
    "1.170",
)
figure(
    TUNING,
    "the ratios lie between 0.913 and 1.144, every interval again holding 1 (the one-row h256 cell 1.110, 0.912-1.242)",
    AB_ERC + "ab_results_literals_avx2pure.md",
    "0.913",
    "1.144",
    "1.110",
    "0.912",
    "1.242",
)

# The function API's short path (issue 20)
SHORT_AB = AB_ER + "direct_calls_ab_shortpath.md"
FN_BEFORE, FN_AFTER = (
    AB_ER + "small_call_layers_function_before.md",
    AB_ER + "small_call_layers_function_after.md",
)
figure(PERF_ER, "3.04x (from 3.66x in the same alternating processes", SHORT_AB, "3.04", "3.66")
figure(PERF_ER, "with AVX2 code 3.17x from 4.13x", AB_ERC + "direct_calls_ab_shortpath.md", "3.17", "4.13")
figure(PERF_ER, "the call of hidden size 4 takes 8.29 µs instead of 19.81 µs", [FN_AFTER, FN_BEFORE], "8.29", "19.81")
figure(
    CHANGELOG,
    "hidden size 4 19.81 -> 8.29 µs; at hidden size 256, 3.66x -> 3.04x",
    [FN_BEFORE, FN_AFTER, SHORT_AB],
    "19.81",
    "8.29",
    "3.66",
    "3.04",
)
for quote, source, figures in (
    ("| `fastgru.gru_cell(x, h, W, R)` | 19.81 | 8.29 |", [FN_BEFORE, FN_AFTER], ("19.81", "8.29")),
    ("| its short path: the plan's comparisons and the kernel | (none) | 6.53 |", FN_AFTER, ("6.53",)),
    ("| the full checks: `_api._arrays` and `validate` | 3.97 | (skipped) |", FN_BEFORE, ("3.97",)),
    ("| the full path's `Unpacked.compute` | 6.74 | (skipped) |", FN_BEFORE, ("6.74",)),
    ("| the kernel with its 12 arguments: `run_direct` | 2.23 | 2.41 |", [FN_BEFORE, FN_AFTER], ("2.23", "2.41")),
):
    figure("docs/architecture.md", quote, source, *figures)

# --jobs, measured again (issue 23)
JOBS = ER + "warmup_jobs_results.md"
figure("docs/deployment.md", "31.8 s instead of 38.3 s on a 2-core Intel Xeon", JOBS, "31.8", "38.3")
figure("docs/deployment.md", "60.8 CPU seconds instead of 38.4", JOBS, "60.8", "38.4")
figure(
    TUNING,
    "31.8 s with `--jobs 2` against 38.3 s with one process, for 60.8 CPU seconds against 38.4",
    JOBS,
    "31.8",
    "38.3",
    "60.8",
    "38.4",
)
figure(
    TUNING,
    "at hidden size 4 the call went from 19.81 to 8.29 µs, of which the kernel call takes 2.41",
    [FN_BEFORE, FN_AFTER],
    "19.81",
    "8.29",
    "2.41",
)
figure(
    TUNING,
    "from 3.66x to 3.04x the prepared cell's time with avx512 code and from 4.13x to 3.17x with AVX2 code",
    [SHORT_AB, AB_ERC + "direct_calls_ab_shortpath.md"],
    "3.66",
    "3.04",
    "4.13",
    "3.17",
)
figure(
    TUNING,
    "own ratios spread 2.68-3.74 and 2.91-4.67 after",
    [SHORT_AB, AB_ERC + "direct_calls_ab_shortpath.md"],
    "2.68",
    "3.74",
    "2.91",
    "4.67",
)
figure(
    CHANGELOG,
    "the wavefront's 0.70, 0.80 and 0.92 below",
    ERC + "wavefront_results.md",
    "0.70",
    "0.80",
    "0.92",
)

# ------------------------------------------------------------------------------ int8 by byte dot products (issue 42)
INT8_AB = AB_Z4 + "int8_byte_dots_ab.md"
WEIGHTS_Z4, WEIGHTS_Z4_BEFORE = Z4 + "weight_dtypes_results.md", AB_Z4 + "weight_dtypes_results_before_byte_dots.md"
figure(CHANGELOG, "0.81-0.93x their earlier time at one row and 0.83x at batch 64", INT8_AB, "0.81", "0.93", "0.83")
figure(
    CHANGELOG, "batch 1, i256 h512: 863.6 µs, 0.40x float32, against 1,845.9 µs", WEIGHTS_Z4, "863.6", "0.40", "1,845.9"
)
figure(
    PERF_Z4, "a call took 863.6 µs, 0.40x float32's time, against 1,845.9 µs", WEIGHTS_Z4, "863.6", "0.40", "1,845.9"
)
figure(PERF_Z4, "gave 1,056.5 µs (0.47x) against torch's 1,833.2 µs", WEIGHTS_Z4_BEFORE, "1,056.5", "0.47", "1,833.2")
figure(
    CHANGELOG,
    "took its frame 108.8 µs against 117.1 µs by default and 191.6 µs for torch's model at its best",
    THREADS_TM,
    "108.8",
    "117.1",
    "191.6",
)

# ------------------------------------------------------------------------------ the matrix tiles' twins
TILE_ERRORS = Z4 + "tile_errors_results.md"
figure(CHANGELOG, "the three-pass mode deviates 38.5x float32's own deviation", TILE_ERRORS, "38.5")
figure(
    TUNING,
    "deviates 5.6e-6 from the exact sequence, 38.5x float32's own deviation (1.5e-7), and 2.4e-5 (53.6x)",
    TILE_ERRORS,
    "5.6e-6",
    "38.5",
    "1.5e-7",
    "2.4e-5",
    "53.6",
)
figure(TUNING, "VDPBF16PS issues at FMA's rate, one per 0.273 ns", Z4 + "bf16_dot_results.md", "0.273")
figure(
    "docs/semantics.md",
    "it deviated 38.5x float32's own deviation from the exact sequence (5.6e-6 against 1.5e-7), 53.6x with weights "
    "three times larger, 22.5x at hidden size 512",
    TILE_ERRORS,
    *("38.5", "5.6e-6", "1.5e-7", "53.6", "22.5"),
)
TILE_ROAD_AB = AB_Z4 + "tile_road_ab.md"
figure(TUNING, "the compiled call took 1.222 -> 1.353 µs", TILE_ROAD_AB, "1.222", "1.353")
figure(TUNING, "the call was back at 1.233 µs", TILE_ROAD_AB, "1.233")
figure(
    TUNING,
    "the first gru_sequence call 10.5 -> 11.3 s, a one-row cell's first three calls 17.1 -> 18.5 s",
    TILE_ROAD_AB,
    *("10.5", "11.3", "17.1", "18.5"),
)
figure(
    TUNING,
    "The compiled call took 1.179 against 1.224 µs (the cell's 1.179 against 1.238), the empty-cache start-ups "
    "0.993-1.029 of before, and every benchmark shape 0.821-1.259 of before",
    TILE_ROAD_AB,
    *("1.179", "1.224", "1.179", "1.238", "0.993", "1.029", "0.821", "1.259"),
)
figure(TUNING, "the three highest or widest again over 8 pairs, 1.001-1.006", TILE_ROAD_AB, "1.001", "1.006")
figure(
    CHANGELOG,
    "every benchmark shape 0.821-1.259 of before in one run, every interval holding 1; the empty-cache start-ups "
    "0.993-1.029",
    TILE_ROAD_AB,
    *("0.821", "1.259", "0.993", "1.029"),
)
figure("docs/semantics.md", "holds it within 64x float32's deviation", "tests/test_tiles.py", "64")
figure("docs/guide/compact-weights.md", "near float32 (38.5x float32's own deviation", TILE_ERRORS, "38.5")

figure(
    TUNING,
    "the hidden-size-256 cell 0.970x its time over 10 pairs of processes (interval 0.958-0.982",
    AB_Z4 + "shared_take_two_ab.md",
    "0.970",
    "0.958",
    "0.982",
)
figure(TUNING, "11.1 of 16.5 µs before the change", AB_Z4 + "shared_take_two_ab.md", "11.1", "16.5")
figure(CHANGELOG, "the hidden-size-256 cell took 0.970x its time", AB_Z4 + "shared_take_two_ab.md", "0.970")
figure(CHANGELOG, "runs 1.09-1.80x its cache roofline", ROOFLINE_Z4, "1.09", "1.80")
PAIR_TAKE_AB = AB_Z4 + "pair_take_ab.md"
figure(
    CHANGELOG,
    "its take and release took 1.968 -> 0.673 µs (0.342x), the prepared cell of hidden size 256 with "
    "linear_before_reset 16.30 -> 14.40 µs in float32 (0.883x) and 9.25 -> 7.78 µs with int8 weights (0.841x)",
    PAIR_TAKE_AB,
    *("1.968", "0.673", "0.342", "16.30", "14.40", "0.883", "9.25", "7.78", "0.841"),
)
figure(CHANGELOG, "and 0.899x and 0.851x by", PAIR_TAKE_AB, "0.899", "0.851")
figure(
    TUNING,
    "Take and release went from 1.968 to 0.673 µs, and the hidden-size-256 cell with linear_before_reset "
    "from 16.30 to 14.40 µs in float32 and from 9.25 to 7.78 µs with int8 weights",
    PAIR_TAKE_AB,
    *("1.968", "0.673", "16.30", "14.40", "9.25", "7.78"),
)
figure(
    TUNING,
    "(712.4 ns in one process), the count's read takes 113.7 ns",
    PAIR_TAKE_AB,
    "712.4",
    "113.7",
)
figure(
    TUNING,
    "the lock 90.9 ns, taken by `acquire` and `release`: a `with` block took 170.1 ns",
    PAIR_TAKE_AB,
    "90.9",
    "170.1",
)
STREAM_AB = AB_Z4 + "stream_plan_ab.md"
figure(
    TUNING,
    "a stack's stream went from 4.55-5.33 to 1.19-1.68 µs more, a layer's from 4.65-4.97 to 1.90-2.74, and the "
    "imported torch GRU's from 6.96-7.75 to 3.72-5.19",
    STREAM_AB,
    *("4.55", "5.33", "1.19", "1.68", "4.65", "4.97", "1.90", "2.74", "6.96", "7.75", "3.72", "5.19"),
)
figure(
    CHANGELOG,
    "costs 1.2-1.8 µs more than the plain stack call, down from 4.55-5.33 µs",
    STREAM_AB,
    *("1.2", "1.8", "4.55", "5.33"),
)
figure(TUNING, "which looks the plan up at each chunk, 1.60-1.76 for the stack's stream", STREAM_AB, "1.60", "1.76")

STACKS_PAIR_TAKE = Z4 + "stacks_results_pair_take.md"
figure(
    CHANGELOG,
    "takes 0.65x ONNX Runtime's in float32 and 0.42x with bfloat16 weights, 3 layers 0.64x and 0.43x",
    STACKS_PAIR_TAKE,
    *("0.65", "0.42", "0.64", "0.43"),
)
figure(CHANGELOG, "(0.74x and 0.49x, 0.68x and 0.52x", Z4 + "stacks_results_bf16.md", "0.74", "0.49", "0.68", "0.52")
figure(
    CHANGELOG,
    "the one-row cells took 0.899-0.900x their time, two one-row sequences of the pair road, whose processes are "
    "bimodal, 0.654x and 1.236x in one run and 1.013x and 0.990x over 8 pairs, and every other benchmark shape "
    "0.957-1.020x",
    AB_Z4 + "int8_tiles_pair_take_ab.md",
    *("0.899", "0.900", "0.654", "1.236", "1.013", "0.990", "0.957", "1.020"),
)

PAIR_MODES = Z4 + "pair_modes_results.md"
figure(TUNING, "took 516-565 µs or 813-869 µs", PAIR_MODES, "516", "565", "813", "869")
FRAME_TRACE = AB_Z4 + "frame_trace.md"
figure(TUNING, "a worker claimed the other's half in 0.0-0.4% of the items", FRAME_TRACE, "0.0", "0.4")
figure(
    TUNING,
    "linear_before_reset 1.177x (interval 0.809-1.345), the sequences of hidden size 128 to 512 1.009-1.035x",
    AB_Z4 + "split_item0_by_units_ab.md",
    *("1.177", "0.809", "1.345", "1.009", "1.035"),
)
