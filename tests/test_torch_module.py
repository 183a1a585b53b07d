"""fastgru.torch (optimize, GRU, GRUCell) against the torch modules they replace.

Results are compared with the original torch module within conftest.TOLERANCES; the largest
|fastgru - torch| is printed after the module. The whole module skips without torch.
"""

import copy
import io
import pickle
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from conftest import BFLOAT16, TOLERANCES, make_lengths
from import_helpers import Deviations

torch = pytest.importorskip("torch")
import fastgru  # noqa: E402
import fastgru.torch  # noqa: E402 - after the skip: it imports torch
from fastgru import torch as fastgru_torch  # noqa: E402

DEVIATIONS = Deviations("fastgru.torch vs torch")
deviation_summary = DEVIATIONS.fixture()

N, S, I, H = 3, 5, 4, 6
# torch.export assigns the GRU's _flat_weights while tracing, for torch.nn.GRU as for fastgru.torch.GRU
EXPORT_WARNING = "ignore:The tensor attributes .*_flat_weights"
HALF = [
    pytest.param(torch.float16, id="float16"),
    pytest.param(
        torch.bfloat16, id="bfloat16", marks=pytest.mark.skipif(BFLOAT16 is None, reason="ml_dtypes is not installed")
    ),
]


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(0)


def array(t):
    """A tensor as a NumPy array of its dtype (bfloat16 as ml_dtypes.bfloat16, for its tolerance)."""
    if t.dtype is torch.bfloat16:
        return t.float().numpy().astype(BFLOAT16)
    return t.numpy()


def check(label, got, want):
    """Tensors (or tuples of them) of fastgru.torch against torch's, within the tolerance of their dtype."""
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert [g.dtype for g in got] == [w.dtype for w in want]
    assert [g.shape for g in got] == [w.shape for w in want]
    DEVIATIONS.check(label, [array(g) for g in got], [array(w) for w in want])


@pytest.fixture
def spy(monkeypatch):
    """Counts the calls that ran on fastgru (the GRU's and the cell's bodies, by the full checks or by
    the short way of a call like the last: ``calls.planned`` of them)."""
    calls = type("Calls", (dict,), {})(gru=0, cell=0)  # a dict, with the attribute ``planned``
    planned = {"gru": 0, "cell": 0}

    def counted(kind, body, by_plan):
        def run(*args):
            calls[kind] += 1
            planned[kind] += by_plan
            return body(*args)

        return run

    for kind, name, plan_name in (("gru", "_gru", "_seen_gru"), ("cell", "_gru_cell", "_seen_cell")):
        monkeypatch.setattr(fastgru_torch, name, counted(kind, getattr(fastgru_torch, name), False))
        monkeypatch.setattr(fastgru_torch, plan_name, counted(kind, getattr(fastgru_torch, plan_name), True))
    calls.planned = planned
    return calls


def inputs(rng, *shape, dtype=torch.float32):
    return torch.from_numpy(rng.standard_normal(shape)).to(dtype)


# ------------------------------------------------------------------------------------ torch.nn.GRU


@pytest.mark.parametrize("num_layers", [1, 2, 3])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_gru_matches_torch(num_layers, bidirectional, batch_first, bias, spy):
    module = torch.nn.GRU(
        I,
        H,
        num_layers=num_layers,
        bidirectional=bidirectional,
        batch_first=batch_first,
        bias=bias,
        dropout=0.5 if num_layers > 1 else 0.0,
    ).eval()  # dropout: not in eval
    fast = fastgru.torch.optimize(module)
    rng = np.random.default_rng([num_layers, bidirectional, batch_first, bias])
    x = inputs(rng, *((N, S, I) if batch_first else (S, N, I)))
    h0 = inputs(rng, num_layers * (1 + bidirectional), N, H)
    with torch.no_grad():
        check("float32", fast(x, h0), module(x, h0))
        check("float32", fast(x), module(x))  # h0 zeros
        x1 = x[0] if batch_first else x[:, 0]
        check("float32", fast(x1, h0[:, 0]), module(x1, h0[:, 0]))  # unbatched
        check("float32", fast(x1), module(x1))
    assert spy["gru"] == 4


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("enforce_sorted", [False, True])
@pytest.mark.parametrize("with_h0", [False, True])
def test_packed_sequence_matches_torch(bidirectional, batch_first, enforce_sorted, with_h0, spy):
    from torch.nn.utils.rnn import pack_padded_sequence

    module = torch.nn.GRU(I, H, num_layers=2, bidirectional=bidirectional, batch_first=batch_first).eval()
    fast = fastgru.torch.GRU.from_module(module)
    rng = np.random.default_rng([bidirectional, batch_first, enforce_sorted, with_h0])
    n = 5
    lengths = make_lengths(rng, n, S, low=1)  # torch refuses a length of 0
    if enforce_sorted:
        lengths = np.sort(lengths)[::-1].copy()
    x = inputs(rng, *((n, S, I) if batch_first else (S, n, I)))
    h0 = inputs(rng, 2 * (1 + bidirectional), n, H) if with_h0 else None
    packed = pack_padded_sequence(x, torch.from_numpy(lengths), batch_first=batch_first, enforce_sorted=enforce_sorted)
    with torch.no_grad():
        (got, got_h), (want, want_h) = fast(packed, h0), module(packed, h0)
    assert type(got) is type(want)
    for name in ("batch_sizes", "sorted_indices", "unsorted_indices"):
        a, b = getattr(got, name), getattr(want, name)
        assert (a is None and b is None) or torch.equal(a, b), name
    check("float32", (got.data, got_h), (want.data, want_h))
    assert spy["gru"] == 1


def test_float64():
    module = torch.nn.GRU(I, H, num_layers=2, bidirectional=True).double().eval()
    fast = fastgru.torch.optimize(module)
    x = inputs(np.random.default_rng(1), S, N, I, dtype=torch.float64)
    with torch.no_grad():
        got, want = fast(x), module(x)
    assert got[0].dtype is torch.float64
    check("float64", got, want)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("bidirectional", [False, True])
def test_half_precision_is_computed_in_float32(dtype, bidirectional, spy):
    """float16/bfloat16 weights and inputs: the result of the float32 computation on those values,
    rounded once to the input's dtype."""
    module = torch.nn.GRU(I, H, num_layers=2, bidirectional=bidirectional, batch_first=True).to(dtype).eval()
    fast = fastgru.torch.optimize(module)
    as32 = copy.deepcopy(module).float()  # the same (rounded) weights, in float32
    rng = np.random.default_rng(2)
    x = inputs(rng, N, S, I, dtype=dtype)
    h0 = inputs(rng, 2 * (1 + bidirectional), N, H, dtype=dtype)
    with torch.no_grad():
        got = fast(x, h0)
        want = as32(x.float(), h0.float())
    assert [t.dtype for t in got] == [dtype, dtype]
    check(str(dtype).removeprefix("torch."), got, tuple(w.to(dtype) for w in want))
    assert spy["gru"] == 1


def test_results_do_not_depend_on_the_other_rows():
    """fastgru computes each row alone: a row's result is the same bits in any batch."""
    fast = fastgru.torch.optimize(torch.nn.GRU(I, H, num_layers=2, batch_first=True).eval())
    x = inputs(np.random.default_rng(3), 8, S, I)
    with torch.no_grad():
        whole, _ = fast(x)
        for b in range(8):
            alone, _ = fast(x[b : b + 1])
            assert torch.equal(alone[0], whole[b])


def test_state_carried_across_calls_equals_one_call():
    """Streaming: chunks fed in turn with h_n passed back as h0 give one call's results."""
    module = torch.nn.GRU(I, H, num_layers=2, batch_first=True).eval()
    fast = fastgru.torch.optimize(module)
    x = inputs(np.random.default_rng(4), N, 12, I)
    with torch.no_grad():
        whole, h_whole = fast(x)
        h, parts = None, []
        for t in range(0, 12, 5):  # chunks of 5, 5 and 2 steps
            y, h = fast(x[:, t : t + 5], h)
            parts.append(y)
        frames, h1 = [], None
        for t in range(12):  # one frame at a time
            y, h1 = fast(x[:, t : t + 1], h1)
            frames.append(y)
        want, h_want = module(x)
    assert torch.equal(torch.cat(parts, dim=1), whole) and torch.equal(h, h_whole)
    assert torch.equal(torch.cat(frames, dim=1), whole) and torch.equal(h1, h_whole)
    check("float32", (whole, h_whole), (want, h_want))


# -------------------------------------------------------------------------------- torch.nn.GRUCell


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gru_cell_matches_torch(bias, dtype, spy):
    module = torch.nn.GRUCell(I, H, bias=bias).to(dtype)
    fast = fastgru.torch.optimize(module)
    assert isinstance(fast, torch.nn.GRUCell) and type(fast) is fastgru.torch.GRUCell
    rng = np.random.default_rng([bias])
    x, hx = inputs(rng, N, I, dtype=dtype), inputs(rng, N, H, dtype=dtype)
    label = str(dtype).removeprefix("torch.")
    with torch.no_grad():
        check(label, fast(x, hx), module(x, hx))
        check(label, fast(x), module(x))  # hx zeros
        check(label, fast(x[0], hx[0]), module(x[0], hx[0]))  # unbatched
        check(label, fast(x[0]), module(x[0]))
    assert spy["cell"] == 4


@pytest.mark.parametrize("dtype", HALF)
def test_gru_cell_half_precision(dtype):
    module = torch.nn.GRUCell(I, H).to(dtype)
    fast = fastgru.torch.optimize(module)
    rng = np.random.default_rng(5)
    x, hx = inputs(rng, N, I, dtype=dtype), inputs(rng, N, H, dtype=dtype)
    with torch.no_grad():
        got = fast(x, hx)
        want = copy.deepcopy(module).float()(x.float(), hx.float())
    assert got.dtype is dtype
    check(str(dtype).removeprefix("torch."), got, want.to(dtype))


def test_gru_cell_steps_equal_the_gru():
    """A GRUCell stepped over a sequence gives the one-layer GRU's outputs (the same weights)."""
    gru = torch.nn.GRU(I, H)
    cell = torch.nn.GRUCell(I, H)
    cell.load_state_dict({k.removesuffix("_l0"): v for k, v in gru.state_dict().items()})
    fast_gru, fast_cell = fastgru.torch.optimize(gru), fastgru.torch.optimize(cell)
    x = inputs(np.random.default_rng(6), S, N, I)
    with torch.no_grad():
        y, h_n = fast_gru(x)
        h, states = None, []
        for x_t in x:
            h = fast_cell(x_t, h)
            states.append(h)
    np.testing.assert_allclose(torch.stack(states).numpy(), y.numpy(), *TOLERANCES["float32"])
    np.testing.assert_allclose(h.numpy(), h_n[0].numpy(), *TOLERANCES["float32"])


# ---------------------------------------------------------------------------------------- a model


class Model(torch.nn.Module):
    """A Conv1d front end, a GRU stack, a Linear head and a GRUCell decoder step."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv1d(I, 8, 3, padding=1)
        self.encoder = torch.nn.GRU(8, H, num_layers=2, batch_first=True, dropout=0.2)
        self.head = torch.nn.Linear(H, 3)
        self.decoder = torch.nn.GRUCell(3, H)

    def forward(self, features, h=None):  # features (N, I, L)
        x = torch.relu(self.conv(features)).transpose(1, 2)  # (N, L, 8), a strided view
        y, h = self.encoder(x, h)
        logits = self.head(y)
        return logits, h, self.decoder(logits[:, -1], h[-1])


def test_optimize_a_model(spy):
    model = Model().eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    fast = fastgru.torch.optimize(model)
    assert type(model.encoder) is torch.nn.GRU and type(model.decoder) is torch.nn.GRUCell  # a copy was changed
    assert type(fast.encoder) is fastgru.torch.GRU and type(fast.decoder) is fastgru.torch.GRUCell
    assert type(fast.conv) is torch.nn.Conv1d and type(fast.head) is torch.nn.Linear
    assert list(fast.state_dict()) == list(model.state_dict())
    assert repr(fast) == repr(model)
    assert isinstance(fast.encoder, torch.nn.RNNBase) and fast.encoder.mode == "GRU"
    assert fast.encoder.weight_ih_l0 is not model.encoder.weight_ih_l0  # copies, not shared
    features = inputs(np.random.default_rng(7), N, I, S)
    with torch.no_grad():
        check("float32", fast(features), model(features))
    assert spy == {"gru": 1, "cell": 1}
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_optimize_inplace_shares_the_parameters():
    model = Model().eval()
    weight = model.encoder.weight_hh_l1
    fast = fastgru.torch.optimize(model, inplace=True)
    assert fast is model and type(model.encoder) is fastgru.torch.GRU
    assert model.encoder.weight_hh_l1 is weight
    shared = torch.nn.Sequential(model.encoder, model.encoder)  # one module twice: one replacement
    twice = fastgru.torch.optimize(torch.nn.Sequential(torch.nn.GRU(I, H), torch.nn.GRU(I, H)), inplace=True)
    assert twice[0] is not twice[1]
    gru = torch.nn.GRU(I, H)
    same = fastgru.torch.optimize(torch.nn.Sequential(gru, gru), inplace=True)
    assert same[0] is same[1] and type(same[0]) is fastgru.torch.GRU and same[0].weight_ih_l0 is gru.weight_ih_l0
    assert fastgru.torch.optimize(shared, inplace=True)[0] is shared[0]  # already fastgru's: left alone


def test_only_exact_torch_types_are_replaced():
    class MyGRU(torch.nn.GRU):
        def forward(self, input, hx=None):
            return super().forward(input * 2, hx)

    model = fastgru.torch.optimize(torch.nn.Sequential(MyGRU(I, H)))
    assert type(model[0]) is MyGRU


def test_optimized_model_is_copied_and_saved():
    fast = fastgru.torch.optimize(Model().eval())
    features = inputs(np.random.default_rng(8), N, I, S)
    buffer = io.BytesIO()
    torch.save(fast, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    with torch.no_grad():
        want = fast(features)
        for other in (copy.deepcopy(fast), loaded, pickle.loads(pickle.dumps(fast))):
            assert type(other.encoder) is fastgru.torch.GRU
            for a, b in zip(other(features), want):
                assert torch.equal(a, b)


def test_from_torch_takes_fastgru_torch_gru():
    fast = fastgru.torch.GRU(I, H, num_layers=2, batch_first=True)
    x = inputs(np.random.default_rng(9), N, S, I)
    with torch.no_grad():
        want = fast(x)
    got = fastgru.from_torch(torch.nn.Sequential(fast))(x.numpy())
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b.numpy())


# --------------------------------------------------------------------- when torch's own code runs


def test_gradients_run_torch(spy):
    """With gradients needed, the modules run torch's implementation: training is unchanged."""
    model = Model()  # training mode, dropout between the GRU's layers
    fast = fastgru.torch.optimize(model)
    features = inputs(np.random.default_rng(10), N, I, S)
    torch.manual_seed(1)
    want = model(features)
    torch.manual_seed(1)
    got = fast(features)
    assert spy == {"gru": 0, "cell": 0}
    for a, b in zip(got, want):
        assert torch.equal(a, b) and a.grad_fn is not None
    sum(t.sum() for t in got).backward()
    sum(t.sum() for t in want).backward()
    for (name, a), b in zip(fast.named_parameters(), model.parameters()):
        assert torch.equal(a.grad, b.grad), name


def test_gradient_conditions(spy):
    gru = fastgru.torch.GRU(I, H)
    cell = fastgru.torch.GRUCell(I, H)
    x = inputs(np.random.default_rng(11), S, N, I)
    gru(x)  # parameters require grad, grad mode on
    cell(x[0])
    assert spy == {"gru": 0, "cell": 0}
    with torch.no_grad():
        gru(x.requires_grad_())  # no grad mode: fastgru, even for an input that requires grad
        cell(x[0])
    with torch.inference_mode():
        gru(x.detach())
    assert spy == {"gru": 2, "cell": 1}
    gru.requires_grad_(False)
    cell.requires_grad_(False)
    y, _ = gru(x.detach())  # nothing requires grad
    assert y.grad_fn is None and spy["gru"] == 3
    y, _ = gru(x)  # the input requires grad
    assert y.grad_fn is not None and spy["gru"] == 3
    cell(x[0].detach())
    assert spy["cell"] == 2


def test_training_mode_with_dropout_runs_torch(spy):
    gru = fastgru.torch.GRU(I, H, num_layers=2, dropout=0.5)
    x = inputs(np.random.default_rng(12), S, N, I)
    with torch.no_grad():
        gru(x)
        assert spy["gru"] == 0
        gru.eval()(x)
        fastgru.torch.GRU(I, H, num_layers=2)(x)  # training mode without dropout: fastgru
    assert spy["gru"] == 2


def test_other_devices_and_autocast_run_torch(spy):
    gru = fastgru.torch.GRU(I, H, device="meta")
    cell = fastgru.torch.GRUCell(I, H, device="meta")
    with torch.no_grad():
        y, h = gru(torch.empty(S, N, I, device="meta"))
        assert y.device.type == "meta" and y.shape == (S, N, H) and h.shape == (1, N, H)
        assert cell(torch.empty(N, I, device="meta")).device.type == "meta"
        module = torch.nn.GRU(I, H).eval()
        fast = fastgru.torch.optimize(module)
        x = inputs(np.random.default_rng(13), S, N, I)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            got, want = fast(x), module(x)
        assert got[0].dtype is want[0].dtype and torch.equal(got[0], want[0])
    assert spy == {"gru": 0, "cell": 0}


@pytest.mark.filterwarnings("ignore:`torch.jit.trace.*` is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")  # torch.nn.GRU's own shape checks warn too
def test_jit_tracing_records_torch_gru(spy):
    """torch.jit.trace (as torch.onnx.export's TorchScript path uses it) records torch's GRU."""
    fast = fastgru.torch.optimize(torch.nn.GRU(I, H).eval())
    x = inputs(np.random.default_rng(13), S, N, I)
    with torch.no_grad():
        traced = torch.jit.trace(fast, x)
        check("float32", traced(x), fast(x))
    assert "aten::gru" in str(traced.graph)  # (the trace's check runs the module outside tracing: fastgru)


def test_torch_raises_its_own_errors(spy):
    module = torch.nn.GRU(I, H, num_layers=2).eval()
    fast = fastgru.torch.optimize(module)
    x = torch.zeros(S, N, I)
    for args in [
        (torch.zeros(S, N, I + 1),),
        (x, torch.zeros(2, N + 1, H)),
        (x, torch.zeros(1, N, H)),
        (torch.zeros(S, N, I, dtype=torch.float64),),
        (torch.zeros(0, N, I),),
        (torch.zeros(N, 1, S, I),),
    ]:
        with torch.no_grad(), pytest.raises((RuntimeError, ValueError)) as want:
            module(*args)
        with torch.no_grad(), pytest.raises(type(want.value), match=f"^{__import__('re').escape(str(want.value))}$"):
            fast(*args)
    with torch.no_grad(), pytest.raises(ValueError, match="GRUCell: Expected input to be 1D or 2D, got 3D instead"):
        fastgru.torch.optimize(torch.nn.GRUCell(I, H))(torch.zeros(1, N, I))
    assert spy == {"gru": 0, "cell": 0}
    with pytest.raises(TypeError, match=r"fastgru.torch.optimize: got list; expected a torch.nn.Module"):
        fastgru.torch.optimize([module])
    with pytest.raises(TypeError, match=r"fastgru.torch.GRU.from_module: got LSTM; expected a torch.nn.GRU"):
        fastgru.torch.GRU.from_module(torch.nn.LSTM(I, H))
    with pytest.raises(TypeError, match=r"fastgru.torch.GRUCell.from_module: got GRU; expected a torch.nn.GRUCell"):
        fastgru.torch.GRUCell.from_module(module)
    with pytest.raises(ValueError, match="proj_size argument is only supported for LSTM, not RNN or GRU"):
        fastgru.torch.GRU(I, H, proj_size=2)


def test_batch_of_zero_rows_runs_torch(spy):
    module = torch.nn.GRU(I, H).eval()
    with torch.no_grad():
        y, h = fastgru.torch.optimize(module)(torch.zeros(S, 0, I))
    assert y.shape == (S, 0, H) and h.shape == (1, 0, H) and spy["gru"] == 0


# ------------------------------------------------------------------------------ parameter changes


def test_changed_parameters_are_seen():
    module = torch.nn.GRU(I, H, num_layers=2, batch_first=True).eval()
    fast = fastgru.torch.optimize(module, inplace=False)
    reference = copy.deepcopy(fast)  # a torch-computed twin: the same weights, changed alike below
    x = inputs(np.random.default_rng(14), N, S, I)

    def same_as_torch():
        with torch.no_grad():
            got = fast(x)
            want = torch.nn.GRU.forward(reference, x)
        check(str(got[0].dtype).removeprefix("torch."), got, want)
        return got

    first = same_as_torch()
    packs = fastgru_torch._PACKS.packs
    same_as_torch()
    assert fastgru_torch._PACKS.packs == packs  # no repacking while nothing changes
    other = torch.nn.GRU(I, H, num_layers=2, batch_first=True).state_dict()
    for target in (fast, reference):
        target.load_state_dict(other)
    assert not torch.equal(same_as_torch()[0], first[0])
    with torch.no_grad():
        for target in (fast, reference):
            target.weight_hh_l1.mul_(0.5)  # in place: the version counter moves
    same_as_torch()
    for target in (fast, reference):
        target.bias_ih_l0.data = torch.ones(3 * H)  # .data assigned: a new data_ptr
    same_as_torch()
    for target in (fast, reference):
        target.weight_ih_l0 = torch.nn.Parameter(torch.full((3 * H, I), 0.1))  # a new Parameter
    same_as_torch()
    for target in (fast, reference):
        target.double()
    x = x.double()
    assert same_as_torch()[0].dtype is torch.float64
    before = same_as_torch()
    for target in (fast, reference):
        target.weight_hh_l0.data.mul_(2)  # through .data: torch's version counter does not see it
    fast.repack()
    assert not torch.equal(same_as_torch()[0], before[0])


def test_changed_cell_parameters_are_seen():
    cell = fastgru.torch.GRUCell(I, H)
    x = inputs(np.random.default_rng(15), N, I)
    with torch.no_grad():
        first = cell(x)
        cell.weight_ih.mul_(-1)
        check("float32", cell(x), torch.nn.GRUCell.forward(cell, x))
        cell.weight_hh.data.zero_()
        cell.repack()
        check("float32", cell(x), torch.nn.GRUCell.forward(cell, x))
        cell.double()
        assert cell(x.double()).dtype is torch.float64
    assert not torch.equal(first, cell.float()(x).detach())


# ------------------------------------------------------------------------------------ the short way


def _gru_calls(module, x, h0):
    """The GRU's calls of test_repeated_calls_take_the_short_way: (input, hx) batched and not, hx or None."""
    x1 = x[0] if module.batch_first else x[:, 0]
    return [(x, h0), (x, None), (x1, h0[:, 0]), (x1, None)]


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_repeated_calls_take_the_short_way(bidirectional, batch_first, dtype, spy):
    """A call like the module's last one takes the short way, and gives the bits of the full path: new
    tensors each time, for the GRU and the cell, batched or not, with hx or without."""
    gru = torch.nn.GRU(I, H, num_layers=2, bidirectional=bidirectional, batch_first=batch_first).to(dtype)
    cell = torch.nn.GRUCell(I, H).to(dtype)
    fast_gru, fast_cell = fastgru.torch.optimize(gru), fastgru.torch.optimize(cell)
    rng = np.random.default_rng([bidirectional, batch_first])
    x = inputs(rng, *((N, S, I) if batch_first else (S, N, I)), dtype=dtype)
    h0 = inputs(rng, 2 * (1 + bidirectional), N, H, dtype=dtype)
    cases = [(fast_gru, gru, args) for args in _gru_calls(gru, x, h0)]
    xc, hc = x[:, 0] if batch_first else x[0], h0[0]  # (N, I), (N, H)
    cases += [(fast_cell, cell, args) for args in [(xc, hc), (xc, None), (xc[0], hc[0]), (xc[0], None)]]
    label = str(dtype).removeprefix("torch.")
    with torch.inference_mode():
        for fast, module, args in cases:
            args = args if args[1] is not None else args[:1]
            first = fast(*args)
            planned = dict(spy.planned)
            again = fast(*args)
            assert sum(spy.planned.values()) == sum(planned.values()) + 1, "the second call takes the short way"
            first, again = (first, again) if isinstance(first, tuple) else ((first,), (again,))
            for a, b in zip(first, again):
                assert torch.equal(a, b) and a is not b and a.data_ptr() != b.data_ptr()
            check(label, again if len(again) > 1 else again[0], module(*args))


def test_the_short_way_is_left_when_a_call_differs(spy):
    """Anything that differs from the last call's takes the full checks, and whatever they decide:
    shapes, hx given or not, dtype, grad mode, autocast, training, weight_dtype, the Parameters."""
    module = torch.nn.GRU(I, H, num_layers=2, batch_first=True, dropout=0.5).eval()
    fast = fastgru.torch.optimize(module)
    rng = np.random.default_rng(30)
    x, h0 = inputs(rng, N, S, I), inputs(rng, 2, N, H)

    def runs(way, call, *args, change=lambda: None):
        """Takes the short way after ``fast(x, h0)``, then ``change()``, then checks that ``call(*args)``
        ran ``way``: by the short way, by the full checks on fastgru, or on torch."""
        with torch.no_grad():
            fast(x, h0)
            change()
        calls, planned = spy["gru"], spy.planned["gru"]
        result = call(*args)
        ran = {(1, 1): "short", (1, 0): "full", (0, 0): "torch"}[spy["gru"] - calls, spy.planned["gru"] - planned]
        assert ran == way, (way, call, args)
        return result

    def both(change):  # the same change to fast and to the torch module
        return lambda: [change(m) for m in (fast, module)]

    with torch.no_grad():
        runs("short", fast, x, h0)
        check("float32", runs("short", fast, x.clone(), h0.clone()), module(x, h0))  # other tensors, same shapes
        runs("full", fast, x[:2], h0[:, :2])  # another batch size
        runs("full", fast, x, None)
        runs("full", fast, x[:, :2], h0)  # fewer steps
        with pytest.raises(ValueError, match="input dtype"):
            runs("torch", fast, x.double(), h0.double())  # another dtype: torch's own error
    assert runs("torch", fast, x, h0)[0].grad_fn is not None  # grad mode, Parameters that require grad
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        runs("torch", fast, x, h0)
    with torch.no_grad():
        runs("torch", fast, x, h0, change=fast.train)  # training, with dropout between the layers
        fast.eval()
        fast.dropout = 0.0
        runs("full", fast, x, h0, change=fast.train)  # training without dropout: fastgru
        runs("torch", fast, x, h0, change=lambda: setattr(fast, "dropout", 0.5))  # dropout set again
        fast.eval()
        int8 = fastgru.torch.optimize(module, weight_dtype="int8")(x, h0)
        check("float32", runs("full", fast, x, h0, change=lambda: setattr(fast, "weight_dtype", "int8")), int8)
        fast.weight_dtype = None
        check("float32", runs("full", fast, x, h0, change=both(lambda m: m.weight_hh_l1.mul_(0.5))), module(x, h0))
        new_data = both(lambda m: setattr(m.weight_ih_l0, "data", torch.ones(3 * H, I)))  # a new data_ptr
        check("float32", runs("full", fast, x, h0, change=new_data), module(x, h0))
        new_parameter = both(lambda m: setattr(m, "bias_hh_l0", torch.nn.Parameter(m.bias_hh_l0.detach() * 2)))
        check("float32", runs("full", fast, x, h0, change=new_parameter), module(x, h0))
        other = torch.nn.GRU(I, H, num_layers=2, batch_first=True).eval()
        got = runs("full", torch.func.functional_call, fast, dict(other.named_parameters()), (x, h0))
        check("float32", got, other(x, h0))
        unseen = both(lambda m: m.weight_hh_l0.data.mul_(-1))  # torch's version counter does not see it
        check("float32", runs("full", fast, x, h0, change=lambda: (unseen(), fast.repack())), module(x, h0))


def test_the_short_way_is_not_copied_with_the_module():
    """A deep copy or a pickled module starts without the short way, and its own Parameters are used."""
    fast = fastgru.torch.optimize(torch.nn.GRU(I, H).eval())
    x = inputs(np.random.default_rng(31), S, N, I)
    with torch.no_grad():
        fast(x)
        fast(x)
        twin = copy.deepcopy(fast)
        restored = pickle.loads(pickle.dumps(fast))
        for other in (twin, restored):
            assert other not in fastgru_torch._SEEN
            other.weight_hh_l0.mul_(0)
            check("float32", other(x), torch.nn.GRU.forward(other, x))
        check("float32", fast(x), torch.nn.GRU.forward(fast, x))


def test_functional_call_uses_the_given_parameters():
    fast = fastgru.torch.GRU(I, H).eval()
    other = torch.nn.GRU(I, H).eval()
    x = inputs(np.random.default_rng(16), S, N, I)
    with torch.no_grad():
        got = torch.func.functional_call(fast, dict(other.named_parameters()), (x,))
        check("float32", got, other(x))
        check("float32", fast(x), torch.nn.GRU.forward(fast, x))  # its own again


# ------------------------------------------------------------------------- torch.compile and export


def test_compile_keeps_one_graph(spy):
    model = Model().eval()
    fast = fastgru.torch.optimize(model)
    features = inputs(np.random.default_rng(17), N, I, S)
    torch._dynamo.reset()
    with torch.no_grad():
        explained = torch._dynamo.explain(fast)(features)
        assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
        ops = {str(node.target) for graph in explained.graphs for node in graph.graph.nodes}
        assert {"fastgru.gru.default", "fastgru.gru_cell.default"} <= ops
        compiled = torch.compile(fast, backend="aot_eager", fullgraph=True)
        check("float32", compiled(features), model(features))
        packs = fastgru_torch._PACKS.packs
        compiled(features)
        assert fastgru_torch._PACKS.packs == packs


@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")  # inductor's own
def test_compile_with_inductor():
    model = Model().eval()
    fast = fastgru.torch.optimize(model)
    features = inputs(np.random.default_rng(18), N, I, S)
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = torch.compile(fast, fullgraph=True)
        check("float32", compiled(features), model(features))
        h0 = inputs(np.random.default_rng(19), 2, N, H)
        check("float32", compiled(features, h0), model(features, h0))


@pytest.mark.filterwarnings(EXPORT_WARNING)
@pytest.mark.parametrize("strict", [False, True])
def test_export_holds_the_fastgru_ops(strict):
    model = Model().eval()
    fast = fastgru.torch.optimize(model)
    features = inputs(np.random.default_rng(20), N, I, S)
    with torch.no_grad():
        program = torch.export.export(fast, (features,), strict=strict)
        targets = [str(node.target) for node in program.graph.nodes if node.op == "call_function"]
        assert "fastgru.gru.default" in targets and "fastgru.gru_cell.default" in targets
        assert not any("aten.gru" in t for t in targets)
        check("float32", program.module()(features), model(features))


@pytest.mark.filterwarnings(EXPORT_WARNING)
def test_export_with_gradients_holds_torch_gru():
    """As in eager mode: with grad mode on and Parameters that require grad, torch's own GRU."""
    fast = fastgru.torch.optimize(torch.nn.GRU(I, H).eval())
    program = torch.export.export(fast, (torch.zeros(S, N, I),))
    targets = [str(node.target) for node in program.graph.nodes if node.op == "call_function"]
    assert "aten.gru.input" in targets and "fastgru.gru.default" not in targets


def test_custom_ops_directly():
    gru = torch.nn.GRU(I, H, num_layers=2, bidirectional=True)
    x = inputs(np.random.default_rng(21), S, N, I)
    with torch.no_grad():
        got = torch.ops.fastgru.gru(x, None, None, gru._flat_weights, True, 2, True, False)
        check("float32", got, gru(x))
        cell = torch.nn.GRUCell(I, H)
        check("float32", torch.ops.fastgru.gru_cell(x[0], None, list(cell.parameters())), cell(x[0]))
    torch.library.opcheck(
        torch.ops.fastgru.gru.default,
        (x, None, None, list(gru._flat_weights), True, 2, True, False),
        test_utils=("test_schema", "test_faketensor"),
    )


# --------------------------------------------------------------------------------------- threads


@pytest.fixture
def thread_counts(monkeypatch):
    """The fastgru thread count of each GRU call's run_layers, in order."""
    seen = []
    run_layers = fastgru_torch.run_layers

    def counted(*args):
        seen.append(fastgru.get_num_threads())
        return run_layers(*args)

    monkeypatch.setattr(fastgru_torch, "run_layers", counted)
    return seen


def test_torch_thread_count_caps_fastgru(monkeypatch, thread_counts):
    seen = thread_counts
    gru = fastgru.torch.GRU(I, H).eval()
    x = torch.zeros(S, N, I)
    before_torch, before = torch.get_num_threads(), fastgru.get_num_threads()
    try:
        with torch.no_grad():
            torch.set_num_threads(1)
            gru(x)
            assert fastgru.get_num_threads() == before  # restored after the call
            torch.set_num_threads(before_torch)
            gru(x)
            with fastgru.threads(1):
                gru(x)  # fastgru's own setting caps it too
            monkeypatch.setattr(fastgru_torch, "_CORES", before_torch)
            gru(x[:, :1])  # one row, torch's threads on every core: the calling thread alone
            fastgru.torch.GRU(I, H, bidirectional=True).eval()(x[:, :1])  # one row, two directions
            monkeypatch.setattr(fastgru_torch, "_CORES", before_torch + 1)
            gru(x[:, :1])  # one row, a core free of torch's threads: fastgru may share it
            monkeypatch.setattr(fastgru_torch, "_CORES", before_torch)
            monkeypatch.setattr(fastgru_torch, "_OMP_SPINS_BRIEFLY", True)
            gru(x[:, :1])  # one row, torch's threads sleep soon: a sequence shares it
            gru(x[:1, :1])  # but not a single step
    finally:
        torch.set_num_threads(before_torch)
    both = min(before_torch, before)
    assert seen == [1, both, 1, 1, both, both, both, 1]
    assert fastgru.get_num_threads() == before


def test_set_num_threads_replaces_torchs_rule(monkeypatch, thread_counts):
    """fastgru.torch.set_num_threads(n): the GRUs take n threads whatever torch's count (still at most
    the calling thread's fastgru count), a single row included; None restores the rule."""
    seen = thread_counts
    gru = fastgru.torch.GRU(I, H).eval()
    x = torch.zeros(S, N, I)
    before_torch, before = torch.get_num_threads(), fastgru.get_num_threads()
    assert fastgru.torch.get_num_threads() is None
    try:
        with torch.no_grad():
            torch.set_num_threads(1)
            monkeypatch.setattr(fastgru_torch, "_CORES", before_torch)
            fastgru.torch.set_num_threads(2)
            assert fastgru.torch.get_num_threads() == 2
            gru(x[:, :1])  # one row, torch on one thread: fastgru's count, not torch's
            gru(x)
            with fastgru.threads(1):
                gru(x)  # the calling thread's own count still caps it
            fastgru.torch.set_num_threads(None)
            gru(x[:, :1])  # torch's rule again: torch's one thread
    finally:
        fastgru.torch.set_num_threads(None)
        torch.set_num_threads(before_torch)
    two = min(2, before)
    assert seen == [two, two, 1, 1]
    assert fastgru.get_num_threads() == before


@pytest.mark.parametrize(
    "n, error", [(0, ValueError), (-2, ValueError), (1.5, TypeError), ("2", TypeError), (True, TypeError)]
)
def test_set_num_threads_refuses_what_is_not_a_count(n, error):
    with pytest.raises(error, match="fastgru.torch.set_num_threads: n must be"):
        fastgru.torch.set_num_threads(n)
    assert fastgru.torch.get_num_threads() is None


@pytest.mark.parametrize(
    "environ, briefly",
    [
        ({}, False),
        ({"OMP_WAIT_POLICY": "Passive"}, True),
        ({"OMP_WAIT_POLICY": "active"}, False),
        ({"GOMP_SPINCOUNT": "10000"}, True),
        ({"GOMP_SPINCOUNT": "0"}, True),
        ({"GOMP_SPINCOUNT": "100000"}, False),
        ({"GOMP_SPINCOUNT": "infinite"}, False),
    ],
)
def test_torch_threads_that_spin_briefly(environ, briefly):
    assert fastgru_torch._omp_spins_briefly(environ) is briefly


def test_calls_from_several_threads_equal_serial_calls():
    model = fastgru.torch.optimize(Model().eval())
    rng = np.random.default_rng(22)
    batches = [inputs(rng, 1 + k % 3, I, S + k % 4) for k in range(16)]
    with torch.no_grad():
        serial = [model(features) for features in batches]

    def call(features):
        with torch.no_grad():
            return model(features)

    with ThreadPoolExecutor(4) as pool:
        concurrent = list(pool.map(call, batches * 3))
    for k, got in enumerate(concurrent):
        for a, b in zip(got, serial[k % len(batches)]):
            assert torch.equal(a, b)


# ----------------------------------------------------------------------------------------- import


def test_import_fastgru_does_not_import_torch():
    code = (
        "import sys, fastgru\n"
        "assert 'torch' not in sys.modules and not hasattr(fastgru, 'torch')\n"
        "import fastgru.torch\n"
        "assert 'torch' in sys.modules and fastgru.torch.optimize\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


@pytest.mark.parametrize("inference_tensors", [False, True])
def test_optimized_inside_inference_mode(inference_tensors):
    """optimize() inside torch.inference_mode() copies the model outside it: Parameters with version
    counters, which the short way needs. A model made inside it and optimised in place has inference-tensor
    Parameters, which keep no version counter. Either works there and outside, and follows
    in-place changes."""
    x = inputs(np.random.default_rng(15), N, S, I)
    with torch.inference_mode():
        if inference_tensors:
            module = torch.nn.GRU(I, H, num_layers=2, batch_first=True).eval()
            reference = copy.deepcopy(module)
            fast = fastgru.torch.optimize(module, inplace=True)
        else:
            module = copy.deepcopy(torch.nn.GRU(I, H, num_layers=2, batch_first=True).eval())
            fast = fastgru.torch.optimize(module)
            reference = copy.deepcopy(module)
        assert all(p.is_inference() == inference_tensors for p in fast.parameters())
        got, want = fast(x), torch.nn.GRU.forward(reference, x)
        check("float32", got, want)
        packs = fastgru_torch._PACKS.packs
        fast(x)
        assert fastgru_torch._PACKS.packs == packs  # unchanged weights: no repacking
        for target in (fast, reference):
            target.weight_hh_l1.mul_(0.5)  # in place, inside inference mode
        got, want = fast(x), torch.nn.GRU.forward(reference, x)
        check("float32", got, want)
        assert fastgru_torch._PACKS.packs == packs + 1
        assert (fast in fastgru_torch._SEEN) != inference_tensors  # the short way needs version counters
    with torch.no_grad():
        check("float32", fast(x), torch.nn.GRU.forward(reference, x))


@pytest.mark.parametrize("weight_dtype", ["bfloat16", "int8"])
def test_optimize_with_compact_weights(weight_dtype):
    """``optimize(model, weight_dtype=)``: every GRU and GRUCell of the model runs on compact weights
    (torch.compile's custom op too), within their error of torch's float32, and a bad value fails
    at optimize, not at the first call."""
    gru = torch.nn.GRU(I, H, num_layers=2, batch_first=True)
    model = torch.nn.ModuleDict({"gru": gru, "cell": torch.nn.GRUCell(I, H)})
    model.eval()
    fast = fastgru.torch.optimize(model, weight_dtype=weight_dtype)
    assert fast["gru"].weight_dtype == weight_dtype and fast["cell"].weight_dtype == weight_dtype
    x = inputs(np.random.default_rng(16), N, S, I)
    with torch.inference_mode():
        got, want = fast["gru"](x), model["gru"](x)
        exact = fastgru.torch.optimize(model)["gru"](x)
        cell, cell_want = fast["cell"](x[:, 0]), model["cell"](x[:, 0])
        traced = fastgru.torch.gru_op(x, None, None, fast["gru"]._flat_weights, True, 2, False, True, weight_dtype)
    for g, w, e in zip(got, want, exact, strict=True):
        np.testing.assert_allclose(g.numpy(), w.numpy(), atol=3e-2)
        assert not torch.equal(g, e)
    np.testing.assert_allclose(cell.numpy(), cell_want.numpy(), atol=3e-2)
    for g, t in zip(got, traced, strict=True):
        assert torch.equal(g, t)
    with pytest.raises(ValueError, match="weight_dtype must be None, 'bfloat16', 'int8' or 'bfloat16x3'; got 'int4'"):
        fastgru.torch.optimize(model, weight_dtype="int4")
