"""The bundled teaching pair in assets/: loads offline with the project's loader and answers correctly."""

import json

import pytest

from tabed.engine.config import GenerationConfig
from tabed.engine.loop import autoregressive_generate, collect, speculative_generate
from tabed.engine.spec import parse_spec
from tabed.models.chat import Turn, load_image
from tabed.models.presets import ASSETS
from tabed.teaching import evaluate, train, world

MODELS = ASSETS / "models"
EXAMPLES = ASSETS / "examples"


def test_shipped_weights_are_small_and_half_precision():
    files = [path for path in MODELS.rglob("*") if path.is_file()]
    assert sum(path.stat().st_size for path in files) < 60_000_000
    assert (MODELS / "README.md").exists()
    for role in ("target", "drafter"):
        config = json.loads((MODELS / role / "config.json").read_text())
        assert config["model_type"] == "llava"
        assert config.get("dtype", config.get("torch_dtype")) == "float16"


def test_the_pair_shares_one_tokenizer_and_the_llava_chat_format(teaching_pair):
    assert teaching_pair.target_processor.tokenizer.get_vocab() == teaching_pair.drafter_processor.tokenizer.get_vocab()
    text = teaching_pair.target_processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Hi"}]}],
        add_generation_prompt=True, tokenize=False)
    assert text == "USER: <image>\nHi ASSISTANT:"


def test_target_is_several_times_larger_than_the_drafter(teaching_pair):
    target = sum(p.numel() for p in teaching_pair.target.parameters())
    drafter = sum(p.numel() for p in teaching_pair.drafter.parameters())
    assert target > 10 * drafter


@pytest.mark.parametrize("spec", ["M", "tabed-MT"])
def test_known_chart_example_is_answered_right_by_both_decoders(teaching_pair, spec):
    turns = [Turn("Which bar is the highest?", [load_image(EXAMPLES / "chart.png")])]
    config = GenerationConfig(max_new_tokens=40)
    expected = "The highest bar is bar B, the orange one, with a value of 8."
    plain = collect(autoregressive_generate(teaching_pair, turns, config))
    fast = collect(speculative_generate(teaching_pair, turns, parse_spec(spec), config))
    assert plain.text == expected
    assert fast.token_ids == plain.token_ids
    assert fast.metrics.block_efficiency > 2.0


def test_known_text_example_and_follow_up(teaching_pair):
    config = GenerationConfig(max_new_tokens=40)
    first = collect(autoregressive_generate(teaching_pair, [Turn("What is the capital of Japan?")], config))
    assert first.text == "The capital of Japan is Tokyo, a city in Asia."
    turns = [Turn("What is the capital of Japan?", answer=first.text), Turn("Are you sure?")]
    second = collect(speculative_generate(teaching_pair, turns, parse_spec("tabed-MT"), config))
    assert second.text == "Yes, I am sure. The capital of Japan is Tokyo, a city in Asia."


def test_held_out_image_questions_target_right_drafter_weaker(teaching_pair):
    dialogues = world.split("image", train.EVAL_SEED, 20)
    target = evaluate.accuracy(teaching_pair.target, teaching_pair.target_processor, dialogues)
    drafter = evaluate.accuracy(teaching_pair.drafter, teaching_pair.drafter_processor, dialogues)
    assert target >= 0.9
    assert 0.3 <= drafter <= target - 0.1  # far above chance, clearly below the target


def test_the_pair_shows_the_papers_scenario_dependence(teaching_pair):
    """M wins on in-world image questions; T wins on sets of odd pictures, where the drafter's reading
    breaks down (the paper: M 1.19 against T 2.05 on out-of-distribution image sets)."""
    image = world.split("image", train.EVAL_SEED, 12)
    odd = world.split("odd", train.EVAL_SEED, 16)
    be = {(scenario, spec): evaluate.block_efficiency(teaching_pair, dialogues, spec)
          for scenario, dialogues in (("image", image), ("odd", odd)) for spec in ("M", "T")}
    assert be["image", "M"] > 1.2 * be["image", "T"]
    assert be["odd", "T"] > 1.1 * be["odd", "M"]
