"""docs/semantics.md is a promise too: its example error messages are fastgru's own."""

import re
from pathlib import Path

import numpy as np
import pytest

import fastgru

DOC = (Path(__file__).resolve().parent.parent / "docs" / "semantics.md").read_text()
MESSAGES = re.search(r"## Errors\n.*?```\n(.*?)```", DOC, flags=re.S).group(1).strip().splitlines()


def _call(case):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2, 3, 32)).astype(np.float32)
    H0 = np.zeros((2, 1, 32), np.float32)
    W = np.zeros((1, 96, 32), np.float32)
    R = np.zeros((1, 96, 32), np.float32)
    B = np.zeros((1, 96), np.float32)
    lengths = [3, 3]
    if case == "W":
        W = np.zeros((1, 96, 16), np.float32)
    elif case == "X":
        X = X.astype(np.int64)
    else:
        lengths = [4, 3]
    fastgru.gru_sequence(X, H0, lengths, W, R, B)


@pytest.mark.parametrize(
    "case, error", [("W", fastgru.FastGRUError), ("X", TypeError), ("sequence_lengths", fastgru.FastGRUError)]
)
def test_the_example_messages_are_fastgrus(case, error):
    expected = [m.strip() for m in MESSAGES if re.match(rf"gru_sequence: {case}[ \[]", m.strip())]
    assert len(expected) == 1, MESSAGES
    with pytest.raises(error) as raised:
        _call(case)
    assert str(raised.value) == expected[0]
