"""from_onnx of a graph whose GRU nodes feed each other: the nodes as one :class:`fastgru.GRUStack`.

An exporter writes a stack of GRUs as GRU nodes joined by nodes that only move data: the Y of a
node (layout 0: (S, D, N, H)) squeezed, or transposed and reshaped, into the next node's X
(S, N, D·H), both directions of a step side by side, forward first (torch's export of a
multi-layer nn.GRU writes ``Squeeze`` for one direction, ``Transpose`` + ``Reshape`` for two). A
stack computes exactly that, so the join must be exactly that: each join is checked by running
its nodes (Squeeze, Unsqueeze, Transpose, Reshape, Flatten, Identity) on an array of distinct
indices of Y's shape and comparing the result with the next node's X as a stack makes it. A join
that moves data any other way, or does anything else, is not a stack: from_onnx then asks for a
node_name, as for unrelated GRU nodes.
"""

import numpy as np

from ._import_common import joins_as_a_stack
from ._stack import GRUStack
from ._validate import FastGRUError, check_out_array

#: The nodes a join may have: they move data and compute nothing.
_MOVES = ("Squeeze", "Unsqueeze", "Transpose", "Reshape", "Flatten", "Identity")


class OnnxGRUStack:
    """Chained ONNX GRU nodes on one :class:`fastgru.GRUStack`:
    ``Y, Y_h = stack(X, sequence_lens=None, initial_h=None)``.

    Made by :func:`fastgru.from_onnx` for a graph whose GRU nodes feed each other (see
    ``nodes``). X is the first node's input and Y the last node's output, in their nodes' layouts
    (as :class:`OnnxGRU` has them); ``initial_h`` is None (each node's constant, else zeros) or a
    list of one initial_h per node (None for that node's default), and ``Y_h`` is the list of the
    nodes' Y_h, in their layouts. ``sequence_lens`` applies to every node: the nodes of a stack
    share theirs (one input, or none).

    Attributes
    ----------
    nodes : list of OnnxGRU
        The GRU nodes in the order they run.
    stack : fastgru.GRUStack
        Their prepared ops as one stack.
    """

    def __init__(self, nodes, sequence_lens=None):
        self.nodes = nodes
        self.stack = GRUStack([node.op for node in nodes])
        self._sequence_lens = sequence_lens

    def __call__(self, X, sequence_lens=None, initial_h=None):
        first, last = self.nodes[0], self.nodes[-1]
        x = first._batch_major(X, "OnnxGRUStack", f"the first node's layout={first.layout}")
        if sequence_lens is None:
            sequence_lens = self._sequence_lens
        Y, Ho = self.stack(x, self._states(initial_h, x.shape[0]), sequence_lens)  # (N, D, S, H), (N, state_size)
        Y = Y.transpose(2, 1, 0, 3) if last.layout == 0 else Y.transpose(0, 2, 1, 3)
        return np.ascontiguousarray(Y), self._y_h(Ho)

    def stream(self, sequence_lens=None, initial_h=None):
        """An :class:`OnnxStream`: the nodes (all forward) fed a long sequence chunk by chunk, their
        states carried between chunks; ``sequence_lens`` and ``initial_h`` as the call takes them,
        for the whole sequence."""
        return OnnxStream(self, sequence_lens, initial_h)

    def _states(self, initial_h, n):
        """The stack's initial states (N, state_size) from ``initial_h`` (a list, one per node)."""
        if initial_h is not None and (not isinstance(initial_h, (list, tuple)) or len(initial_h) != len(self.nodes)):
            raise FastGRUError(
                f"OnnxGRUStack: initial_h is {type(initial_h).__name__}; expected None or a list of "
                f"{len(self.nodes)} initial_h, one per GRU node (None for a node's default)"
            )
        states = []
        for k, node in enumerate(self.nodes):
            given = None if initial_h is None else initial_h[k]
            states.append(node._state(given, n).reshape(n, -1))  # (N, D·H)
        return np.concatenate(states, axis=1)

    def _stream_of(self, n, sequence_lens, initial_h):
        lengths = self._sequence_lens if sequence_lens is None else sequence_lens
        return self.stack.stream(self._states(initial_h, n), lengths)

    def _y_h(self, Ho):
        """The list of the nodes' Y_h, in their layouts, of the stack's states (N, state_size)."""
        Y_h = []
        for node, state in zip(self.nodes, self.stack.states(Ho)):  # (N, D, H) each
            Y_h.append(np.ascontiguousarray(state.transpose(1, 0, 2)) if node.layout == 0 else state.copy())
        return Y_h

    def __repr__(self):
        names = ", ".join(repr(node.node_name) for node in self.nodes)
        return f"OnnxGRUStack(nodes=[{names}], {self.stack!r})"


class OnnxStream:
    """A forward :class:`OnnxGRU` or :class:`OnnxGRUStack` fed one chunk of steps at a time, its
    state carried: ``stream = gru.stream(sequence_lens, initial_h)``, then ``Y = stream(X)`` for each
    chunk X (the first node's layout; Y in the last node's); ``stream.Y_h`` is what the call returns
    as Y_h, after the chunks fed so far. The chunks' Y, concatenated along the time axis (axis 0 in
    layout 0, 1 in layout 1), and the last Y_h are the bits one call on the whole sequence gives
    (a row whose length has run out keeps its state).

    ``stream(X, out=Y)`` writes the chunk's Y into ``Y`` (its shape, the dtype, C-contiguous and
    writeable) and returns it. In layout 1, or at one row, with X a C-contiguous array of the dtype,
    a chunk allocates no array."""

    def __init__(self, owner, sequence_lens, initial_h):
        nodes = owner.nodes if isinstance(owner, OnnxGRUStack) else [owner]
        for node in nodes:
            if node.direction != "forward":
                raise FastGRUError(
                    f"{type(owner).__name__}.stream: node {node.node_name!r} has direction {node.direction!r}; "
                    "only 'forward' nodes can be streamed (a reverse pass starts at the last step): call it on "
                    "the whole sequence"
                )
        self._owner, self._first, self._last = owner, nodes[0], nodes[-1]
        self._lens, self._initial_h = sequence_lens, initial_h
        self._stream = None  # made at the first chunk, which gives N

    @property
    def steps(self) -> int:
        """The steps fed so far."""
        return 0 if self._stream is None else self._stream.steps

    @property
    def Y_h(self):
        """The state after the chunks fed so far, as the call returns Y_h."""
        if self._stream is None:
            raise FastGRUError(f"{type(self._owner).__name__} stream: no chunk fed yet")
        return self._owner._y_h(self._stream.Ho)

    def __call__(self, X, *, out=None):
        where = f"{type(self._owner).__name__} stream"
        x = self._first._batch_major(X, where, f"the first node's layout={self._first.layout}")  # (N, S, I)
        n, s = x.shape[0], x.shape[1]
        if self._stream is None:
            self._stream = self._owner._stream_of(n, self._lens, self._initial_h)
        last, hidden = self._last, self._last.hidden_size
        if out is not None:
            check_out_array(where, out, (s, 1, n, hidden) if last.layout == 0 else (n, s, 1, hidden), last.dtype)
            if last.layout == 1 or n == 1:  # the same order as the kernels' (N, 1, S, H): they write out
                self._stream(x, out=out.reshape(n, 1, s, hidden))
                return out
        y = self._stream(x)
        Y = y.transpose(2, 1, 0, 3) if last.layout == 0 else y.transpose(0, 2, 1, 3)
        if out is None:
            return np.ascontiguousarray(Y)
        np.copyto(out, Y)
        return out


def chain(graph, grus):
    """(the GRU nodes in the order they feed each other, the join between each two) if ``grus``
    form one chain, each node's X made of the previous node's Y by nodes of ``_MOVES``; else None."""
    producers = {out: node for node in graph.node for out in node.output if out}
    before = {}  # id of a node -> (the GRU node whose Y feeds it, the join's nodes in order)
    for node in grus:
        name, join = node.input[0], []
        while name in producers and producers[name].op_type in _MOVES:
            join.append(producers[name])
            name = producers[name].input[0]
        source = producers.get(name)
        if source is not None and source.op_type == "GRU" and source.output[0] == name:
            before[id(node)] = source, join[::-1]
    after = {id(source): node for node in grus if id(node) in before for source in before[id(node)][:1]}
    starts = [node for node in grus if id(node) not in before]
    if len(starts) != 1 or len(after) != len(before):
        return None
    order = [starts[0]]
    while id(order[-1]) in after and len(order) <= len(grus):
        order.append(after[id(order[-1])])
    if len(order) != len(grus):
        return None
    return order, [before[id(node)][1] for node in order[1:]]


def check_joins(nodes, joins, constants, to_array):
    """Whether each join turns its node's Y into the next node's X as a stack does."""
    for node, after, join in zip(nodes, nodes[1:], joins):

        def run(y, join=join):
            for move in join:
                y = _move(move, y, constants, to_array)
            return y

        y_axes = "SDNH" if node.layout == 0 else "NSDH"
        if not joins_as_a_stack(y_axes, node.op.spec.num_directions, node.hidden_size, after.layout == 0, run):
            return False
    return True


def _move(node, x, constants, to_array):
    """What an ONNX node of ``_MOVES`` does to x (its other inputs must be constants)."""
    attrs = {a.name: a for a in node.attribute}
    kind = node.op_type
    if kind == "Identity":
        return x
    if kind == "Transpose":
        perm = list(attrs["perm"].ints) if "perm" in attrs else None
        return x.transpose(perm)
    if kind == "Flatten":
        axis = attrs["axis"].i if "axis" in attrs else 1
        axis = axis % x.ndim if x.ndim else 0
        return x.reshape(int(np.prod(x.shape[:axis])), -1)
    if kind in ("Squeeze", "Unsqueeze"):
        if len(node.input) > 1 and node.input[1]:
            axes = [int(a) for a in to_array(constants[node.input[1]]).reshape(-1)]
        elif "axes" in attrs:
            axes = list(attrs["axes"].ints)
        elif kind == "Squeeze":
            axes = [a for a, size in enumerate(x.shape) if size == 1]
        else:
            raise ValueError("Unsqueeze without axes")
        if kind == "Squeeze":
            return np.squeeze(x, axis=tuple(a % x.ndim for a in axes))
        return np.expand_dims(x, axis=tuple(a % (x.ndim + len(axes)) for a in axes))
    shape = [int(a) for a in to_array(constants[node.input[1]]).reshape(-1)]  # Reshape
    allowzero = attrs["allowzero"].i if "allowzero" in attrs else 0
    if not allowzero:
        shape = [x.shape[k] if size == 0 else size for k, size in enumerate(shape)]
    return x.reshape(shape)


def not_a_stack(grus, label):
    """The error of several GRU nodes that are not one stack."""
    return FastGRUError(
        f"from_onnx: the graph has {len(grus)} GRU nodes: {'; '.join(map(label, grus))}; they do not "
        "form one stack (each node's X the previous node's Y, its directions side by side, through "
        "Squeeze, Transpose or Reshape nodes only, all nodes with the same sequence_lens): pass "
        "node_name= (a node or output name)"
    )
