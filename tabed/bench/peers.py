"""The peers: transformers' own assisted generation on the same pair, as its users run it and in the
paper's setting, and prompt lookup decoding."""

from __future__ import annotations

import torch

from ..engine.config import GenerationConfig
from ..engine.sampling import is_greedy
from ..engine.session import Clock
from ..models.chat import Turn, encode
from ..models.pair import ModelPair

PEERS = ("peer-default", "peer-gamma5", "peer-lookup")  # transformers: as it comes, the paper's γ, prompt lookup
PEER_NOTE = ("peers: transformers assisted generation, `target.generate(assistant_model=drafter)`: `peer-default` "
             "exactly as it comes (the drafter's generation config: in transformers 5, 20 draft tokens, constant "
             "schedule, drafting stops when the drafter's confidence falls below 0.4), `peer-gamma5` with 5 draft "
             "tokens per block and a constant schedule, no confidence stop (the paper's setting), `peer-lookup` prompt "
             "lookup decoding (`prompt_lookup_num_tokens=5`, no drafter; where transformers refuses a case, e.g. "
             "image inputs in 5.23, the case is counted as failed and the peer is left out of that scenario's "
             "comparison). In transformers 5 "
             "a vision-language assistant drafts without the image: the peers' drafter is image-blind, like T. "
             "Their block efficiency is tokens per target forward, the prefill included. speedup_vs_peer is "
             "against the fastest peer that ran every case of the scenario.")


def is_peer(spec: str) -> bool:
    return spec in PEERS


PEER_SETTINGS = ("num_assistant_tokens", "num_assistant_tokens_schedule", "assistant_confidence_threshold")


def peer_generate(pair: ModelPair, turns: list[Turn], config: GenerationConfig,
                  peer: str = "peer-default") -> tuple[list[int], float, int]:
    """Transformers' assisted generation on the pair: token ids, walltime, target forwards."""
    prompt = encode(pair.target_processor, turns, pair.device, pair.dtype)
    forwards = []
    hook = pair.target.register_forward_pre_hook(lambda *_: forwards.append(1))
    settings = pair.drafter.generation_config
    saved = tuple(getattr(settings, name) for name in PEER_SETTINGS)
    if peer == "peer-gamma5":
        settings.num_assistant_tokens, settings.num_assistant_tokens_schedule = 5, "constant"
        settings.assistant_confidence_threshold = 0.0
    drafting = {"prompt_lookup_num_tokens": 5} if peer == "peer-lookup" else {"assistant_model": pair.drafter}
    sample = not is_greedy(config.temperature)
    options = {"do_sample": True, "temperature": config.temperature, "top_p": config.top_p} if sample else {
        "do_sample": False}
    try:
        if sample:
            torch.manual_seed(config.seed)
        clock = Clock(pair.device)
        with torch.inference_mode():
            out = pair.target.generate(
                input_ids=prompt.input_ids, attention_mask=torch.ones_like(prompt.input_ids), **prompt.image_inputs,
                **drafting, max_new_tokens=config.max_new_tokens,
                pad_token_id=pair.tokenizer.pad_token_id, **options)
        seconds = clock.elapsed()
    finally:
        hook.remove()
        for name, value in zip(PEER_SETTINGS, saved, strict=True):
            setattr(settings, name, value)
    return out[0, prompt.length:].tolist(), seconds, len(forwards)
