"""A runnable tour of fastgru's main job: ``python -m fastgru.demo``.

Runs a bidirectional GRUSequence-5 over a ragged batch, shows the masking and the direction
layout of the outputs, then times warm calls. The first call includes Numba's compilation
(seconds, once per machine: later processes load it from Numba's on-disk cache).
"""

import time

import numpy as np

import fastgru


def main():
    rng = np.random.default_rng(0)
    batch, seq_length, input_size, hidden_size = 4, 10, 16, 32
    scale = 1 / np.sqrt(hidden_size)
    X = rng.standard_normal((batch, seq_length, input_size), dtype=np.float32)
    H0 = np.zeros((batch, 2, hidden_size), dtype=np.float32)
    lengths = np.array([10, 7, 3, 0])
    W = rng.uniform(-scale, scale, (2, 3 * hidden_size, input_size)).astype(np.float32)
    R = rng.uniform(-scale, scale, (2, 3 * hidden_size, hidden_size)).astype(np.float32)
    B = rng.uniform(-scale, scale, (2, 3 * hidden_size)).astype(np.float32)

    start = time.perf_counter()
    Y, Ho = fastgru.gru_sequence(X, H0, lengths, W, R, B, direction="bidirectional")
    first = time.perf_counter() - start
    print(f"fastgru {fastgru.__version__}: gru_sequence, bidirectional, X {X.shape} -> Y {Y.shape}, Ho {Ho.shape}")
    print(
        f"sequence_lengths {lengths.tolist()}: steps computed per row "
        f"{[int(np.any(Y[b, 0] != 0, axis=-1).sum()) for b in range(batch)]}; row 3 (length 0) has Ho = 0: "
        f"{bool(np.all(Ho[3] == 0))}"
    )
    print(
        f"forward Ho equals Y at each row's last step: {bool(np.allclose(Ho[1, 0], Y[1, 0, 6]))}; "
        f"reverse Ho equals Y at step 0: {bool(np.allclose(Ho[1, 1], Y[1, 1, 0]))}"
    )

    times = []
    for _ in range(200):
        start = time.perf_counter()
        fastgru.gru_sequence(X, H0, lengths, W, R, B, direction="bidirectional")
        times.append(time.perf_counter() - start)
    print(
        f"first call {first * 1e3:.0f} ms (includes compilation when not cached); "
        f"warm call median {np.median(times) * 1e6:.0f} µs"
    )


if __name__ == "__main__":
    main()
