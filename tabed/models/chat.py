"""Conversations (one or more user turns, each with or without images) and their encoding.

The prompt goes through each model's own processor and chat template, exactly as a user of
transformers would build it; the drafting rows are then derived from the drafter's encoding.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from PIL import Image, UnidentifiedImageError

from ..errors import InputError

if TYPE_CHECKING:
    from transformers import ProcessorMixin

MAX_IMAGE_PIXELS = 64_000_000  # decompression-bomb guard; larger images are refused, not resized


@dataclass
class Turn:
    """One user turn; `answer` is the assistant's reply for earlier turns, None for the turn to answer."""

    text: str
    images: list[Image.Image] = field(default_factory=list)
    answer: str | None = None


def blank_question() -> list[Turn]:
    """A question about a plain grey picture: what a pair warms up on and has its quiet costs measured on (a new
    list each time, since a conversation's turns take their answers)."""
    return [Turn("Describe the picture.", [Image.new("RGB", (64, 64), (128, 128, 128))])]


def to_rgb(image: Image.Image) -> Image.Image:
    """Any PIL image (RGBA, palette, grayscale, 16-bit) as 8-bit RGB; transparency goes on white."""
    if image.mode in ("I;16", "I;16B", "I;16L", "I"):
        image = image.point(lambda v: v * (1 / 256)).convert("L")
    elif image.mode == "F":
        image = image.point(lambda v: v * 255).convert("L")
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        image = Image.alpha_composite(background, rgba)
    return image.convert("RGB")


def load_image(path: str | os.PathLike) -> Image.Image:
    """Open an image file as RGB, with a one-line error for missing, unreadable or huge files."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise InputError(f"image not found: {path}")
    try:
        with Image.open(path) as opened:
            if opened.width * opened.height > MAX_IMAGE_PIXELS:
                raise InputError(
                    f"image too large: {path} is {opened.width}x{opened.height} "
                    f"(limit {MAX_IMAGE_PIXELS // 1_000_000} megapixels)"
                )
            opened.load()
            return to_rgb(opened)
    except (UnidentifiedImageError, OSError, Image.DecompressionBombError, SyntaxError, ValueError) as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(f"cannot read image {path}: {exc}") from None


def validate(turns: list[Turn]) -> None:
    """A conversation must end with an unanswered user turn; earlier turns carry their answers."""
    if not turns:
        raise InputError("the conversation is empty: give at least one prompt")
    for index, turn in enumerate(turns):
        if not turn.text.strip() and not turn.images:
            raise InputError(f"turn {index + 1} is empty: type a prompt")
        last = index == len(turns) - 1
        if last and turn.answer is not None:
            raise InputError("the last turn already has an answer: add a new prompt to continue")
        if not last and turn.answer is None:
            raise InputError(f"turn {index + 1} has no answer: only the last turn is answered")


def chat_messages(turns: list[Turn]) -> list[dict]:
    """The conversation in the content-list format that transformers' chat templates take."""
    messages = []
    for turn in turns:
        content = [{"type": "image"} for _ in turn.images] + [{"type": "text", "text": turn.text}]
        messages.append({"role": "user", "content": content})
        if turn.answer is not None:
            messages.append({"role": "assistant", "content": [{"type": "text", "text": turn.answer}]})
    return messages


@dataclass
class EncodedPrompt:
    """A prompt as one model sees it: token ids (1, L) and the image inputs its forward needs."""

    input_ids: torch.Tensor
    image_inputs: dict[str, torch.Tensor]

    @property
    def length(self) -> int:
        return int(self.input_ids.shape[1])


def images_of(turns: list[Turn]) -> list[Image.Image]:
    return [image for turn in turns for image in turn.images]


def encode(processor: ProcessorMixin, turns: list[Turn], device: torch.device, dtype: torch.dtype) -> EncodedPrompt:
    """Apply the processor's chat template and image processing to the whole conversation."""
    validate(turns)
    text = processor.apply_chat_template(chat_messages(turns), add_generation_prompt=True, tokenize=False)
    images = images_of(turns)
    batch = processor(images=images or None, text=text, return_tensors="pt")
    image_inputs = {}
    for key, value in batch.items():
        if key in ("input_ids", "attention_mask") or not isinstance(value, torch.Tensor):
            continue
        value = value.to(device)
        image_inputs[key] = value.to(dtype) if value.is_floating_point() else value
    return EncodedPrompt(input_ids=batch["input_ids"].to(device), image_inputs=image_inputs)
