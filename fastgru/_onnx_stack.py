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
from ._validate import FastGRUError

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
        n = x.shape[0]
        if initial_h is not None and (not isinstance(initial_h, (list, tuple)) or len(initial_h) != len(self.nodes)):
            raise FastGRUError(
                f"OnnxGRUStack: initial_h is {type(initial_h).__name__}; expected None or a list of "
                f"{len(self.nodes)} initial_h, one per GRU node (None for a node's default)"
            )
        states = []
        for k, node in enumerate(self.nodes):
            given = None if initial_h is None else initial_h[k]
            states.append(node._state(given, n).reshape(n, -1))  # (N, D·H)
        if sequence_lens is None:
            sequence_lens = self._sequence_lens
        Y, Ho = self.stack(x, np.concatenate(states, axis=1), sequence_lens)  # (N, D, S, H), (N, state_size)
        Y = Y.transpose(2, 1, 0, 3) if last.layout == 0 else Y.transpose(0, 2, 1, 3)
        Y_h = []
        for node, state in zip(self.nodes, self.stack.states(Ho)):  # (N, D, H) each
            Y_h.append(np.ascontiguousarray(state.transpose(1, 0, 2)) if node.layout == 0 else state.copy())
        return np.ascontiguousarray(Y), Y_h

    def __repr__(self):
        names = ", ".join(repr(node.node_name) for node in self.nodes)
        return f"OnnxGRUStack(nodes=[{names}], {self.stack!r})"


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
