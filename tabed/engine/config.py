"""The decoding settings shared by speculative and autoregressive decoding, with their defaults and bounds.

Every bound lives in `LIMITS`: the config checks against it, and the page's sliders and the CLI's help
read it, so that a value one of them accepts the others accept too.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError
from ..models.pair import MAX_GAMMA
from .draft_length import AUTO_CAP
from .spec import RULES

TREE_POLICIES = ("ensemble", "methods", "unsure", "members")  # how a tree node's children are chosen (see tree.py)
TREE_BLOCKS = ("all", "first")  # trees in every block, or in the first only (drafted before any weight is learned)
LIMITS = {  # inclusive bounds of the numeric settings
    "max_new_tokens": (1, 1024),
    "gamma": (1, MAX_GAMMA),
    "temperature": (0.0, 2.0),
    "tree_width": (1, 4),
    "window": (0, 100_000),  # 0 keeps every position
    "seed": (0, 2**32 - 1),  # what a generator of every device takes, and a browser's number box keeps exactly
}


@dataclass(frozen=True)
class GenerationConfig:
    """Decoding settings shared by speculative and autoregressive decoding."""

    max_new_tokens: int = 256  # the teaching pair's longest answers take about 160 tokens
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    seed: int = 0
    gamma: int = AUTO_CAP  # draft tokens per block: the cap when adaptive, else the fixed length
    adaptive: bool = True  # stop a block's draft early when the ensemble is unsure (see draft_length.py)
    min_survival: float | None = None  # adaptive blocks stop below this chance of being kept whole (None: the
    # device's, `draft_length.min_survival_on`)
    rule: str = "w-grid"  # TABED weight rule: w-grid, kld, tvd or hedge
    window: int = 0  # TABED history window in positions, 0 = all
    tree_width: int = 1  # 1: a chain of drafts; D > 1: token trees, D nodes expanded per depth (see tree.py)
    tree_policy: str = "ensemble"  # how a tree node's children are chosen: "ensemble", "methods" or "unsure"
    tree_blocks: str = "all"  # which blocks draft trees: "all", or "first" (the one drafted with no weights learned)
    hedge_first: bool = True  # with chains: TABED's first block forks where it is unsure (`settings.hedges_first`)
    may_rest: bool = True  # a method at weight 0 for a while leaves the draft steps (see resting.py)
    inspect: bool = False  # record what each block decided and why (see inspection.py): the page's stepper

    def __post_init__(self) -> None:
        for name, (low, high) in LIMITS.items():
            if not low <= getattr(self, name) <= high:
                raise InputError(f"{name.replace('_', ' ')} must be between {low} and {high}, "
                                 f"got {getattr(self, name)}")
        if self.min_survival is not None and not 0.0 < self.min_survival < 1.0:
            raise InputError(f"the draft length's minimum survival must be in (0, 1), got {self.min_survival}")
        if not 0.0 < self.top_p <= 1.0:
            raise InputError(f"top-p must be in (0, 1], got {self.top_p}")
        if self.rule not in RULES:
            raise InputError(f"unknown weight rule {self.rule!r}: choose one of {', '.join(RULES)}")
        if self.tree_policy not in TREE_POLICIES:
            raise InputError(f"unknown tree policy {self.tree_policy!r}: choose one of {', '.join(TREE_POLICIES)}")
        if self.tree_blocks not in TREE_BLOCKS:
            raise InputError(f"unknown tree blocks {self.tree_blocks!r}: choose one of {', '.join(TREE_BLOCKS)}")
