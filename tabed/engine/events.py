"""What the engine reports while it decodes: typed events, the final result and its metrics.

The app and the benchmark consume these; nothing here knows how they are shown.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum


class StopReason(StrEnum):
    """Why a block's drafting stopped: one reason a block (`BlockEvent.stop`), set where drafting stops
    (`chain.py`, `tree.py`) or, for the budget, by the loop. A string too, so the JSON and the page read it."""

    FIXED = "fixed"  # the fixed γ was drafted
    CAP = "cap"  # adaptive drafting reached its cap
    UNSURE = "unsure"  # the estimated chance of the block being accepted whole fell below its minimum
    BUDGET = "budget"  # the max new tokens left room for no more drafts
    IMAGE = "image"  # an image placeholder was drafted in the first block, whose drafts ride on the prompt's pass
    EOS = "eos"  # an end token was drafted: nothing after it could be emitted
    NODES = "nodes"  # a tree spent its node budget
    FORK = "fork"  # inside a block only: the chain met a doubt and a tree grows on from it (never reported)


@dataclass
class Started:
    """Decoding began: the prompt is encoded and (for speculative decoding) the rows are built."""

    mode: str  # "speculative" or "autoregressive"
    prompt_tokens: int
    methods: list[str] = field(default_factory=list)
    captions: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    shared: list[str] = field(default_factory=list)  # methods drafted as one row (no picture): one shared weight


@dataclass
class TokenEvent:
    """A token the target decoded on its own (every AR token; the prefill token of speculative decoding)."""

    index: int
    token_id: int
    step_s: float
    elapsed_s: float


@dataclass
class TreeNode:
    """One drafted token of a block's token tree."""

    token: int
    parent: int  # the index of its parent node, -1 under the last committed token
    proposer: str  # the methods whose own top-1 it is ("MT", "M", ...), or "" (the ensemble's further choice)
    accepted: bool  # on the path the target kept
    draft_prob: float  # its probability under the ensemble it was drafted from
    target_prob: float  # its probability under the target, after its parent


# What an inspected block recorded (`inspection.py`: how each is made; the JSON download holds them by `asdict`).
Top = list[list]  # a distribution's likeliest tokens: [[token, probability], …], likeliest first


@dataclass(frozen=True)
class Tried:
    """A tree's child tried at a depth of the accepted path, in the order tried: its token, whether it was kept,
    and (sampling) its uniform draw u and p, q at its token."""

    node: int
    token: int
    kept: bool
    u: float | None = None
    p: float | None = None
    q: float | None = None


@dataclass(frozen=True)
class DraftTest:
    """The test a draft met. Greedy: kept when it is the target's top-1 (`target_top1`). Sampling: p and q at
    the draft, the chain's draw u (a tree's tests are in `tried`), and at a rejection the token drawn from the
    residual and the residual's likeliest tokens."""

    kind: str  # "greedy" or "sampling"
    kept: bool
    target_top1: int | None = None
    p: float | None = None
    q: float | None = None
    u: float | None = None
    tried: list[Tried] | None = None
    residual_token: int | None = None
    residual: Top | None = None


@dataclass(frozen=True)
class Position:
    """A draft position the target verified: the draft, each drafting method's likeliest tokens (resting ones
    left out), the ensemble's, the target's, and the test the draft met."""

    draft: int
    methods: dict[str, Top]
    ensemble: Top
    target: Top
    test: DraftTest


@dataclass
class Candidate:
    """A w-grid weighting: its weights, how often its mixed top-1 matched the target's, and its summed KL."""

    weights: list[float]
    matches: float
    kl: float


@dataclass
class WeightUpdate:
    """How the history chose a block's weights: the rule, the positions it held and the weights it gave, and
    what decided per rule (w-grid: `candidates`, the `most_matches` among them and the `winner`; kld and tvd:
    each method's summed `divergence`; hedge: each method's summed `loss` and the `rate`); the methods drafted
    as one row (`shared`) and the positions waiting for resting rows (`waiting`)."""

    rule: str
    positions: int
    weights: list[float]
    candidates: list[Candidate] | None = None
    most_matches: list[int] | None = None
    winner: int | None = None
    divergence: list[float] | None = None
    loss: list[float] | None = None
    rate: float | None = None
    shared: list[str] | None = None
    waiting: int = 0


@dataclass
class BlockEvent:
    """One draft-then-verify block of speculative decoding."""

    index: int
    weights: dict[str, float]  # ensemble weight per method used for this block
    draft: list[int]  # the ensemble's draft tokens
    drafts: dict[str, list[int]]  # each method's own top-1 guess at each draft position
    accepted: int  # how many of `draft` the target accepted
    # the target's token after the accepted prefix: a correction, or a bonus; None when the answer ended
    # before it (an accepted end token, or max new tokens), so that nothing reports a token the answer lacks
    target_token: int | None
    bonus: bool  # True when every draft was accepted and the target's own token followed them in the answer
    emitted: list[int]  # tokens this block added to the answer (cut at EOS / max new tokens)
    draft_probs: list[float]  # ensemble probability of each draft token
    target_probs: list[float]  # the target's probability of each draft token
    target_token_prob: float | None  # the target's probability of `target_token` (None with it)
    method_accepted: dict[str, int]  # counterfactual: leading guesses of each method the target agrees with
    stop: StopReason  # why drafting stopped ("unsure": the chance of the whole block fell below `threshold`)
    threshold: float | None  # adaptive drafting: the least chance of the whole block being accepted to go on
    survival: float | None  # adaptive drafting: the estimated chance that every draft is accepted
    draft_s: float  # the first block's includes the drafter's prefill, whose logits it drafts from
    verify_s: float
    weights_s: float
    elapsed_s: float
    resting: list[str] = field(default_factory=list)  # methods whose rows rested (weight 0; no guesses)
    # a tree block's nodes (`draft` is then its accepted path followed by its most probable drafts below
    # it: the chain the block's verification walked)
    tree: list[TreeNode] = field(default_factory=list)
    # with `GenerationConfig.inspect` (`inspection.py`): per verified draft position, the methods', the
    # ensemble's and the target's top tokens and the test the draft met; and how this block's weights were
    # chosen from the history of the blocks before it (None: uniform, nothing learned yet)
    positions: list[Position] = field(default_factory=list)  # what the target decided at each (`inspect`)
    weight_update: WeightUpdate | None = None  # how the history chose the weights (`inspect`)


@dataclass
class Metrics:
    new_tokens: int
    prefill_s: float  # target prefill (it also yields the first token)
    decode_s: float  # everything after the target prefill, captioning excepted
    walltime_s: float  # prefill + decode (+ captioning)
    tokens_per_s: float
    target_forwards: int  # the prompt's pass included (speculative decoding: one per block)
    block_efficiency: float  # new tokens per target forward
    acceptance_rate: float = 0.0
    drafted: int = 0  # draft tokens the target verified (a tree's: the chain its verification walked)
    accepted: int = 0  # of them, the ones it kept
    method_block_efficiency: dict[str, float] = field(default_factory=dict)
    # how the drafts fared (`acceptance.py`): blocks by the number of drafts they kept; per draft position
    # (1 first) the share kept of the blocks that drafted that far ({"rate", "blocks"}); per method and
    # position its top-1 guess's match rate at the verified positions; the mean drafts kept a block
    accepted_histogram: list[int] = field(default_factory=list)
    acceptance_by_position: list[dict] = field(default_factory=list)
    method_match_by_position: dict[str, list[dict]] = field(default_factory=dict)
    mean_accepted: float = 0.0
    draft_s: float = 0.0
    verify_s: float = 0.0
    weights_s: float = 0.0
    caption_s: float = 0.0
    speedup: float | None = None  # AR decode time / speculative decode time, when AR ran too
    cpu_share: float = 0.0  # process CPU seconds per wall second (on a CPU: ~torch's threads unless starved)
    busy: bool = False  # on a CPU, the run got under `session.BUSY_SHARE` of one core: its timings mean nothing


@dataclass
class GenerationResult:
    mode: str
    spec: str | None
    token_ids: list[int]
    text: str
    metrics: Metrics
    blocks: list[BlockEvent] = field(default_factory=list)
    tokens: list[TokenEvent] = field(default_factory=list)
    captions: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    stopped: bool = False
    shared: list[str] = field(default_factory=list)  # as `Started.shared`

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Finished:
    result: GenerationResult


Event = Started | TokenEvent | BlockEvent | Finished
