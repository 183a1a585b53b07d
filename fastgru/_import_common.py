"""What the importers (_import_torch, _import_onnx, _import_openvino) share: errors that say which
layer or node of the model they are about, arrays from framework tensors, fastgru's B from a
model's two bias vectors, and the check that GRUs of a graph are joined as a stack."""

import contextlib

import numpy as np

from ._validate import FastGRUError

_ERRORS = (FastGRUError, TypeError, NotImplementedError)


@contextlib.contextmanager
def about(prefix):
    """Re-raise the errors of the prepared ops (FastGRUError, TypeError, NotImplementedError) with
    ``prefix`` in front, e.g. "from_onnx: GRU node 'gru'", so that the message says which part of
    the model it is about; the original error is chained."""
    try:
        yield
    except _ERRORS as error:
        raise type(error)(f"{prefix}: {error}") from error


def to_numpy(value):
    """A NumPy array of ``value``: an array-like, or a torch tensor (detached, on the CPU) without
    importing torch. bfloat16 tensors become ``ml_dtypes.bfloat16`` arrays (TypeError without it)."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor
        value = value.detach().cpu()
        if str(value.dtype) == "torch.bfloat16":
            try:
                import ml_dtypes
            except ImportError:
                raise TypeError(
                    "a bfloat16 tensor needs ml_dtypes (pip install ml_dtypes); or convert "
                    "the tensors with .float() first"
                ) from None
            return value.float().numpy().astype(ml_dtypes.bfloat16)
        return value.numpy()
    return np.asarray(value)


def fused_bias(wb, rb, linear_before_reset, dtype=None):
    """fastgru's B from the input and recurrent biases ``wb`` and ``rb`` (..., 3*hidden_size), gate
    rows z, r, h: [Wbz+Rbz, Wbr+Rbr, Wbh, Rbh] with ``linear_before_reset``, else Wb+Rb
    (docs/semantics.md, "The gates").

    With ``dtype``, the sums are taken in float64 (exact for float16, bfloat16 and float32 biases)
    and rounded to ``dtype`` once, as W and R are: the addends are not rounded first."""
    if dtype is not None:
        wb, rb = wb.astype(np.float64), rb.astype(np.float64)
    if linear_before_reset:
        two = 2 * (wb.shape[-1] // 3)
        fused = np.concatenate([wb[..., :two] + rb[..., :two], wb[..., two:], rb[..., two:]], axis=-1)
    else:
        fused = wb + rb
    return fused if dtype is None else fused.astype(dtype, copy=False)


#: Sizes of the index array a join is run on (``joins_as_a_stack``): small, and unlike each other.
_JOIN_STEPS, _JOIN_ROWS = 3, 5


def joins_as_a_stack(y_axes, d, h, time_major, run, steps=None, rows=None):
    """Whether ``run``, the nodes between two GRUs of a graph (layers that only move data: reshape,
    transpose, squeeze), makes the next GRU's X from the previous one's Y as a stack does: its
    directions side by side, (N, S, D·H), or (S, N, D·H) when ``time_major``. ``y_axes`` names the
    axes of Y in order (ONNX layout 0: "SDNH"; OpenVINO: "NDSH"); ``run`` is tried on an array of
    distinct indices of that shape, so that the check is of where every element goes. ``steps`` and
    ``rows``: the graph's S and N when it fixes them (a join may then name them), else small ones.
    """
    steps, rows = steps or _JOIN_STEPS, rows or _JOIN_ROWS
    sizes = {"S": steps, "N": rows, "D": d, "H": h}
    y = np.arange(int(np.prod([sizes[a] for a in y_axes]))).reshape([sizes[a] for a in y_axes])
    try:
        x = run(y)
    except (ValueError, KeyError, IndexError, TypeError):  # a move these sizes cannot take
        return False
    stacked = y.transpose([y_axes.index(a) for a in "NSDH"]).reshape(rows, steps, d * h)
    if time_major:
        stacked = stacked.transpose(1, 0, 2)
    return x.shape == stacked.shape and np.array_equal(x, stacked)
