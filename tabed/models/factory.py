"""Building LLaVA-architecture pairs from configs: a tokenizer, a processor and models.

Used for the bundled teaching pair and for the tiny random pairs of the tests. What it builds is saved
with `save_pretrained` and loads with the same code as `llava-hf/llava-1.5-7b-hf`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import (
    CLIPVisionConfig,
    LlamaConfig,
    LlavaConfig,
    LlavaForConditionalGeneration,
    LlavaProcessor,
    PreTrainedTokenizerFast,
)
from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

# LLaVA-1.5's conversation format: "USER: <image>\n<prompt> ASSISTANT: <answer></s>USER: ..."
LLAVA_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'user' %}USER: "
    "{% for c in message['content'] %}{% if c['type'] == 'image' %}<image>\n{% endif %}{% endfor %}"
    "{% for c in message['content'] %}{% if c['type'] == 'text' %}{{ c['text'] }}{% endif %}{% endfor %} "
    "{% else %}ASSISTANT: "
    "{% for c in message['content'] %}{% if c['type'] == 'text' %}{{ c['text'] }}{% endif %}{% endfor %}"
    "</s>{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}ASSISTANT:{% endif %}"
)
SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<pad>", "<image>", "\n"]


def bpe_tokenizer(texts: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """A Llama-style BPE tokenizer trained on `texts`: words keep a leading "▁", digits split one
    by one (so numbers are read and written digit by digit), punctuation stands alone, and every
    sequence starts with <s>."""
    core = Tokenizer(models.BPE(unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always"),
        pre_tokenizers.Punctuation(),
        pre_tokenizers.Digits(individual_digits=True),
    ])
    core.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False, min_frequency=2,
        initial_alphabet=list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,:;!?'-▁"),
    )
    core.train_from_iterator(texts, trainer=trainer)
    core.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A $B", special_tokens=[("<s>", core.token_to_id("<s>"))]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>",
        extra_special_tokens={"image_token": "<image>"},
    )
    tokenizer.add_special_tokens({"additional_special_tokens": ["<image>", "\n"]})
    return tokenizer


def llava_processor(tokenizer: PreTrainedTokenizerFast, image_size: int, patch_size: int) -> LlavaProcessor:
    image_processor = CLIPImageProcessorPil(
        size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size}
    )
    return LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=patch_size,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=LLAVA_CHAT_TEMPLATE,
    )


@dataclass(frozen=True)
class LlavaSize:
    """The shape of a small LLaVA: CLIP vision tower, projector, Llama language model."""

    text_layers: int = 2
    text_width: int = 64
    text_heads: int = 4
    vision_layers: int = 2
    vision_width: int = 32
    vision_heads: int = 2
    image_size: int = 32
    patch_size: int = 8
    context: int = 512


def llava_config(size: LlavaSize, tokenizer: PreTrainedTokenizerFast) -> LlavaConfig:
    vision = CLIPVisionConfig(
        hidden_size=size.vision_width,
        intermediate_size=size.vision_width * 4,
        num_hidden_layers=size.vision_layers,
        num_attention_heads=size.vision_heads,
        image_size=size.image_size,
        patch_size=size.patch_size,
    )
    text = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=size.text_width,
        intermediate_size=size.text_width * 4,
        num_hidden_layers=size.text_layers,
        num_attention_heads=size.text_heads,
        num_key_value_heads=size.text_heads,
        max_position_embeddings=size.context,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        vision_feature_layer=-1,
        vision_feature_select_strategy="default",
    )


def random_llava(size: LlavaSize, tokenizer: PreTrainedTokenizerFast, seed: int = 0) -> LlavaForConditionalGeneration:
    """A LLaVA model with random weights (seeded), in eval mode."""
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(llava_config(size, tokenizer))
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model.eval()
