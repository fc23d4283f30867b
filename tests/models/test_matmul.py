"""The weight-first linear layers compute the same function, only where a token forward runs, and only where
they were timed faster: the layer's outputs, the model's logits, the answers, and the choice itself."""

import copy

import pytest
import torch
from torch import nn

from conftest import make_pair, perturbed
from tabed.engine.config import GenerationConfig
from tabed.engine.loop import autoregressive_generate, collect, speculative_generate
from tabed.engine.spec import parse_spec
from tabed.errors import ModelLoadError
from tabed.models import matmul
from tabed.models.chat import Turn
from tabed.models.loading import load_preset
from tabed.models.matmul import WeightFirstLinear, choose_linears, token_linears


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("shape", [(1, 1, 24), (1, 6, 24), (2, 3, 24), (24,), (3, 5, 24)])
def test_weight_first_gives_the_layers_outputs(bias, shape):
    """Up to WEIGHT_FIRST_ROWS rows as W·xᵀ, more (15 here) the library's way; row-major either way, as the
    next layer multiplies fastest."""
    assert 3 * 5 > matmul.WEIGHT_FIRST_ROWS >= 6
    torch.manual_seed(0)
    linear = nn.Linear(24, 40, bias=bias)
    if bias:
        nn.init.normal_(linear.bias)  # a bias that is not near 0, so that leaving it out shows
    x = torch.randn(*shape)
    swapped = WeightFirstLinear.of(linear)
    out = swapped(x)
    assert out.shape == linear(x).shape and out.is_contiguous()
    torch.testing.assert_close(out, linear(x), rtol=1e-5, atol=1e-5)
    assert swapped.weight is linear.weight and swapped.bias is linear.bias  # shared, not copied


def test_only_the_token_path_is_swapped_and_the_model_computes_the_same(target):
    model = copy.deepcopy(target)
    names = set(token_linears(model))
    assert names and all(name.startswith(("model.language_model.", "lm_head")) for name in names)
    assert "lm_head" in names
    vision = [name for name, module in model.named_modules() if isinstance(module, nn.Linear) and name not in names]
    assert vision  # the vision tower and projector multiply hundreds of rows: the library's order stays
    keys = set(model.state_dict())
    ids = torch.tensor([[5, 9, 12, 20, 7]])
    with torch.inference_mode():
        before = model(input_ids=ids).logits
    choice = choose_linears(model, torch.device("cpu"), "weight-first")
    assert choice.path == "weight-first" and choice.describe() == "W·xᵀ"
    assert all(type(module) is WeightFirstLinear for name, module in model.named_modules() if name in names)
    assert all(type(model.get_submodule(name)) is nn.Linear for name in vision)
    assert set(model.state_dict()) == keys
    with torch.inference_mode():
        after = model(input_ids=ids).logits
        step = model(input_ids=ids[:, :1]).logits  # one row: the doubled row's product
    torch.testing.assert_close(after, before, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(step, before[:, :1], rtol=1e-4, atol=1e-4)


def test_a_weight_first_pair_decodes_its_own_answer(target, processor, image):
    """Lossless as before: plain and speculative decoding run the same swapped layers."""
    swapped, drafter = copy.deepcopy(target), perturbed(target, noise=0.004)
    choose_linears(swapped, torch.device("cpu"), "weight-first")
    pair = make_pair(swapped, drafter, processor)
    turns = [Turn("w1 w2 w3", [image])]
    config = GenerationConfig(max_new_tokens=24)
    plain = collect(autoregressive_generate(pair, turns, config))
    assert collect(speculative_generate(pair, turns, parse_spec("tabed-MT"), config)).token_ids == plain.token_ids


def test_weight_first_multiplies_only_its_row_counts_its_way(monkeypatch):
    """A layer chosen for 2 and 3 rows takes W·xᵀ (a product with the weight first) for those counts only,
    the library's x·Wᵀ for the others, with the same outputs either way."""
    torch.manual_seed(0)
    linear = nn.Linear(24, 40)
    swapped = WeightFirstLinear.of(linear, (2, 3))
    products = []
    real_mm = torch.mm
    monkeypatch.setattr(torch, "mm", lambda a, b: products.append(a.shape[1]) or real_mm(a, b))
    for count in (1, 2, 3, 4, 6):
        x = torch.randn(1, count, 24)
        products.clear()
        torch.testing.assert_close(swapped(x), linear(x), rtol=1e-5, atol=1e-5)
        assert products == ([24] if count in (2, 3) else []), count


def _per_count(pattern: dict[int, tuple[float, float]], default=(10.0, 10.0)) -> dict[int, tuple[float, float]]:
    return {count: pattern.get(count, default) for count in matmul.TIMED_ROWS}


@pytest.mark.parametrize(("pattern", "rows", "described"), [
    ({count: (10.0, 8.0) for count in matmul.TIMED_ROWS}, matmul.TIMED_ROWS, "W·xᵀ ("),
    ({2: (10.0, 5.0), 3: (10.0, 9.0), 4: (10.0, 5.0), 5: (10.0, 4.0), 6: (10.0, 9.0)}, (2, 4, 5),
     "W·xᵀ for 2, 4-5 rows, x·Wᵀ otherwise ("),
    ({1: (10.0, 9.0), 6: (5.0, 9.0)}, (), "x·Wᵀ (")])
def test_auto_takes_weight_first_only_for_the_row_counts_where_it_was_clearly_faster(target, monkeypatch, pattern,
                                                                                     rows, described):
    timings = _per_count(pattern)
    monkeypatch.setattr(matmul, "time_paths", lambda linears, rounds=matmul.ROUNDS, counts=matmul.TIMED_ROWS: {
        count: timings[count] for count in counts})
    model = copy.deepcopy(target)
    choice = choose_linears(model, torch.device("cpu"))
    assert choice.path == ("weight-first" if rows else "library") and choice.weight_first_rows == rows
    assert choice.library_ms == pytest.approx(sum(t[0] for t in timings.values()) * 1e3)
    assert choice.weight_first_ms == pytest.approx(sum(t[1] for t in timings.values()) * 1e3)
    assert (type(model.lm_head) is WeightFirstLinear) == bool(rows)
    if rows:
        assert model.lm_head.rows == frozenset(rows)
    assert choice.describe().startswith(described)


@pytest.mark.parametrize(("again", "rows"), [
    ({3: (10.5, 7.0)}, (2, 3)),  # not clearly faster at 3 rows, then clearly: the fastest of all
    ({3: (9.5, 9.0)}, (2,))])
def test_a_close_timing_is_timed_again_for_longer_at_its_row_count_only(target, monkeypatch, again, rows):
    first = _per_count({2: (10.0, 8.0), 3: (10.0, 9.0)}, default=(10.0, 11.0))
    asked = []

    def time_paths(linears, rounds=matmul.ROUNDS, counts=matmul.TIMED_ROWS):
        asked.append((rounds, counts))
        return dict(first) if len(asked) == 1 else {count: again[count] for count in counts}
    monkeypatch.setattr(matmul, "time_paths", time_paths)
    choice = choose_linears(copy.deepcopy(target), torch.device("cpu"))
    assert asked == [(matmul.ROUNDS, matmul.TIMED_ROWS), (3 * matmul.ROUNDS, (3,))]
    assert choice.weight_first_rows == rows
    library = sum(t[0] for t in first.values()) + min(0.0, again[3][0] - first[3][0])
    weight_first = sum(t[1] for t in first.values()) + min(0.0, again[3][1] - first[3][1])
    assert (choice.library_ms, choice.weight_first_ms) == (pytest.approx(library * 1e3),
                                                          pytest.approx(weight_first * 1e3))


def test_a_clear_timing_is_not_timed_again(target, monkeypatch):
    asked = []

    def time_paths(linears, rounds=matmul.ROUNDS, counts=matmul.TIMED_ROWS):
        asked.append(rounds)
        return _per_count({2: (10.0, 8.0)}, default=(10.0, 11.0))
    monkeypatch.setattr(matmul, "time_paths", time_paths)
    assert choose_linears(copy.deepcopy(target), torch.device("cpu")).weight_first_rows == (2,)
    assert asked == [matmul.ROUNDS]


def test_a_gpu_keeps_the_librarys_order_untimed(target, monkeypatch):
    monkeypatch.setattr(matmul, "time_paths", lambda linears: pytest.fail("a GPU's layers are not timed"))
    model = copy.deepcopy(target)
    assert choose_linears(model, torch.device("cuda")).path == "library"
    assert type(model.lm_head) is nn.Linear


def test_timing_measures_both_orders_on_the_models_own_layers_at_every_row_count(target):
    timings = matmul.time_paths(list(token_linears(target).values()), rounds=1)
    assert tuple(timings) == matmul.TIMED_ROWS == tuple(range(1, matmul.WEIGHT_FIRST_ROWS + 1))
    assert all(library > 0 and weight_first > 0 for library, weight_first in timings.values())
    assert tuple(matmul.time_paths(list(token_linears(target).values()), rounds=1, counts=(3,))) == (3,)


def test_an_unknown_order_is_refused(target, monkeypatch):
    with pytest.raises(ModelLoadError, match="weight-first"):
        choose_linears(copy.deepcopy(target), torch.device("cpu"), "fastest")
    monkeypatch.setenv("TABED_LINEAR", "fastest")
    with pytest.raises(ModelLoadError, match="TABED_LINEAR='fastest'"):
        load_preset("teaching", device="cpu")


def test_the_bundled_pair_says_how_its_layers_multiply(monkeypatch):
    monkeypatch.setenv("TABED_LINEAR", "library")
    pair = load_preset("teaching", device="cpu")
    assert {role: choice.path for role, choice in pair.linears.items()} == {"target": "library", "drafter": "library"}
    assert type(pair.target.lm_head) is nn.Linear
