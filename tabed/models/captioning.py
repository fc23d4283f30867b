"""Captioners for caption drafting (C): each image placeholder becomes "image: <caption>".

The paper captions with Florence-2-large-ft (task `<CAPTION>`); a pair without a captioner asks its
own drafter, in multimodal mode, for a one-sentence description.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import torch
from PIL import Image

from ..errors import ModelLoadError
from . import chat

if TYPE_CHECKING:
    from .pair import ModelPair

CAPTION_PROMPT = "Describe the image in one sentence."
CAPTION_TOKENS = 32


class Captioner(Protocol):
    def caption(self, images: list[Image.Image]) -> list[str]: ...


class DrafterCaptioner:
    """The drafter itself, shown each image alone and asked for a short description (greedy)."""

    def __init__(self, model, processor, device: torch.device, dtype: torch.dtype) -> None:
        self.model, self.processor, self.device, self.dtype = model, processor, device, dtype

    @torch.inference_mode()
    def caption(self, images: list[Image.Image]) -> list[str]:
        captions = []
        for image in images:
            turns = [chat.Turn(CAPTION_PROMPT, [image])]
            prompt = chat.encode(self.processor, turns, self.device, self.dtype)
            output = self.model.generate(
                input_ids=prompt.input_ids,
                **prompt.image_inputs,
                max_new_tokens=CAPTION_TOKENS,
                do_sample=False,
            )
            new = output[0, prompt.length:]
            captions.append(self.processor.tokenizer.decode(new, skip_special_tokens=True).strip())
        return captions


class Florence2Captioner:
    """Florence-2 (native in transformers 5), task `<CAPTION>`, loaded on first use."""

    def __init__(self, model_id: str, device: torch.device, dtype: torch.dtype) -> None:
        self.model_id, self.device, self.dtype = model_id, device, dtype
        self.model = self.processor = None

    def _load(self) -> None:
        from transformers import AutoModelForImageTextToText, AutoProcessor

        try:
            self.processor = AutoProcessor.from_pretrained(self.model_id)
            model = AutoModelForImageTextToText.from_pretrained(self.model_id, dtype=self.dtype)
        except (OSError, ValueError) as exc:
            raise ModelLoadError(f"cannot load the captioner {self.model_id!r}: {str(exc).splitlines()[0]}") from None
        self.model = model.to(self.device).eval()

    @torch.inference_mode()
    def caption(self, images: list[Image.Image]) -> list[str]:
        if self.model is None:
            self._load()
        captions = []
        for image in images:
            inputs = self.processor(text="<CAPTION>", images=image, return_tensors="pt").to(self.device)
            inputs = {k: v.to(self.dtype) if v.is_floating_point() else v for k, v in inputs.items()}
            output = self.model.generate(**inputs, max_new_tokens=CAPTION_TOKENS, do_sample=False, num_beams=3)
            text = self.processor.batch_decode(output, skip_special_tokens=True)[0]
            captions.append(text.strip())
        return captions


def captioner_for(pair: ModelPair) -> Captioner:
    """The pair's captioner (Florence-2 for the paper presets, else the drafter), made once per pair."""
    if pair.caption_model is None:
        if pair.captioner:
            pair.caption_model = Florence2Captioner(pair.captioner, pair.device, pair.dtype)
        else:
            pair.caption_model = DrafterCaptioner(pair.drafter, pair.drafter_processor, pair.device, pair.dtype)
    return pair.caption_model
