"""A chain of drafts: drafting it with the batched drafter and the ensemble, verifying it in one target
forward, and rolling both caches back to what the target kept (the paper's setting; `tree.py` drafts
several paths at once)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from .draft_length import DraftLength
from .drafter import BatchedDrafter
from .ensemble import ensemble
from .events import TreeNode
from .lookup import NgramLookup
from .sampling import is_greedy, logits_to_log_probs, logits_to_probs, verify_greedy, verify_sampling

if TYPE_CHECKING:
    from .conversation import EncodedPrompt
    from .decoding import GenerationConfig, TargetSession


@dataclass
class Draft:
    """One block's drafts: the ensemble's tokens and the distributions they were drawn from."""

    tokens: list[int]
    row_probs: list[torch.Tensor]  # per position: each method's distribution (K, V)
    mixed_probs: list[torch.Tensor]  # per position: the ensemble's distribution (V,)
    row_log_probs: list[torch.Tensor] = field(default_factory=list)  # per position (K, V), for log-loss rules
    stop: str = "fixed"  # why drafting stopped (see BlockEvent.stop); "fork": where a tree takes over
    fork_logits: torch.Tensor | None = None  # with "fork": the rows' logits (rows, V) after the last draft

    def truncate(self, count: int, why: str) -> None:
        self.tokens, self.stop = self.tokens[:count], why
        self.row_probs, self.mixed_probs = self.row_probs[:count], self.mixed_probs[:count]
        self.row_log_probs = self.row_log_probs[:count]


@dataclass
class Verdict:
    """What the target made of a block: accepted drafts, its own next token, its distributions."""

    accepted: int
    target_token: int
    target_probs: torch.Tensor  # (γ + 1, V)
    path: Draft | None = None  # a tree's verdict: the accepted path and the best drafts after it, as a chain
    nodes: list[TreeNode] = field(default_factory=list)  # a tree's verdict: every node, as the block reports it


def draft_block(drafter: BatchedDrafter, feed: list[int], gamma: int, weights: torch.Tensor, methods: int,
                config: GenerationConfig, generator: torch.Generator, length: DraftLength | None = None,
                log_probs: bool = False, start: torch.Tensor | None = None,
                lookup: NgramLookup | None = None, ends: frozenset[int] = frozenset(),
                fork_below: float | None = None, banned: int | None = None) -> Draft:
    """Up to γ batched drafter steps; every row is extended with the ensemble's token.

    Each token stays on the device and feeds the next step directly. With a fixed length the steps are
    queued without waiting for one another and the tokens are read back once, at the end; adaptive
    drafting reads each token's confidence to decide whether to go on. `log_probs` keeps each row's
    log-softmax as well (the kld and hedge rules need them). `start`: the rows' logits after the
    prompt (the drafter's prefill), for the first block, which has nothing to feed. `lookup`: the
    model-free method N, the last of the `methods`, with no row of its own. A drafted end token (`ends`)
    ends the draft: nothing after it could be emitted. `fork_below`: stop before a position where the
    ensemble's top token has less than this probability, with every draft fed to the drafter, for a
    token tree to branch there (`tree.py`): the chain is the cheap way to grow a tree while it is sure.
    `banned`: a token no method may draft (the image placeholder, where the drafts ride on the prompt)."""
    adaptive = length is not None and length.adaptive
    draft = Draft([], [], [], stop="cap" if adaptive else "fixed")
    if adaptive:
        length.start_block(after_prompt=start is not None)
    tokens, drafted = [], []
    opinions = Opinions(methods, weights, config, log_probs, lookup, banned, drafter.placed)
    for _ in range(gamma):
        logits = start if start is not None else drafter.step(feed)
        start = None
        q_rows, q, log_q = opinions(logits, drafted)
        if fork_below is not None and float(q.max()) < fork_below:
            draft.stop, draft.fork_logits = "fork", logits
            break
        if log_probs:
            draft.row_log_probs.append(log_q)
        token = q.argmax().view(1) if is_greedy(config.temperature) else torch.multinomial(q, 1, generator=generator)
        tokens.append(token)
        if lookup is not None:
            drafted.append(int(token))  # N looks its next guess up in what was drafted too
        draft.row_probs.append(q_rows)
        draft.mixed_probs.append(q)
        feed = token
        if (adaptive or fork_below is not None) and int(token) in ends and len(tokens) < gamma:
            draft.stop = "eos"
            break
        if adaptive and not length.keep_drafting(float(q[token])) and len(tokens) < gamma:
            draft.stop = "unsure"
            break
    draft.tokens = torch.cat(tokens).tolist() if tokens else []
    _end_at_eos(drafter, draft, ends)
    return draft


def _end_at_eos(drafter: BatchedDrafter, draft: Draft, ends: frozenset[int]) -> None:
    """A fixed-length draft is read back once, at its end: cut it after its first end token."""
    end = next((i for i, token in enumerate(draft.tokens[:-1]) if token in ends), None)
    if end is not None:
        cut_draft(drafter, draft, end + 1, "eos")


def cut_draft(drafter: BatchedDrafter, draft: Draft, keep: int, why: str) -> None:
    """Keep the first `keep` drafts, and forget the others in the drafter too, which was fed every draft
    but the last."""
    drafter.rollback(len(draft.tokens) - max(keep, 1))
    draft.truncate(keep, why)


class Opinions:
    """Every method's distribution at a draft position, and the ensemble's."""

    def __init__(self, methods: int, weights: torch.Tensor, config: GenerationConfig, log_probs: bool,
                 lookup: NgramLookup | None, banned: int | None = None, placed: list[int] | None = None) -> None:
        self.models = methods - (lookup is not None)
        self.placed = placed  # while rows rest: the method of each row in the batch (a resting one has
        # weight 0: its distribution, all zeros here, adds nothing to the ensemble)
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
        if self.placed is not None:
            every = rows.new_zeros(self.models, *rows.shape[1:])
            every[self.placed] = rows
            return every
        return rows.expand(self.models, *rows.shape[1:]) if rows.shape[0] < self.models else rows  # one text row


def _renormalized(weights: torch.Tensor) -> torch.Tensor:
    total = weights.sum()
    return weights / total if float(total) > 0 else torch.full_like(weights, 1.0 / weights.shape[0])


class ChainVerifier:
    """Verifies one chain of drafts in one target forward and rolls both caches back to what was kept."""

    def verify(self, session: TargetSession, last: int | None, draft: Draft, config: GenerationConfig,
               generator: torch.Generator, prompt: EncodedPrompt | None = None) -> Verdict:
        """One target forward over the last committed token and the drafts; for the first block, the
        prompt's own pass (as transformers' assisted generation does: no forward of its own)."""
        if prompt is not None:
            target_logits = session.prefill(prompt, draft.tokens)
        else:
            target_logits = session.forward([last] + draft.tokens)
        target_probs = logits_to_probs(target_logits, config.temperature, config.top_p)
        tokens = torch.tensor(draft.tokens, dtype=torch.long, device=target_logits.device)
        if is_greedy(config.temperature):
            accepted, target_token = verify_greedy(tokens, target_logits)
        else:
            q = torch.stack(draft.mixed_probs) if draft.tokens else target_probs[:0]
            accepted, target_token = verify_sampling(tokens, q, target_probs, generator)
        return Verdict(accepted, target_token, target_probs)

    def commit(self, session: TargetSession, drafter: BatchedDrafter, draft: Draft, verdict: Verdict,
               pending: list[int]) -> list[int]:
        """Roll back the rejected drafts; returns the committed tokens the drafter has not seen yet."""
        gamma, accepted = len(draft.tokens), verdict.accepted
        session.rollback(gamma - accepted)
        if gamma == 0:
            return pending + [verdict.target_token]
        if accepted == gamma:
            return [draft.tokens[-1], verdict.target_token]
        drafter.rollback(gamma - 1 - accepted)
        return [verdict.target_token]
