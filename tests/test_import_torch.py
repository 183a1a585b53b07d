"""fastgru.from_torch against torch.nn.GRU itself, and its state_dict path (which needs no torch).

The largest |fastgru - torch| is printed after the module. Tests that need torch skip without it.
"""

import numpy as np
import pytest
from conftest import make_lengths
from import_helpers import Deviations, uniform

import fastgru
from fastgru import FastGRUError

DEVIATIONS = Deviations("fastgru vs torch.nn.GRU")
deviation_summary = DEVIATIONS.fixture()

N, S, I, H = 3, 5, 4, 6


@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    return torch


def run_torch(torch, module, x, h0=None):
    with torch.no_grad():
        y, h = module(torch.from_numpy(x), None if h0 is None else torch.from_numpy(h0))
    return y.numpy(), h.numpy()


def state_dict_arrays(
    rng, *, num_layers=1, bidirectional=False, bias=True, input_size=I, hidden_size=H, dtype=np.float32
):
    """A GRU's state_dict as NumPy arrays, keys and shapes as torch.nn.GRU names them."""
    d = 2 if bidirectional else 1
    state = {}
    for k in range(num_layers):
        for sfx in ("", "_reverse")[:d]:
            inputs = input_size if k == 0 else d * hidden_size
            state[f"weight_ih_l{k}{sfx}"] = uniform(rng, (3 * hidden_size, inputs), 0.6, dtype)
            state[f"weight_hh_l{k}{sfx}"] = uniform(rng, (3 * hidden_size, hidden_size), 0.6, dtype)
            if bias:
                state[f"bias_ih_l{k}{sfx}"] = uniform(rng, (3 * hidden_size,), 0.5, dtype)
                state[f"bias_hh_l{k}{sfx}"] = uniform(rng, (3 * hidden_size,), 0.5, dtype)
    return state


@pytest.mark.parametrize("num_layers", [1, 2, 3])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_every_config_matches_torch(torch, num_layers, bidirectional, batch_first, bias):
    module = torch.nn.GRU(
        I, H, num_layers=num_layers, bidirectional=bidirectional, batch_first=batch_first, bias=bias
    ).eval()
    gru = fastgru.from_torch(module)
    d = 2 if bidirectional else 1
    assert (gru.num_layers, gru.bidirectional, gru.batch_first, gru.hidden_size, gru.input_size) == (
        num_layers,
        bidirectional,
        batch_first,
        H,
        I,
    )
    assert len(gru.layers) == num_layers and all(isinstance(op, fastgru.GRUSequence) for op in gru.layers)
    assert {op.spec.direction for op in gru.layers} == {"bidirectional" if bidirectional else "forward"}
    assert all(op.spec.linear_before_reset for op in gru.layers)
    rng = np.random.default_rng([num_layers, bidirectional, batch_first, bias])
    x = rng.standard_normal((N, S, I) if batch_first else (S, N, I)).astype(np.float32)
    h0 = rng.standard_normal((num_layers * d, N, H)).astype(np.float32)
    DEVIATIONS.check("torch float32", gru(x, h0), run_torch(torch, module, x, h0))
    DEVIATIONS.check("torch float32", gru(x), run_torch(torch, module, x))  # h0 zeros


@pytest.mark.parametrize("bidirectional", [False, True])
def test_unbatched_input_matches_torch(torch, bidirectional):
    module = torch.nn.GRU(I, H, num_layers=2, bidirectional=bidirectional).eval()
    gru = fastgru.from_torch(module)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((S, I)).astype(np.float32)
    h0 = rng.standard_normal((2 * (1 + bidirectional), H)).astype(np.float32)
    y, h = gru(x, h0)
    assert y.shape == (S, (1 + bidirectional) * H) and h.shape == (2 * (1 + bidirectional), H)
    DEVIATIONS.check("torch float32", (y, h), run_torch(torch, module, x, h0))
    y1, h1 = gru(x, h0, lengths=3)  # one length for the one sequence
    assert not gru.batch_first
    y3, h3 = gru(x[:, None], h0[:, None], lengths=[3])  # (seq_len, batch=1, input_size)
    np.testing.assert_array_equal(y1, y3[:, 0])
    np.testing.assert_array_equal(h1, h3[:, 0])


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_lengths_match_a_packed_sequence(torch, bidirectional, batch_first):
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    module = torch.nn.GRU(I, H, num_layers=2, bidirectional=bidirectional, batch_first=batch_first).eval()
    gru = fastgru.from_torch(module)
    rng = np.random.default_rng(2)
    n = 5
    lengths = make_lengths(rng, n, S, low=1)  # torch rejects a length of 0
    x = rng.standard_normal((n, S, I) if batch_first else (S, n, I)).astype(np.float32)
    h0 = rng.standard_normal((2 * (1 + bidirectional), n, H)).astype(np.float32)
    with torch.no_grad():
        packed = pack_padded_sequence(
            torch.from_numpy(x), torch.from_numpy(lengths), batch_first=batch_first, enforce_sorted=False
        )
        y, h = module(packed, torch.from_numpy(h0))
        y, _ = pad_packed_sequence(y, batch_first=batch_first, total_length=S)
    DEVIATIONS.check("torch float32", gru(x, h0, lengths=lengths), (y.numpy(), h.numpy()))


def test_a_length_of_zero_gives_zeros(torch):
    gru = fastgru.from_torch(torch.nn.GRU(I, H, num_layers=2, bidirectional=True))
    x = np.ones((S, 2, I), np.float32)
    y, h = gru(x, np.ones((4, 2, H), np.float32), lengths=[0, S])
    assert not y[:, 0].any() and not h[:, 0].any()
    assert y[:, 1].all()


def test_float64_module_and_dtype_override(torch):
    module = torch.nn.GRU(I, H, num_layers=2, bidirectional=True).double().eval()
    gru = fastgru.from_torch(module)
    assert gru.dtype == np.float64
    x = np.random.default_rng(3).standard_normal((S, N, I))
    DEVIATIONS.check("torch float64", gru(x), run_torch(torch, module, x))
    as32 = fastgru.from_torch(module, dtype=np.float32)
    assert as32.dtype == np.float32 and as32.layers[1].dtype == np.float32
    x32 = x.astype(np.float32)
    DEVIATIONS.check("torch float32", as32(x32), run_torch(torch, module.float(), x32))


def test_tensors_in_and_a_module_holding_a_gru(torch):
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Linear(2, I)
            self.encoder = torch.nn.GRU(I, H, batch_first=True)

    model = Model()
    gru = fastgru.from_torch(model)
    x = torch.randn(N, S, I)
    y, h = gru(x, torch.zeros(1, N, H))  # tensors are accepted as inputs too
    DEVIATIONS.check("torch float32", (y, h), run_torch(torch, model.encoder, x.numpy()))
    with pytest.raises(FastGRUError, match=r"batch_first=False but the module has batch_first=True"):
        fastgru.from_torch(model, batch_first=False)


def test_state_dict_of_tensors_equals_the_module(torch):
    module = torch.nn.GRU(I, H, num_layers=2, bidirectional=True, batch_first=True).eval()
    from_module = fastgru.from_torch(module)
    from_state = fastgru.from_torch(module.state_dict(), batch_first=True)
    x = np.random.default_rng(4).standard_normal((N, S, I)).astype(np.float32)
    for got, want in zip(from_state(x), from_module(x), strict=True):
        np.testing.assert_array_equal(got, want)


def test_state_dict_of_arrays_is_loaded_into_torch(torch):
    """The state_dict path with NumPy arrays (no torch needed for it) equals torch given those weights."""
    rng = np.random.default_rng(5)
    state = state_dict_arrays(rng, num_layers=3, bidirectional=True)
    gru = fastgru.from_torch(state)
    assert (gru.num_layers, gru.bidirectional, gru.batch_first) == (3, True, False)
    module = torch.nn.GRU(I, H, num_layers=3, bidirectional=True).eval()
    module.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    x = rng.standard_normal((S, N, I)).astype(np.float32)
    DEVIATIONS.check("torch float32", gru(x), run_torch(torch, module, x))


# ------------------------------------------------------------------------- no torch needed from here


@pytest.mark.parametrize("bias", [True, False])
def test_state_dict_of_arrays_builds_the_openvino_weights(bias):
    """B = [b_iz + b_hz, b_ir + b_hr, b_in, b_hn] and rows r, z, n -> z, r, h, checked on one layer."""
    rng = np.random.default_rng(6)
    state = state_dict_arrays(rng, bias=bias)
    gru = fastgru.from_torch(state)
    Wt, Rt = state["weight_ih_l0"], state["weight_hh_l0"]
    W = np.concatenate([Wt[H : 2 * H], Wt[:H], Wt[2 * H :]])[None]
    R = np.concatenate([Rt[H : 2 * H], Rt[:H], Rt[2 * H :]])[None]
    if bias:
        bi, bh = state["bias_ih_l0"], state["bias_hh_l0"]
        B = np.concatenate([bi[H : 2 * H] + bh[H : 2 * H], bi[:H] + bh[:H], bi[2 * H :], bh[2 * H :]])[None]
    else:
        B = np.zeros((1, 4 * H), np.float32)
    op = fastgru.GRUSequence(W, R, B, linear_before_reset=True)
    x = rng.standard_normal((S, N, I)).astype(np.float32)
    h0 = rng.standard_normal((1, N, H)).astype(np.float32)
    y, h = gru(x, h0)
    Y, Ho = op(x.transpose(1, 0, 2), h0.transpose(1, 0, 2), np.full(N, S))
    np.testing.assert_array_equal(y, Y[:, 0].transpose(1, 0, 2))
    np.testing.assert_array_equal(h, Ho.transpose(1, 0, 2))
    assert repr(gru) == (
        "TorchGRU(input_size=4, hidden_size=6, num_layers=1, bidirectional=False, batch_first=False, dtype=float32)"
    )


def test_state_dict_dtypes():
    rng = np.random.default_rng(7)
    state = state_dict_arrays(rng, dtype=np.float64)
    assert fastgru.from_torch(state).dtype == np.float64
    assert fastgru.from_torch(state, dtype=np.float16).layers[0].dtype == np.float16
    state["bias_hh_l0"] = state["bias_hh_l0"].astype(np.float32)
    with pytest.raises(
        TypeError,
        match=r"from_torch: bias_hh_l0 is float32 but weight_ih_l0 is float64; the "
        r"weights must share one dtype \(or pass dtype=\)",
    ):
        fastgru.from_torch(state)
    state = {k: (v * 10).astype(np.int64) for k, v in state.items()}
    with pytest.raises(TypeError, match=r"from_torch: layer 0: GRUSequence: W is int64; expected float16"):
        fastgru.from_torch(state)


def without(state, key):
    return {k: v for k, v in state.items() if k != key}


@pytest.mark.parametrize(
    "change, message",
    [
        (
            lambda s: dict(s, weight_hr_l0=np.zeros((6, 3))),
            r"state_dict key 'weight_hr_l0' is not a GRU parameter \(an LSTM's projection, proj_size: torch.nn.GRU has "
            r"none\)",
        ),
        (
            lambda s: dict(s, running_mean=np.zeros(3)),
            r"state_dict key 'running_mean' is not a GRU parameter; expected weight_ih_l",
        ),
        (
            lambda s: {"rnn." + k: v for k, v in s.items()},
            r"state_dict key 'rnn.weight_ih_l0' is not a GRU parameter; expected .*\. For a GRU inside a larger model, "
            r"keep its entries without the prefix: \{k.removeprefix\('rnn.'\): v for k, v in state.items\(\) if "
            r"k.startswith\('rnn.'\)\}$",
        ),
        (lambda s: {}, r"the state_dict is empty"),
        (
            lambda s: without(s, "bias_hh_l1_reverse"),
            r"state_dict has no bias_hh_l1_reverse \(num_layers=2 from 'weight_ih_l1', bidirectional=True, bias=True\)",
        ),
        (lambda s: without(s, "weight_ih_l0_reverse"), r"state_dict has no weight_ih_l0_reverse"),
        (
            lambda s: dict(s, weight_hh_l1=np.zeros((18, 5), np.float32)),
            r"weight_hh_l1 has shape \(18, 5\); expected \(3\*hidden_size=18, hidden_size=6\), "
            r"hidden_size from weight_hh_l0",
        ),
        (
            lambda s: dict(s, weight_ih_l1=np.zeros((18, 6), np.float32)),
            r"weight_ih_l1 has shape \(18, 6\); expected \(3\*hidden_size=18, num_directions\*hidden_size=12\)",
        ),
        (
            lambda s: dict(s, weight_ih_l0_reverse=np.zeros((18, 5), np.float32)),
            r"weight_ih_l0_reverse has shape \(18, 5\); expected \(3\*hidden_size=18, input_size=4\)",
        ),
        (
            lambda s: dict(s, bias_ih_l0=np.zeros((24,), np.float32)),
            r"bias_ih_l0 has shape \(24,\); expected \(3\*hidden_size=18,\), hidden_size from weight_hh_l0 \(an LSTM's "
            r"weights have 4\*hidden_size rows\)",
        ),
        (
            lambda s: dict(s, weight_hh_l0=np.zeros((24, 6), np.float32)),
            r"weight_hh_l0 has shape \(24, 6\); expected \(3\*hidden_size, hidden_size\) with hidden_size > 0 "
            r"\(an LSTM's",
        ),
        (lambda s: dict(s, weight_hh_l0=np.zeros(18, np.float32)), r"weight_hh_l0 has shape \(18,\); expected"),
    ],
)
def test_state_dict_errors_name_the_key(change, message):
    state = change(state_dict_arrays(np.random.default_rng(8), num_layers=2, bidirectional=True))
    with pytest.raises(FastGRUError, match=f"^from_torch: {message}"):
        fastgru.from_torch(state)


def test_call_errors():
    gru = fastgru.from_torch(state_dict_arrays(np.random.default_rng(9), num_layers=2, bidirectional=True))
    with pytest.raises(
        FastGRUError,
        match=r"TorchGRU: input has rank 1 \(shape \(4,\)\); expected \(seq_len, batch, "
        r"input_size=4\), or \(seq_len, input_size\) unbatched",
    ):
        gru(np.zeros(4, np.float32))
    x = np.zeros((S, N, I), np.float32)
    with pytest.raises(
        FastGRUError,
        match=r"TorchGRU: h0 has shape \(2, 3, 6\); expected \(num_layers\*num_directions"
        r", batch, hidden_size\) = \(4, 3, 6\)",
    ):
        gru(x, np.zeros((2, N, H), np.float32))
    with pytest.raises(
        FastGRUError,
        match=r"TorchGRU: h0 has shape \(4, 3, 6\); expected \(num_layers\*num_directions"
        r", hidden_size\) = \(4, 6\)",
    ):
        gru(x[:, 0], np.zeros((4, N, H), np.float32))
    with pytest.raises(
        FastGRUError,
        match=r"GRUSequence: X has shape \(3, 5, 5\); expected \(batch_size=3, "
        r"seq_length=5, input_size=4\)",
    ):
        gru(np.zeros((S, N, 5), np.float32))
    with pytest.raises(FastGRUError, match=r"GRUSequence: sequence_lengths\[1\] is 6; expected 0 <= sequence_lengths"):
        gru(x, lengths=[1, 6, 2])
    with pytest.raises(TypeError, match=r"GRUSequence: X is float64 but the op's W is float32"):
        gru(x.astype(np.float64))


def test_not_a_gru(torch):
    with pytest.raises(TypeError, match=r"from_torch: got list; expected a torch.nn.GRU, a module holding one, or"):
        fastgru.from_torch([1, 2])
    with pytest.raises(FastGRUError, match=r"from_torch: LSTM is not a torch.nn.GRU and holds none"):
        fastgru.from_torch(torch.nn.LSTM(I, H))
    two = torch.nn.Sequential(torch.nn.GRU(I, H), torch.nn.GRU(H, H))
    with pytest.raises(
        FastGRUError,
        match=r"from_torch: Sequential holds 2 torch.nn.GRU modules \(0, 1\); pass the "
        r"one to convert, e.g. model.0",
    ):
        fastgru.from_torch(two)


@pytest.mark.parametrize("weight_dtype", ["bfloat16", "int8"])
def test_from_torch_with_compact_weights(torch, weight_dtype):
    module = torch.nn.GRU(I, H, num_layers=2, bidirectional=True).eval()
    gru = fastgru.from_torch(module, weight_dtype=weight_dtype)
    assert {layer.weight_dtype for layer in gru.layers} == {weight_dtype}
    x = np.random.default_rng(4).standard_normal((S, N, I)).astype(np.float32)
    with torch.no_grad():
        want = module(torch.from_numpy(x))
    exact = fastgru.from_torch(module)(x)
    for g, w, e in zip(gru(x), want, exact, strict=True):
        np.testing.assert_allclose(g, w.numpy(), atol=3e-2)
        assert not np.array_equal(g, e)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("n", [1, 3, None], ids=["batch1", "batch3", "unbatched"])
def test_a_stream_fed_chunk_by_chunk_gives_the_bits_of_one_call(batch_first, n):
    rng = np.random.default_rng(7)
    gru = fastgru.from_torch(state_dict_arrays(rng, num_layers=2), batch_first=batch_first)
    rows = 1 if n is None else n
    x = rng.standard_normal((rows, 9, I) if batch_first else (9, rows, I)).astype(np.float32)
    h0 = rng.standard_normal((2, rows, H)).astype(np.float32)
    lengths = np.array([9, 4, 0][:rows]) if n == 3 else None
    if n is None:
        x, h0 = x[0] if batch_first else x[:, 0], h0[:, 0]
    want, h_n = gru(x, h0, lengths=lengths)
    stream = gru.stream(h0, lengths=lengths)
    t = 1 if batch_first and n is not None else 0  # the time axis
    parts = [stream(np.take(x, range(a, b), axis=t)) for a, b in ((0, 2), (2, 3), (3, 9))]
    np.testing.assert_array_equal(np.concatenate(parts, axis=t), want)
    np.testing.assert_array_equal(stream.h_n, h_n)
    assert stream.steps == 9


@pytest.mark.parametrize("batch_first", [False, True])
def test_a_stream_writes_into_out(batch_first):
    rng = np.random.default_rng(8)
    gru = fastgru.from_torch(state_dict_arrays(rng, num_layers=2), batch_first=batch_first)
    x = rng.standard_normal((3, 4, I) if batch_first else (4, 3, I)).astype(np.float32)
    want, h_n = gru(x)
    stream = gru.stream()
    for t in range(4):
        frame = np.ascontiguousarray(x[:, t : t + 1] if batch_first else x[t : t + 1])
        out = np.full(frame.shape[:-1] + (H,), np.nan, np.float32)
        assert stream(frame, out=out) is out
        np.testing.assert_array_equal(out, want[:, t : t + 1] if batch_first else want[t : t + 1])
    np.testing.assert_array_equal(stream.h_n, h_n)
    with pytest.raises(FastGRUError, match=r"TorchGRU stream: out has shape \(1, 1, 5\); expected"):
        stream(frame, out=np.empty((1, 1, 5), np.float32))


def test_a_stream_refuses_what_it_cannot_stream():
    rng = np.random.default_rng(9)
    with pytest.raises(FastGRUError, match="TorchGRU.stream: the GRU is bidirectional"):
        fastgru.from_torch(state_dict_arrays(rng, bidirectional=True)).stream()
    stream = fastgru.from_torch(state_dict_arrays(rng)).stream()
    with pytest.raises(FastGRUError, match="TorchGRU stream: no chunk fed yet, and no h0"):
        _ = stream.h_n
    stream(np.zeros((2, 3, I), np.float32))
    with pytest.raises(FastGRUError, match="TorchGRU stream: input has rank 2; expected 3"):
        stream(np.zeros((2, I), np.float32))
