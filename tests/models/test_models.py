"""Loading pairs from folders, presets, and the errors a user meets."""

import pytest
import torch
from PIL import Image
from transformers import LlamaConfig, LlamaForCausalLM

from conftest import SIZE, WORDS, word_tokenizer
from tabed.engine.spec import parse_spec
from tabed.errors import InputError, ModelLoadError, VocabularyMismatchError
from tabed.models import chat
from tabed.models.chat import Turn, chat_messages, load_image, to_rgb, validate
from tabed.models.factory import llava_processor, random_llava
from tabed.models.loading import load_pair, load_preset
from tabed.models.presets import PRESETS, default_preset


@pytest.fixture(scope="module")
def folders(pair_dirs):
    root = pair_dirs
    other = word_tokenizer([f"x{i}" for i in range(40)])
    random_llava(SIZE, other).save_pretrained(root / "foreign")
    llava_processor(other, SIZE.image_size, SIZE.patch_size).save_pretrained(root / "foreign")
    tokenizer = word_tokenizer(WORDS)
    text_only = LlamaForCausalLM(LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32,
                                             num_hidden_layers=1, num_attention_heads=2))
    text_only.save_pretrained(root / "text-only")
    tokenizer.save_pretrained(root / "text-only")
    return root


def test_load_a_local_pair(folders):
    lines = []
    pair = load_pair(str(folders / "target"), str(folders / "drafter"), progress=lines.append)
    assert pair.device == torch.device("cpu") and pair.dtype == torch.float32
    assert pair.vocab_size == len(pair.tokenizer) and pair.eos_token_ids == {pair.tokenizer.eos_token_id}
    assert type(pair.target).__name__ == "LlavaForConditionalGeneration"
    assert any("target" in line for line in lines) and lines[-1] == "models ready"


def test_missing_folder(folders):
    with pytest.raises(ModelLoadError, match="drafter folder not found"):
        load_pair(str(folders / "target"), str(folders / "nowhere"))


def test_different_vocabularies_are_refused(folders):
    with pytest.raises(VocabularyMismatchError, match="do not share a vocabulary"):
        load_pair(str(folders / "target"), str(folders / "foreign"))


def test_text_only_model_is_refused(folders):
    with pytest.raises(ModelLoadError, match="not an image-text-to-text model"):
        load_pair(str(folders / "text-only"), str(folders / "drafter"))


def test_unknown_hub_id_offline():
    with pytest.raises(ModelLoadError, match="cannot load the target"):
        load_pair("no-such-owner/no-such-model", "no-such-owner/other")


def test_presets(monkeypatch):
    monkeypatch.delenv("TABED_PRESET", raising=False)
    assert default_preset() == "teaching"
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    assert default_preset() == "teaching-7b"  # on a GPU: the teaching pair at the 7B pair's cost
    monkeypatch.setenv("TABED_PRESET", "llava-1.5-7b")
    assert default_preset() == "llava-1.5-7b"
    assert PRESETS["llava-1.5-7b"].target == "llava-hf/llava-1.5-7b-hf"
    assert PRESETS["llava-1.5-7b"].drafter == "mjbooo/lvlm68m"
    monkeypatch.setenv("TABED_PRESET", "llava-9000")
    with pytest.raises(ModelLoadError, match="not a preset"):
        default_preset()
    with pytest.raises(ModelLoadError, match="unknown preset"):
        load_preset("nope")


@pytest.mark.parametrize("typed, name, mode", [
    ("tm", "MT", "static"),
    ("TABED-pcmt", "tabed-MTCP", "tabed"),
    ("C", "C", "single"),
    ("T", "T", "single"),
    (" tabed-MT ", "tabed-MT", "tabed"),  # as a list split at commas leaves it ("M, tabed-MT")
    ("Tabed-tm", "tabed-MT", "tabed"),
    ("tabed-MN", "tabed-MN", "tabed"),  # N is weighed beside M: two methods, one of them a drafter row
    ("MN", "MN", "static"),  # a uniform mix of M and N, not M alone
    ("NM", "MN", "static"),
])
def test_a_drafting_spec_reads_its_methods_and_its_ensemble(typed, name, mode):
    spec = parse_spec(typed)
    assert (spec.name, spec.mode) == (name, mode)


UNKNOWN_SPEC = "unknown drafting spec .*use letters from M, T, C, P, N"


@pytest.mark.parametrize("typed, message", [
    *[(typed, UNKNOWN_SPEC) for typed in ["", "  ", "tabed-", "X", "MM", "tabed-MM", "tabed-MX", "MTQ"]],
    ("tabed-M", "TABED needs at least two methods to weigh"),
    ("N", "N \\(n-gram lookup\\) drafts beside a model method: add M, T, C or P"),
    ("tabed-N", "N \\(n-gram lookup\\) drafts beside a model method: add M, T, C or P"),
])
def test_a_bad_drafting_spec_is_refused_with_what_to_type(typed, message):
    with pytest.raises(InputError, match=message):
        parse_spec(typed)


def test_a_huge_picture_is_refused_in_one_line_that_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(chat, "MAX_IMAGE_PIXELS", 63)  # an 8 x 8 picture is past it
    Image.new("RGB", (8, 8)).save(tmp_path / "huge.png")
    with pytest.raises(InputError, match=r"^image too large: .*huge.png is 8x8 \(limit"):
        load_image(tmp_path / "huge.png")


def test_a_turn_of_pictures_alone_is_a_question_and_a_turn_of_nothing_is_refused(image):
    validate([Turn("", [image])])  # "what is this?" left unsaid
    with pytest.raises(InputError, match="turn 1 is empty: type a prompt"):
        validate([Turn("  ", [])])
    with pytest.raises(InputError, match="the last turn already has an answer"):
        validate([Turn("q", [image], answer="a")])


def test_a_turns_pictures_come_before_its_words_as_llava_was_taught():
    """LLaVA-1.5 was trained on "USER: <image>\\n question": the chat template is given the pictures first."""
    picture = Image.new("RGB", (4, 4))
    assert chat_messages([Turn("q", [picture, picture], answer="a"), Turn("r")]) == [
        {"role": "user", "content": [{"type": "image"}, {"type": "image"}, {"type": "text", "text": "q"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "a"}]},
        {"role": "user", "content": [{"type": "text", "text": "r"}]}]


def test_image_loading(tmp_path):
    with pytest.raises(InputError, match="not found"):
        load_image(tmp_path / "missing.png")
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n not really a png")
    with pytest.raises(InputError, match="cannot read image"):
        load_image(broken)
    Image.new("RGBA", (8, 8), (255, 0, 0, 0)).save(tmp_path / "clear.png")
    assert load_image(tmp_path / "clear.png").getpixel((0, 0)) == (255, 255, 255)


@pytest.mark.parametrize("mode", ["RGBA", "LA", "L", "P", "I;16", "I", "F", "1", "CMYK"])
def test_every_image_mode_becomes_rgb(mode):
    image = to_rgb(Image.new(mode, (5, 4)))
    assert image.mode == "RGB" and image.size == (5, 4)


def _palette_with_a_clear_colour() -> Image.Image:
    """A palette picture whose colour 0 (black) is marked transparent, as a GIF or an 8-bit PNG marks it."""
    image = Image.new("P", (4, 4), 0)
    image.putpalette([0, 0, 0, 200, 30, 30] + [0, 0, 0] * 254)
    image.info["transparency"] = 0
    return image


@pytest.mark.parametrize("image, expected", [
    (Image.new("I;16", (4, 4), 0x8000), (128, 128, 128)),  # a 16-bit grey of one half: half of 8 bits
    (Image.new("I;16", (4, 4), 0xFFFF), (255, 255, 255)),
    (Image.new("I", (4, 4), 0x8000), (128, 128, 128)),
    (Image.new("F", (4, 4), 0.5), (127, 127, 127)),  # floats 0 to 1 (a depth map, a mask)
    (Image.new("LA", (4, 4), (0, 0)), (255, 255, 255)),  # clear: on white, as a browser shows it
    (Image.new("LA", (4, 4), (40, 255)), (40, 40, 40)),
    (Image.new("PA", (4, 4), (1, 0)), (255, 255, 255)),
    (_palette_with_a_clear_colour(), (255, 255, 255)),
], ids=["16-bit-grey", "16-bit-white", "32-bit-grey", "float-grey", "grey-clear", "grey-opaque", "palette-alpha-clear",
        "palette-transparency"])
def test_every_image_mode_keeps_what_it_shows(image, expected):
    """The picture a model sees is the one a viewer sees: a 16-bit or float grey keeps its brightness (not
    clipped to white or black), a clear pixel is white whatever colour is under it."""
    assert to_rgb(image).getpixel((0, 0)) == expected
