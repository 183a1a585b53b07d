"""fastgru: Numba-compiled CPU kernels for OpenVINO's GRUCell-3, GRUSequence-5 and AUGRUSequence-10."""

from . import benchmark, reference
from ._api import augru_sequence, gru_cell, gru_sequence
from ._import_onnx import OnnxGRU, from_onnx
from ._import_openvino import from_openvino
from ._import_torch import TorchGRU, TorchStream, from_torch
from ._onnx_stack import OnnxGRUStack, OnnxStream
from ._ops import AUGRUSequence, GRUCell, GRUSequence, Stream
from ._pool import StatePool
from ._stack import GRUStack, StackStream
from ._threading import get_num_threads, set_num_threads, threads
from ._validate import FastGRUError
from ._warmup import warmup

__version__ = "0.2.0"

__all__ = [
    "AUGRUSequence",
    "FastGRUError",
    "GRUCell",
    "GRUSequence",
    "GRUStack",
    "OnnxGRU",
    "OnnxGRUStack",
    "OnnxStream",
    "StackStream",
    "StatePool",
    "Stream",
    "TorchGRU",
    "TorchStream",
    "__version__",
    "augru_sequence",
    "benchmark",
    "from_onnx",
    "from_openvino",
    "from_torch",
    "get_num_threads",
    "gru_cell",
    "gru_sequence",
    "reference",
    "set_num_threads",
    "threads",
    "warmup",
]
