"""What a block drafts with and what it drafts: how it begins (the first block after the prompt, every
other after a token), the drafting context, every method's distribution and the ensemble's at a
position, the drafts, and the target's verdict on them. Chains (`chain.py`) and trees (`tree.py`) share these."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ..models.chat import EncodedPrompt
from .config import GenerationConfig
from .draft_length import DraftLength
from .drafter import BatchedDrafter
from .ensemble import ensemble
from .events import StopReason, TreeNode
from .lookup import NgramLookup
from .sampling import logits_to_log_probs, logits_to_probs
from .session import TargetSession


@dataclass
class DraftChain:
    """One block's drafts: the ensemble's tokens and the distributions they were drawn from."""

    tokens: list[int]
    row_probs: list[torch.Tensor]  # per position: each method's distribution (K, V)
    mixed_probs: list[torch.Tensor]  # per position: the ensemble's distribution (V,)
    row_log_probs: list[torch.Tensor] = field(default_factory=list)  # per position (K, V), for log-loss rules
    stop: StopReason = StopReason.FIXED  # why drafting stopped; FORK: where a tree takes over
    fork_logits: torch.Tensor | None = None  # with FORK: the rows' logits (rows, V) after the last draft

    def truncate(self, count: int, why: StopReason) -> None:
        self.tokens, self.stop = self.tokens[:count], why
        self.row_probs, self.mixed_probs = self.row_probs[:count], self.mixed_probs[:count]
        self.row_log_probs = self.row_log_probs[:count]

    def confidences(self) -> list[float]:
        """The ensemble's probability of each draft token, read back together (one wait for a GPU): what
        the adaptive draft length learns from, and what the block reports."""
        if not self.tokens:
            return []
        tokens = torch.tensor(self.tokens, dtype=torch.long, device=self.mixed_probs[0].device)
        return torch.stack(self.mixed_probs)[torch.arange(len(tokens), device=tokens.device), tokens].tolist()


@dataclass
class Verdict:
    """What the target made of a block: accepted drafts, its own next token, its distributions."""

    accepted: int
    target_token: int
    target_probs: torch.Tensor  # (γ + 1, V)
    path: DraftChain | None = None  # a tree's verdict: the accepted path and the best drafts after it, as a chain
    nodes: list[TreeNode] = field(default_factory=list)  # a tree's verdict: every node, as the block reports it
    # recorded only when the run inspects a sampling verification (`inspection.py`): a chain's uniform
    # draws; a tree's tests in the order tried, and the residual its token was drawn from
    draws: list[float] = field(default_factory=list)
    tried: list[dict] = field(default_factory=list)
    residual: torch.Tensor | None = None


HEDGE_WIDTH = 2  # the hedged first block's tree width (`settings.hedges_first`)
ROOT = -1  # a tree's root: the last committed token, which every tree hangs from


@dataclass(frozen=True)
class AfterPrompt:
    """How the first block begins, verifies and ends, in one place. Its drafts ride on the target's pass
    over the prompt (as transformers' assisted generation does), which verifies them and gives the
    answer's first token without a forward of its own. So the first block
    - drafts from the drafter's `prefill_logits`: there are no pending tokens to feed;
    - drafts no image placeholder (`banned`), which the prompt's pass would count against its image
      features: a chain ends before one (`StopReason.IMAGE`), a tree's distributions ban it;
    - goes on to a lower minimum survival (`draft_length.FIRST_MIN_SURVIVAL`): it is verified at no cost;
    - is verified by the pass over `prompt`: a tree hangs under the prompt's last token, in both caches;
    - is drafted before any weight is learned, so TABED hedges it where `settings.hedges_first` says, and
      it is a tree whenever trees are configured, even for the first block only."""

    prompt: EncodedPrompt  # the target's
    prefill_logits: torch.Tensor | None  # the drafter rows' after the prompt (None: no drafter, nothing to draft)
    banned: int  # the image placeholder token

    def draft_logits(self, drafter: BatchedDrafter, pending: list[int]) -> torch.Tensor:
        return self.prefill_logits

    def min_survival(self, length: DraftLength) -> float:
        return length.first_min_survival

    def tree_shape(self, config: GenerationConfig, hedges: bool) -> tuple[int, str] | None:
        if config.tree_width > 1:
            return config.tree_width, config.tree_policy
        return (HEDGE_WIDTH, "unsure") if hedges else None

    def score(self, session: TargetSession, tokens: list[int], layout: Callable | None = None) -> torch.Tensor:
        """The target's logits (len(tokens) + 1, V) from the prompt's pass with the drafts after it;
        `layout(queries, entries, shift)` lays out a tree (`DraftTree.layout`), which hangs under the
        prompt's last token."""
        nodes = list(range(len(tokens)))
        return session.prefill(self.prompt, tokens, layout(nodes, nodes, -1) if layout else None)

    def keep(self, session: TargetSession, count: int, kept: list[int]) -> None:
        """Of the `count` drafts the pass scored after the prompt, the target's cache keeps `kept`."""
        session.keep(count, kept)


@dataclass(frozen=True)
class AfterToken:
    """How every later block begins, verifies and ends: it drafts after the tokens the drafter has not
    seen, and one target forward over the last committed token (`last`) and the drafts verifies it."""

    last: int
    banned: None = None  # any token may be drafted

    def draft_logits(self, drafter: BatchedDrafter, pending: list[int]) -> torch.Tensor:
        return drafter.step(pending)

    def min_survival(self, length: DraftLength) -> float:
        return length.min_survival

    def tree_shape(self, config: GenerationConfig, hedges: bool) -> tuple[int, str] | None:
        trees = config.tree_width > 1 and config.tree_blocks == "all"
        return (config.tree_width, config.tree_policy) if trees else None

    def score(self, session: TargetSession, tokens: list[int], layout: Callable | None = None) -> torch.Tensor:
        """The target's logits (len(tokens) + 1, V) from one forward over `last` and the drafts (a tree,
        laid out by `layout`, hangs under `last`, which is its root)."""
        nodes = [ROOT] + list(range(len(tokens)))
        return session.forward([self.last] + tokens, layout(nodes, nodes, 0) if layout else None)

    def keep(self, session: TargetSession, count: int, kept: list[int]) -> None:
        """Of `last` and the `count` drafts the forward scored, the target's cache keeps `last` and `kept`."""
        session.keep(1 + count, [0] + [1 + node for node in kept])


BlockStart = AfterPrompt | AfterToken  # what the steps of a block ask instead of "is this the first block?"


@dataclass
class DraftContext:
    """One block's drafting context: the drafter and what it has not been fed yet, the ensemble's
    weights over the methods, and the run's settings and state that drafting reads."""

    drafter: BatchedDrafter
    pending: list[int]  # committed tokens the drafter has not seen yet
    weights: torch.Tensor  # (K,): the block's ensemble weights
    method_count: int  # K, the model methods' rows and N (when `lookup` is given, the last)
    config: GenerationConfig
    generator: torch.Generator
    start: BlockStart  # how the block begins: `AfterPrompt` for the first, `AfterToken` for the others
    length: DraftLength | None = None  # the adaptive draft length (None: always γ)
    log_probs: bool = False  # keep each row's log-softmax too (the kld and hedge rules need them)
    lookup: NgramLookup | None = None  # the model-free method N
    ends: frozenset[int] = frozenset()  # end tokens: a drafted one ends its path (nothing after it is emitted)
    banned: int | None = None  # a token no method may draft (the first tree's image placeholder)

    @property
    def adaptive(self) -> bool:
        return self.length is not None and self.length.adaptive

    def distributions(self) -> DraftDistributions:
        return DraftDistributions(self.method_count, self.weights, self.config, self.log_probs, self.lookup,
                                  self.banned, self.drafter.batch_rows)

    def opening_logits(self) -> torch.Tensor:
        """The rows' logits (rows, V) at the block's first draft position: the prefill's, or a step over the
        pending tokens."""
        return self.start.draft_logits(self.drafter, self.pending)

    def start_length(self) -> None:
        """An adaptive block's draft length starts over, at the minimum survival of its kind of block."""
        if self.adaptive:
            self.length.start_block(self.start.min_survival(self.length))


def unseen_after(pending: list[int], drafted: bool, path: list[int], fed: int, target_token: int) -> list[int]:
    """The committed tokens the drafter has not seen after a block, by the one rule of its cache: drafting
    feeds the drafter the `pending` tokens, then every draft but the last (whose logits nothing needs: the
    target's token follows it), and verification rolls it back to the accepted `path`, of which the first
    `fed` are in its cache. So what it has not seen is the path's last token when that was never fed, and
    the target's token; `pending` too when nothing was `drafted` (no draft step fed them). The next
    block's first draft step feeds them: the drafter never lags by more than two tokens."""
    if len(path) - fed > 1:
        raise RuntimeError(f"the drafter was fed {fed} of the {len(path)} accepted drafts: all but the last, at least")
    return ([] if drafted else pending) + path[fed:] + [target_token]


class DraftDistributions:
    """Every method's distribution at a draft position, and the ensemble's."""

    def __init__(self, method_count: int, weights: torch.Tensor, config: GenerationConfig, log_probs: bool,
                 lookup: NgramLookup | None, banned: int | None = None, batch_rows: list[int] | None = None) -> None:
        self.models = method_count - (lookup is not None)
        # while rows rest: the method of each row in the batch (a resting one has weight 0: its
        # distribution, all zeros here, adds nothing to the ensemble)
        self.batch_rows = batch_rows
        self.weights, self.config, self.log_probs, self.lookup = weights, config, log_probs, lookup
        self.banned = banned  # a token no method may draft here (its probability goes to the others)
        self.banned_ids = torch.tensor([banned], device=weights.device) if banned is not None else None
        self.model_weights = _renormalized(weights[:self.models]) if lookup is not None else None  # N's "no opinion"

    def __call__(self, logits: torch.Tensor, drafted: list[int]):
        """From the rows' logits (rows, V) after `drafted` (this block's drafts so far, which N looks
        its guess up in too): each method's distribution (K, V), the ensemble's (V,), and each
        method's log-distribution (K, V) when the weight rule needs it. Without N, logits (rows, F, V)
        after F tree nodes give them for all F at once: (K, F, V), (F, V), (K, F, V)."""
        temperature = self.config.temperature
        if self.banned is not None:
            logits = logits.index_fill(-1, self.banned_ids, float("-inf"))
        q_rows = self._per_method(logits_to_probs(logits, temperature, self.config.top_p))
        log_q = self._per_method(logits_to_log_probs(logits, temperature)) if self.log_probs else None
        if self.lookup is not None:
            mixture = ensemble(q_rows, self.model_weights)
            q_n = self.lookup.distribution(drafted, mixture)
            if self.banned is not None and float(q_n[self.banned]) > 0:  # looked up among the prompt's placeholders
                q_n = q_n.index_fill(0, self.banned_ids, 0.0)
                q_n = q_n / q_n.sum() if float(q_n.sum()) > 0 else mixture
            q_rows = torch.cat([q_rows, q_n[None]])
            log_q = torch.cat([log_q, q_n.clamp_min(1e-12).log()[None]]) if self.log_probs else None
        return q_rows, ensemble(q_rows, self.weights), log_q

    def _per_method(self, rows: torch.Tensor) -> torch.Tensor:
        """The rows' (rows, ...) as one per model method (K, ...)."""
        if self.batch_rows is not None:
            every = rows.new_zeros(self.models, *rows.shape[1:])
            every[self.batch_rows] = rows
            return every
        return rows.expand(self.models, *rows.shape[1:]) if rows.shape[0] < self.models else rows  # one text row


def _renormalized(weights: torch.Tensor) -> torch.Tensor:
    total = weights.sum()
    return weights / total if float(total) > 0 else torch.full_like(weights, 1.0 / weights.shape[0])
