"""How many tokens a block drafts: a fixed γ (the paper's setting), or adaptive up to a cap.

Adaptive drafting stops a block after a draft token the ensemble was unsure of: when its probability
under the ensemble (every method's opinion, weighted) falls below a threshold, the token is probably
rejected, and drafting past it is wasted work. The threshold starts where transformers' assisted
generation starts (0.4) and is learned from this answer's own verifications: each verified draft token
is a (confidence, accepted) example, and the threshold is the one that would have separated them at the
least cost, a missed continuation costing `MISS_COST` times a wasted draft step (in rates, as on an
ROC curve, so that a run of accepted tokens does not drown out the few rejections).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import InputError

AUTO_CAP = 20  # adaptive blocks draft at most this many tokens (transformers drafts up to 20 too)
INITIAL_THRESHOLD = 0.4
MISS_COST = 3.0  # stopping before a token that would have been accepted, against drafting one that is not
HISTORY = 512  # verified draft tokens the threshold is learned from (the most recent)
MIN_EXAMPLES = 6

STOP_REASONS = {
    "fixed": "drafted the fixed γ",
    "cap": "drafted up to the cap",
    "unsure": "the ensemble was unsure of the last draft",
    "budget": "max new tokens reached",
    "image": "an image placeholder was drafted: the first block's drafts ride on the prompt's pass",
}


def parse_gamma(text: str | int) -> tuple[int, bool]:
    """`auto` (adaptive, cap AUTO_CAP), `auto:N` (adaptive, cap N) or `N` (fixed) -> (γ or cap, adaptive)."""
    raw = str(text).strip().lower()
    adaptive = raw.startswith("auto")
    number = raw.removeprefix("auto").removeprefix(":") if adaptive else raw
    if adaptive and not number:
        return AUTO_CAP, True
    try:
        return int(number), adaptive
    except ValueError:
        raise InputError(f"gamma must be 'auto', 'auto:N' or a number of draft tokens, got {text!r}") from None


@dataclass
class DraftLength:
    """One answer's draft-length policy: γ (or the cap) and, when adaptive, the learned threshold."""

    gamma: int
    adaptive: bool
    threshold: float = INITIAL_THRESHOLD
    examples: list[tuple[float, bool]] = field(default_factory=list)

    def keep_drafting(self, confidence: float) -> bool:
        return not self.adaptive or confidence >= self.threshold

    def learn(self, confidences: list[float], accepted: int) -> None:
        """Record one verified block: its draft tokens' confidences and how many were accepted. Tokens
        after the first rejection were never judged by the target and are left out."""
        if not self.adaptive:
            return
        judged = confidences[:accepted + 1]
        self.examples += [(c, i < accepted) for i, c in enumerate(judged)]
        del self.examples[:-HISTORY]
        self.threshold = learned_threshold(self.examples, self.threshold)


def learned_threshold(examples: list[tuple[float, bool]], current: float) -> float:
    """The confidence threshold with the least cost fpr + MISS_COST * fnr over the examples (drafting
    continues at or above it); `current` until there are enough examples of both outcomes."""
    positives = sum(ok for _, ok in examples)
    negatives = len(examples) - positives
    if len(examples) < MIN_EXAMPLES or not positives or not negatives:
        return current
    ordered = sorted(examples, key=lambda e: e[0])
    best_cost, best = float("inf"), current
    below_pos = below_neg = 0  # examples under the candidate threshold
    for index, (confidence, _) in enumerate(ordered):
        if index == 0 or confidence != ordered[index - 1][0]:
            cost = (negatives - below_neg) / negatives + MISS_COST * below_pos / positives
            if cost < best_cost:  # the lowest of equal costs: the longest drafts
                best_cost, best = cost, confidence
        below_pos += ordered[index][1]
        below_neg += not ordered[index][1]
    cost = MISS_COST * 1.0  # above every example: nothing would be drafted past its first token
    return best if best_cost <= cost else ordered[-1][0] + 1e-6
