"""Docstring sections that several public functions share, written once: ``@shared_docs`` puts each
in place of its ``{name}`` in a docstring (indented by four spaces, numpydoc)."""

GATE_ATTRIBUTES = """activations : pair of str
        f for the z and r gates, g for the h gate, from 'relu', 'sigmoid', 'tanh'.
    activations_alpha, activations_beta : list of float
        Accepted for compatibility; these three activations take no parameters.
    clip : float
        Clamp gate pre-activations to [-clip, clip]; ``math.inf`` or 0 means no clipping.
    linear_before_reset : bool
        Apply the reset gate after the recurrent product of the h gate (ONNX's variant)."""

SEQUENCE_RAISES = """Raises
    ------
    FastGRUError
        (a ValueError) for a wrong shape, rank, dimension, attribute value or sequence length.
    TypeError
        For a dtype that is not T1 (or T2 for sequence_lengths), or T1 inputs of different dtypes."""

DASK_RAISES = """Raises
    ------
    FastGRUError
        When the graph is built, for a wrong shape, rank, attribute or a too-large batch chunk; on
        compute, for a sequence length outside [0, seq_length].
    TypeError
        When the graph is built, for a wrong dtype, or weights given as dask arrays."""


def shared_docs(func):
    """Fill the ``{GATE_ATTRIBUTES}``-style places of ``func``'s docstring with the sections above."""
    for name, text in (
        ("GATE_ATTRIBUTES", GATE_ATTRIBUTES),
        ("SEQUENCE_RAISES", SEQUENCE_RAISES),
        ("DASK_RAISES", DASK_RAISES),
    ):
        func.__doc__ = func.__doc__.replace("{" + name + "}", text)
    return func
