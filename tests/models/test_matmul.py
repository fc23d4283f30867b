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


@pytest.mark.parametrize(("library", "weight_first", "path"), [
    (10.0, 8.0, "weight-first"), (10.0, 9.0, "library"), (5.0, 9.0, "library")])
def test_auto_takes_weight_first_only_where_it_was_clearly_faster(target, monkeypatch, library, weight_first, path):
    monkeypatch.setattr(matmul, "time_paths", lambda linears, rounds=matmul.ROUNDS: (library, weight_first))
    model = copy.deepcopy(target)
    choice = choose_linears(model, torch.device("cpu"))
    assert (choice.path, choice.library_ms, choice.weight_first_ms) == (path, library * 1e3, weight_first * 1e3)
    assert (type(model.lm_head) is WeightFirstLinear) == (path == "weight-first")
    assert choice.describe().startswith("W·xᵀ (" if path == "weight-first" else "x·Wᵀ (")


@pytest.mark.parametrize(("timings", "path", "chosen_by"), [
    ([(10.0, 9.0), (10.5, 7.0)], "weight-first", (10.0, 7.0)),  # not clearly faster, then clearly: the fastest of all
    ([(10.0, 9.0), (9.5, 9.0)], "library", (9.5, 9.0)),
    ([(10.0, 8.0)], "weight-first", (10.0, 8.0)),  # clear at once: timed once
    ([(10.0, 11.0)], "library", (10.0, 11.0))])
def test_a_close_timing_is_timed_again_for_longer(target, monkeypatch, timings, path, chosen_by):
    asked = []

    def time_paths(linears, rounds=matmul.ROUNDS):
        asked.append(rounds)
        return timings[len(asked) - 1]
    monkeypatch.setattr(matmul, "time_paths", time_paths)
    choice = choose_linears(copy.deepcopy(target), torch.device("cpu"))
    assert (choice.path, choice.library_ms, choice.weight_first_ms) == (path, chosen_by[0] * 1e3, chosen_by[1] * 1e3)
    assert asked == [matmul.ROUNDS, 3 * matmul.ROUNDS][:len(timings)]


def test_a_gpu_keeps_the_librarys_order_untimed(target, monkeypatch):
    monkeypatch.setattr(matmul, "time_paths", lambda linears: pytest.fail("a GPU's layers are not timed"))
    model = copy.deepcopy(target)
    assert choose_linears(model, torch.device("cuda")).path == "library"
    assert type(model.lm_head) is nn.Linear


def test_timing_measures_both_orders_on_the_models_own_layers(target):
    library, weight_first = matmul.time_paths(list(token_linears(target).values()), rounds=1)
    assert library > 0 and weight_first > 0


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
