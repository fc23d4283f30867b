"""How many tokens a block drafts: a fixed γ (the paper's setting), or adaptive up to a cap.

Adaptive drafting keeps drafting while the block is likely to survive verification. Each draft token's
confidence (its probability under the ensemble: every method's opinion, weighted) is turned into an
acceptance estimate, calibrated on this answer's own verifications: every draft token the target judged
is a (confidence, accepted) example, counted in its confidence bin, starting from the confidence itself
as the prior. The product of the estimates over the block is the probability that every draft so far is
accepted; once it falls below the minimum the block stops. The minimum is high, for two reasons: a draft
is not free, and where misses cluster, as on facts the drafter was never taught, the calibration learns
too slowly and the estimate stays optimistic. How high depends on what a draft costs against a target
step, so on the device (`min_survival_on`). On a 2-core CPU a drafted token costs about a fifth of a plain
step (a drafter step, and the longer verify it makes), and blocks that stop while their chance of
surviving whole is still 0.8 ran fastest on the bench suite (`assets/bench/README.md`). On a GPU it costs
a fifteenth, and the minimum stays a coin flip (0.5), chosen when a draft cost a tenth on the CPU too and
not swept on a GPU since. The first block goes on to a lower minimum: its drafts ride on the prompt's
pass, which verifies them at no extra cost, and it has no verifications to be calibrated on. A drafter
that is sure and right drafts long blocks; one that is sure and wrong learns that its confidence means
less; under sampling at a high temperature blocks stay short.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from ..errors import InputError

AUTO_CAP = 20  # adaptive blocks draft at most this many tokens (transformers drafts up to 20 too)
MIN_SURVIVAL = 0.5  # stop once the block's estimated chance of being accepted whole falls below this (a GPU)
CPU_MIN_SURVIVAL = 0.8  # the same on a CPU, where a draft costs more against a target step
FIRST_MIN_SURVIVAL = 0.2  # the same for the first block, which rides on the prompt's pass
PRIOR = 2.0  # examples' worth of weight on the confidence itself, in each bin
BIN_EDGES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)


def min_survival_on(device_type: str) -> float:
    """The minimum survival a block drafts to by default on a device ("cpu", "cuda", ...)."""
    return CPU_MIN_SURVIVAL if device_type == "cpu" else MIN_SURVIVAL


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
    """One answer's draft-length policy: γ (or the cap) and, when adaptive, the calibration it learns."""

    gamma: int
    adaptive: bool
    min_survival: float = MIN_SURVIVAL
    first_min_survival: float = FIRST_MIN_SURVIVAL
    threshold: float = MIN_SURVIVAL  # the current block's minimum
    judged: list[int] = field(default_factory=lambda: [0] * (len(BIN_EDGES) + 1))
    accepted: list[int] = field(default_factory=lambda: [0] * (len(BIN_EDGES) + 1))
    survival: float = 1.0  # the current block's estimated chance that every draft so far is accepted

    def acceptance(self, confidence: float) -> float:
        """The chance a draft of this confidence is accepted, from this answer's verifications so far."""
        b = bisect.bisect_right(BIN_EDGES, confidence)
        return (self.accepted[b] + PRIOR * confidence) / (self.judged[b] + PRIOR)

    def start_block(self, minimum: float) -> None:
        """A new block, drafted while its chance of surviving whole is at least `minimum` (`min_survival`,
        or `first_min_survival` for the first block: `drafts.AfterPrompt`)."""
        self.survival = 1.0
        self.threshold = minimum

    def keep_drafting(self, confidence: float) -> bool:
        """After a draft of this confidence: whether drafting the next token is worth it."""
        return self.keep_growing(self.survival * self.acceptance(confidence))

    def keep_growing(self, survival: float) -> bool:
        """After a draft position whose drafts have this chance of being accepted (a chain's one draft;
        a tree's depth, its nodes' paths' chances summed: at most one of them is accepted), whether
        drafting one more position is worth it."""
        self.survival = survival
        return not self.adaptive or self.survival >= self.threshold

    def learn(self, confidences: list[float], accepted: int) -> None:
        """Record one verified block: its draft tokens' confidences and how many were accepted. Tokens
        after the first rejection were never judged by the target and are left out."""
        for index, confidence in enumerate(confidences[:accepted + 1]):
            b = bisect.bisect_right(BIN_EDGES, confidence)
            self.judged[b] += 1
            self.accepted[b] += index < accepted
