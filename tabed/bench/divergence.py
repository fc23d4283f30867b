"""Where an answer left plain decoding's, and how close the target's choice was there.

Greedy speculative decoding gives the target's own tokens, but in half precision a verify of many
tokens and a one-token step round differently: at a near-tie either token may win. A gap of a few
thousandths of a logit is that rounding; a gap of a logit or more is a bug. The gap is read from one
forward of the target over the prompt and the tokens both answers share.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..engine.session import TargetSession
from ..models import chat
from ..models.pair import ModelPair


@dataclass(frozen=True)
class Divergence:
    index: int  # the first token at which the answers differ
    plain: str  # plain decoding's token there ("" where its answer had ended)
    other: str  # the other answer's token there ("" where it had ended)
    gap: float | None  # the target's logit for plain's token minus for the other's; None where one had ended


def first_difference(a: list[int], b: list[int]) -> int | None:
    """The first index where the two differ (the shorter one's length where one is the other's prefix)."""
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


def divergence(pair: ModelPair, turns: list[chat.Turn], plain: list[int], other: list[int]) -> Divergence | None:
    """The first difference of `other` from plain decoding's answer and the target's own margin there."""
    index = first_difference(plain, other)
    if index is None:
        return None
    decode = pair.target_processor.tokenizer.decode
    theirs = [plain[index] if index < len(plain) else None, other[index] if index < len(other) else None]
    names = ["" if token is None else decode([token]) for token in theirs]
    if None in theirs:
        return Divergence(index, *names, gap=None)
    prompt = chat.encode(pair.target_processor, turns, pair.device, pair.dtype)
    logits = TargetSession(pair.backend("target")).prefill(prompt, drafts=plain[:index])[-1].float()
    return Divergence(index, *names, gap=float(logits[theirs[0]] - logits[theirs[1]]))
