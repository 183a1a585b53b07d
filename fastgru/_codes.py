"""Names that the validation layer and the kernels share: attribute values as the integers the
kernels take."""

#: Gate activations, by their specification names (lower case).
RELU, SIGMOID, TANH = 0, 1, 2
ACTIVATIONS = {"relu": RELU, "sigmoid": SIGMOID, "tanh": TANH}

#: Directions: bit d of ``REVERSED[direction]`` says whether direction index d runs t = L-1, ..., 0.
NUM_DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}
REVERSED = {"forward": 0, "reverse": 1, "bidirectional": 2}
