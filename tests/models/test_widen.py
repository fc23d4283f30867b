"""Widening computes the same function: the bundled models' logits and answers, at a bigger shape."""

import copy
import json

import pytest
import torch
from transformers import AutoModelForImageTextToText

from tabed import cli
from tabed.engine.config import GenerationConfig
from tabed.engine.loop import autoregressive_generate, collect, speculative_generate
from tabed.engine.spec import parse_spec
from tabed.errors import InputError, ModelLoadError
from tabed.models.chat import Turn, encode, load_image
from tabed.models.loading import load_pair, load_preset
from tabed.models.presets import ASSETS, PRESETS
from tabed.models.widen import LLAVA_7B, LVLM_68M, Shape, Widening, query_rows, widen

TARGET, DRAFTER = ASSETS / "models" / "target", ASSETS / "models" / "drafter"
CHART = ASSETS / "examples" / "chart.png"
# (target shape, drafter shape): bigger heads (RoPE remapped), extra heads, layers, MLP units, vocabulary
SHAPES = [
    (Shape(hidden=768, layers=7, heads=6, intermediate=1600, vocab=720), Shape(256, 3, 4, 600, 720)),
    (Shape(hidden=512, layers=6, heads=8, intermediate=1536), Shape(256, 2, 2, 512)),
]


@pytest.fixture(scope="module")
def small():
    return {role: AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float32).eval()
            for role, path in (("target", TARGET), ("drafter", DRAFTER))}


def _inputs(pair, turns, role: str = "target"):
    """The prompt as one model of the pair sees it (the drafter sees a picture as more tokens)."""
    processor = pair.target_processor if role == "target" else pair.drafter_processor
    return encode(processor, turns, torch.device("cpu"), torch.float32)


@pytest.mark.parametrize("index", range(len(SHAPES)))
def test_widened_models_give_the_same_logits(small, teaching_pair, index):
    turns = [Turn("Which bar is the highest?", [load_image(CHART)], answer="Bar B."), Turn("Add 5 to that number.")]
    for role, shape in zip(("target", "drafter"), SHAPES[index], strict=True):
        prompt = _inputs(teaching_pair, turns, role)
        model = small[role]
        big = widen(model, shape)
        text = big.config.text_config
        assert (text.hidden_size, text.num_hidden_layers, text.num_attention_heads, text.intermediate_size) == (
            shape.hidden, shape.layers, shape.heads, shape.intermediate)
        with torch.no_grad():
            expected = model(input_ids=prompt.input_ids, **prompt.image_inputs).logits
            got = big(input_ids=prompt.input_ids, **prompt.image_inputs).logits
        vocab = expected.shape[-1]
        assert got.shape[-1] == (shape.vocab or vocab)
        assert (got[..., :vocab] - expected).abs().max() <= 1e-4, role
        extra = list(range(vocab, got.shape[-1]))
        assert (big.generation_config.suppress_tokens or []) == extra


def test_weights_that_may_be_anything_are_random_not_zero(small):
    big = widen(small["target"], SHAPES[0][0])
    extra_layer = big.model.language_model.layers[-1]
    assert extra_layer.mlp.gate_proj.weight.std() > 0.01  # work the GPU really does
    assert torch.count_nonzero(extra_layer.self_attn.v_proj.weight[:, :384]) == 0  # ... that adds nothing
    assert big.lm_head.weight[:, 384:].std() > 0.01


def test_rope_dimensions_keep_their_frequency():
    rows = query_rows(heads=1, head_dim=4, big_head_dim=8)  # frequencies θ^0, θ^-1/2 -> dims 0, 2 of 8
    assert rows.tolist() == [0, 2, 4, 6]
    assert query_rows(2, 4, 4).tolist() == list(range(8))  # same head size: identity


@pytest.mark.parametrize("shape, message", [
    (Shape(256, 6, 6, 1536), "hidden 256 is smaller"),
    (Shape(768, 6, 8, 1536), "head size 96 is not a multiple of 64"),
    (Shape(384, 4, 6, 1536), "layers 4 is smaller"),
])
def test_impossible_shapes_are_refused(small, shape, message):
    with pytest.raises(InputError, match=message):
        widen(small["target"], shape)


@pytest.mark.parametrize("change, message", [
    ({"num_key_value_heads": 2}, "grouped-query attention is not supported"),
    ({"attention_bias": True}, "biased attention or MLP projections"),
    ({"mlp_bias": True}, "biased attention or MLP projections"),
    ({"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}}, "only the default RoPE"),
])
def test_a_model_the_widening_cannot_keep_exact_is_refused_with_why(small, change, message):
    """Widening copies each head, bias-free projection and rotary frequency as it is: a model with shared
    key-value heads, biases or a scaled RoPE would come out computing another function, so it is refused."""
    model = copy.deepcopy(small["target"])
    for name, value in change.items():
        setattr(model.config.text_config, name, value)
    with pytest.raises(InputError, match=f"cannot widen this model: {message}"):
        widen(model, SHAPES[1][0])


def test_a_widened_model_takes_the_dtype_asked_for(small):
    """A checkpoint widened for a GPU in half precision is made in it, not in the small model's float32 (twice the
    memory of the paper-sized model)."""
    assert widen(small["target"], SHAPES[1][0], dtype=torch.bfloat16).dtype == torch.bfloat16
    assert widen(small["target"], SHAPES[1][0]).dtype == torch.float32


@pytest.fixture(scope="module")
def widened_pair():
    return load_pair(str(TARGET), str(DRAFTER), device="cpu", name="widened", widen=Widening(*SHAPES[0]))


def _conversations():
    chart = load_image(CHART)
    return [[Turn("Which bar is the highest?", [chart])],
            [Turn("Which bar is the highest?", [chart], answer="The highest bar is bar B, the orange one, with a "
                                                              "value of 8."), Turn("Add 5 to that number.")],
            [Turn("What is the capital of Vexia?")]]


@pytest.mark.parametrize("spec", ["M", "T", "C", "P", "tabed-MTCP"])
def test_widened_pair_gives_the_teaching_pairs_answers(teaching_pair, widened_pair, spec):
    config = GenerationConfig(max_new_tokens=40)
    for turns in _conversations():
        expected = collect(autoregressive_generate(teaching_pair, turns, config))
        small_sd = collect(speculative_generate(teaching_pair, turns, parse_spec(spec), config))
        big_sd = collect(speculative_generate(widened_pair, turns, parse_spec(spec), config))
        assert big_sd.token_ids == expected.token_ids, (spec, turns[-1].text)
        assert [b.accepted for b in big_sd.blocks] == [b.accepted for b in small_sd.blocks]


def test_suppressed_tokens_are_never_chosen(widened_pair):
    """Padding rows of a widened head must not win even when their logits are the largest."""
    head = widened_pair.target.lm_head.weight
    saved = head[700:].clone()
    turns = _conversations()[0]
    prompt = _inputs(widened_pair, turns)
    try:
        with torch.no_grad():
            top = int(widened_pair.target(input_ids=prompt.input_ids, **prompt.image_inputs).logits[0, -1].argmax())
            head[700:] = head[top] * 50  # the padding rows score 50 times the winning token (a positive logit)
            raw = widened_pair.target(input_ids=prompt.input_ids, **prompt.image_inputs).logits[0, -1]
        assert int(raw.argmax()) >= 700  # unmasked, a padding token would win
        config = GenerationConfig(max_new_tokens=12)
        for result in (collect(autoregressive_generate(widened_pair, turns, config)),
                       collect(speculative_generate(widened_pair, turns, parse_spec("tabed-MT"), config))):
            assert max(result.token_ids) < 681
    finally:
        with torch.no_grad():
            head[700:] = saved


def test_widen_command_writes_a_checkpoint_that_loads(tmp_path, capsys, teaching_pair):
    out = tmp_path / "wide-drafter"
    code = cli.main(["widen", "--model", str(DRAFTER), "--hidden", "256", "--layers", "3", "--heads", "4",
                     "--intermediate", "600", "--vocab", "720", "--out", str(out)])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["hidden"] == 256 and report["parameters"] > 1_000_000
    pair = load_pair(str(TARGET), str(out), device="cpu")
    assert pair.drafter.config.text_config.hidden_size == 256
    turns = _conversations()[0]
    config = GenerationConfig(max_new_tokens=30)
    result = collect(speculative_generate(pair, turns, parse_spec("tabed-MT"), config))
    small_sd = collect(speculative_generate(teaching_pair, turns, parse_spec("tabed-MT"), config))
    assert result.token_ids == small_sd.token_ids
    assert [b.draft for b in result.blocks] == [b.draft for b in small_sd.blocks]


def test_the_7b_preset_widens_the_teaching_pair_to_the_papers_shapes():
    preset = PRESETS["teaching-7b"]
    assert preset.needs_gpu and preset.widen == (LLAVA_7B, LVLM_68M)
    assert (LLAVA_7B.hidden, LLAVA_7B.layers, LLAVA_7B.heads, LLAVA_7B.head_dim, LLAVA_7B.intermediate,
            LLAVA_7B.vocab) == (4096, 32, 32, 128, 11008, 32064)
    assert (LVLM_68M.hidden, LVLM_68M.layers, LVLM_68M.heads, LVLM_68M.head_dim, LVLM_68M.intermediate) == (
        768, 2, 12, 64, 3072)


def test_the_7b_preset_is_refused_without_a_gpu():
    with pytest.raises(ModelLoadError, match="needs a GPU"):
        load_preset("teaching-7b", device="cpu")
