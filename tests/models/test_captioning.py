"""Caption drafting (C): the Florence-2 captioner path, with a tiny random Florence-2 built offline."""

import pytest
import torch
from PIL import Image
from transformers import Florence2Config, Florence2ForConditionalGeneration, Florence2Processor
from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

from conftest import word_tokenizer
from tabed.engine.config import GenerationConfig
from tabed.engine.loop import collect, speculative_generate
from tabed.engine.spec import parse_spec
from tabed.errors import ModelLoadError
from tabed.models.captioning import DrafterCaptioner, Florence2Captioner
from tabed.models.chat import Turn

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def florence_dir(tmp_path_factory):
    tokenizer = word_tokenizer(["What", "does", "the", "image", "describe?", "a", "red", "square"])
    image_processor = CLIPImageProcessorPil(size={"height": 64, "width": 64}, do_center_crop=False)
    image_processor.image_seq_length = 65  # (64 / 4 / 2)^2 patches + 1 pooled token
    processor = Florence2Processor(image_processor=image_processor, tokenizer=tokenizer)
    vision = dict(depths=(1, 1), patch_size=(7, 3), patch_stride=(4, 2), patch_padding=(3, 1),
                  patch_prenorm=(False, True), embed_dim=(16, 32), num_heads=(2, 2), num_groups=(2, 2),
                  window_size=4, projection_dim=32)
    text = dict(vocab_size=len(tokenizer), d_model=32, encoder_layers=1, decoder_layers=1,
                encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                max_position_embeddings=128, bos_token_id=tokenizer.bos_token_id,
                eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                decoder_start_token_id=tokenizer.eos_token_id)
    torch.manual_seed(0)
    model = Florence2ForConditionalGeneration(
        Florence2Config(vision_config=vision, text_config=text, image_token_id=tokenizer.image_token_id))
    path = tmp_path_factory.mktemp("florence")
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path


def test_florence2_captioner_feeds_the_caption_row(florence_dir, pair, image):
    captioner = Florence2Captioner(str(florence_dir), CPU, torch.float32)
    captions = captioner.caption([image])
    assert len(captions) == 1 and isinstance(captions[0], str)
    config = GenerationConfig(max_new_tokens=8, gamma=3)
    result = collect(speculative_generate(pair, [Turn("w1 w2", [image])], parse_spec("tabed-MTC"), config,
                                          captioner=captioner))
    assert result.captions == captions
    assert result.metrics.caption_s > 0


def test_drafter_captioner_one_caption_per_image(pair, image, other_image):
    captioner = DrafterCaptioner(pair.drafter, pair.drafter_processor, CPU, torch.float32)
    assert len(captioner.caption([image, other_image])) == 2


def test_missing_captioner_is_a_clear_error(tmp_path):
    with pytest.raises(ModelLoadError, match="cannot load the captioner"):
        Florence2Captioner(str(tmp_path / "nothing"), CPU, torch.float32).caption([Image.new("RGB", (8, 8))])
