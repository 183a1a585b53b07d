"""fastgru: Numba-compiled CPU kernels for OpenVINO's GRUCell-3, GRUSequence-5 and AUGRUSequence-10."""

from ._api import augru_sequence, gru_cell, gru_sequence
from ._ops import AUGRUSequence, GRUCell, GRUSequence, Stream
from ._threading import get_num_threads, set_num_threads, threads
from ._validate import FastGRUError
from ._warmup import warmup

__version__ = "0.1.0"

__all__ = [
    "AUGRUSequence",
    "FastGRUError",
    "GRUCell",
    "GRUSequence",
    "Stream",
    "__version__",
    "augru_sequence",
    "get_num_threads",
    "gru_cell",
    "gru_sequence",
    "set_num_threads",
    "threads",
    "warmup",
]
