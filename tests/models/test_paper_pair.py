"""Stand-ins for the paper's checkpoints, `llava-hf/llava-1.5-7b-hf` and `mjbooo/lvlm68m`.

They cannot be downloaded here, so these folders reproduce everything about them except their size:
weights saved by transformers 4.44 (`language_model.model.*` keys), a config saying so, a processor
config saved without `patch_size`, a 32064-token vocabulary with `<image>` = 32000 and `<pad>` = 32001,
336-pixel pictures cut into 24 x 24 = 576 patches, vision features from layer -2 with the "default"
strategy, and a drafter with its own processor. The loader must take them as they are.
"""

import json

import pytest
import torch
from PIL import Image
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import (
    CLIPVisionConfig,
    LlamaConfig,
    LlavaConfig,
    LlavaForConditionalGeneration,
    PreTrainedTokenizerFast,
)

from conftest import perturbed, sharpen
from tabed.engine.config import GenerationConfig
from tabed.engine.drafter import build_rows
from tabed.engine.loop import autoregressive_generate, collect, speculative_generate
from tabed.engine.spec import parse_spec
from tabed.models.chat import Turn, encode
from tabed.models.factory import llava_processor
from tabed.models.loading import load_pair

WORDS = [f"w{i}" for i in range(40)]
IMAGE_ID, PAD_ID, VOCAB = 32000, 32001, 32064


def llama_tokenizer() -> PreTrainedTokenizerFast:
    """Word-level, laid out like LLaVA-1.5's: <unk> <s> </s> first, filler up to 31999, <image>, <pad>."""
    vocab = {token: i for i, token in enumerate(["<unk>", "<s>", "</s>", "\n", "USER:", "ASSISTANT:", "image:",
                                                 *WORDS])}
    vocab.update({f"<filler{i}>": i for i in range(len(vocab), IMAGE_ID)})
    vocab.update({"<image>": IMAGE_ID, "<pad>": PAD_ID})
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split("\n", "isolated"), pre_tokenizers.Split("</s>", "isolated"),
        pre_tokenizers.WhitespaceSplit()])
    core.decoder = decoders.WordPiece(prefix="##")
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                        unk_token="<unk>", extra_special_tokens={"image_token": "<image>"})
    tokenizer.add_special_tokens({"additional_special_tokens": ["<image>", "\n"]})
    assert tokenizer.convert_tokens_to_ids(["<image>", "<pad>"]) == [IMAGE_ID, PAD_ID]
    return tokenizer


def llava_15_config(text_width: int, text_layers: int) -> LlavaConfig:
    vision = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=2,
                              image_size=336, patch_size=14, projection_dim=32)
    text = LlamaConfig(vocab_size=VOCAB, hidden_size=text_width, intermediate_size=text_width * 4,
                       num_hidden_layers=text_layers, num_attention_heads=4, num_key_value_heads=4,
                       max_position_embeddings=2048, bos_token_id=1, eos_token_id=2, pad_token_id=PAD_ID)
    return LlavaConfig(vision_config=vision, text_config=text, image_token_index=IMAGE_ID, vision_feature_layer=-2,
                       vision_feature_select_strategy="default", pad_token_id=PAD_ID)


def legacy_key(name: str) -> str:
    """The name transformers 4.44 gave a weight (`model.language_model.x` -> `language_model.model.x`)."""
    if name.startswith("model.language_model."):
        return "language_model.model." + name.removeprefix("model.language_model.")
    if name == "lm_head.weight":
        return "language_model.lm_head.weight"
    if name.startswith("model.vision_tower."):
        return "vision_tower.vision_model." + name.removeprefix("model.vision_tower.")
    return name.removeprefix("model.")


def save_as_transformers_4_44(model, processor, folder) -> None:
    """Save as the official code did: old key layout and version, processor config without patch_size."""
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    for path in folder.glob("*.safetensors"):
        path.unlink()
    state = {legacy_key(k): v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, folder / "model.safetensors", metadata={"format": "pt"})
    config = json.loads((folder / "config.json").read_text())
    config["transformers_version"] = "4.44.0"
    (folder / "config.json").write_text(json.dumps(config))
    processor_config = json.loads((folder / "processor_config.json").read_text())
    for key in ("patch_size", "num_additional_image_tokens", "vision_feature_select_strategy"):
        processor_config.pop(key, None)
    (folder / "processor_config.json").write_text(json.dumps(processor_config))


SAVED = {}  # role -> the state dict that was saved


@pytest.fixture(scope="module")
def paper_dirs(tmp_path_factory):
    tokenizer = llama_tokenizer()
    torch.manual_seed(0)
    target = sharpen(LlavaForConditionalGeneration(llava_15_config(64, 2)).eval(), seed=0)
    drafter = perturbed(target, noise=0.004)
    root = tmp_path_factory.mktemp("paper-pair")
    for role, model in (("llava-1.5-7b-hf", target), ("lvlm68m", drafter)):
        model.generation_config.eos_token_id, model.generation_config.pad_token_id = 2, PAD_ID
        save_as_transformers_4_44(model, llava_processor(tokenizer, 336, 14), root / role)
        SAVED[role] = {k: v.clone() for k, v in model.state_dict().items()}
    return root


@pytest.fixture(scope="module")
def loaded(paper_dirs):
    lines = []
    pair = load_pair(str(paper_dirs / "llava-1.5-7b-hf"), str(paper_dirs / "lvlm68m"), device="cpu",
                     progress=lines.append)
    return pair, lines


def test_the_stand_ins_are_saved_like_the_originals(paper_dirs):
    folder = paper_dirs / "llava-1.5-7b-hf"
    from safetensors import safe_open

    with safe_open(folder / "model.safetensors", "pt") as weights:
        keys = set(weights.keys())
    assert "language_model.lm_head.weight" in keys and any(k.startswith("language_model.model.") for k in keys)
    assert any(k.startswith("vision_tower.vision_model.") for k in keys)
    assert "patch_size" not in json.loads((folder / "processor_config.json").read_text())


def test_the_loader_fixes_what_transformers_5_needs_and_says_so(loaded):
    pair, lines = loaded
    notes = [line for line in lines if "patch_size" in line]
    assert len(notes) == 2 and all("14" in line for line in notes)  # one line per processor
    assert any("transformers 4.44.0" in line for line in lines)
    assert pair.vocab_size == VOCAB and pair.tokenizer.convert_tokens_to_ids("<image>") == IMAGE_ID
    for role, model in (("llava-1.5-7b-hf", pair.target), ("lvlm68m", pair.drafter)):
        loaded_state = model.state_dict()  # every weight came from its old name, none left at its init
        assert set(loaded_state) == set(SAVED[role])
        assert all(torch.equal(loaded_state[k], v) for k, v in SAVED[role].items())


def test_a_picture_is_576_image_tokens_and_p_pools_it_to_144(loaded):
    pair, _ = loaded
    picture = Image.new("RGB", (500, 375), (90, 140, 200))
    prompt = encode(pair.drafter_processor, [Turn("w1 w2", [picture])], torch.device("cpu"), torch.float32)
    assert int((prompt.input_ids == IMAGE_ID).sum()) == 576
    with torch.inference_mode():
        rows = build_rows(pair.drafter, pair.drafter_processor.tokenizer, prompt, ("M", "T", "P"))
    counts = {row.method: int((row.input_ids == IMAGE_ID).sum()) for row in rows}
    assert counts == {"M": 576, "T": 0, "P": 144}


@pytest.mark.parametrize("spec", ["M", "T", "C", "P", "tabed-MTCP"])
def test_every_spec_equals_plain_decoding(loaded, spec):
    pair, _ = loaded
    picture = Image.new("RGB", (336, 336), (200, 60, 40))
    config = GenerationConfig(max_new_tokens=16, gamma=4)
    for turns in ([Turn("w1 w2 w3", [picture])],
                  [Turn("w1 w2 w3", [picture], answer="w4 w5 w6"), Turn("w7 w8")]):
        expected = collect(autoregressive_generate(pair, turns, config)).token_ids
        result = collect(speculative_generate(pair, turns, parse_spec(spec), config))
        assert result.token_ids == expected, spec
        assert len(expected) == 16 and max(expected) < VOCAB
