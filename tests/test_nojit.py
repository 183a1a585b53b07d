"""The kernels as pure Python (``NUMBA_DISABLE_JIT=1``: tox's ``nojit`` environment, for line
coverage of the kernels): the paths that run through jobs and C callbacks in compiled code (the
parallel, split and pair drivers) run too, an address standing for its Python function, and give
the serial path's bits. A subset of tests/test_kernel_paths.py, in a process of its own."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Rows of several blocks (the parallel driver), one row split in two phases and in one phase per
#: step (split and pair), and AUGRU's one row.
SELECTED = (
    "test_every_path_gives_the_same_bits[0-float32]",
    "test_every_path_gives_the_same_bits[5-float64]",
    "test_every_path_gives_the_same_bits[6-float32]",
    "test_augru_paths_give_the_same_bits[1]",
)


def test_every_kernel_path_runs_as_pure_python():
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore::RuntimeWarning"]
    command += [f"tests/test_kernel_paths.py::{test}" for test in SELECTED]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert f"{len(SELECTED)} passed" in done.stdout, done.stdout[-2000:]
