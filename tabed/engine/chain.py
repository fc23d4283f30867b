"""A chain of drafts: drafting it with the batched drafter and the ensemble, verifying it in one target
forward, and rolling both caches back to what the target kept (the paper's setting; `tree.py` drafts
several paths at once)."""

from __future__ import annotations

import torch

from .config import GenerationConfig
from .drafter import BatchedDrafter
from .drafts import BlockStart, DraftChain, DraftContext, Verdict, unseen_after
from .events import StopReason
from .sampling import is_greedy, logits_to_probs, verify_greedy, verify_sampling
from .session import TargetSession


def draft_block(drafting: DraftContext, gamma: int, fork_below: float | None = None) -> DraftChain:
    """Up to γ batched drafter steps; every row is extended with the ensemble's token.

    Each token stays on the device and feeds the next step directly. With a fixed length the steps are
    queued without waiting for one another and the tokens are read back once, at the end; adaptive
    drafting reads each token's confidence to decide whether to go on. The first block drafts from the
    drafter's prefill, having nothing to feed, and ends before an image placeholder (`drafts.AfterPrompt`).
    A drafted end token ends the draft: nothing after it could be emitted. `fork_below`: stop before a
    position where the ensemble's top token has less than this probability, with every draft fed to the
    drafter, for a token tree to branch there (`tree.py`): the chain is the cheap way to grow a tree
    while it is sure."""
    adaptive, length, config = drafting.adaptive, drafting.length, drafting.config
    draft = DraftChain([], [], [], stop=StopReason.CAP if adaptive else StopReason.FIXED)
    drafting.start_length()
    if gamma <= 0:  # nothing to draft (one token left to emit): there may be no drafter at all
        return draft
    tokens, drafted = [], []
    distributions = drafting.distributions()
    for _ in range(gamma):
        logits = drafting.drafter.step(tokens[-1]) if tokens else drafting.opening_logits()
        q_rows, q, log_q = distributions(logits, drafted)
        if fork_below is not None and float(q.max()) < fork_below:
            draft.stop, draft.fork_logits = StopReason.FORK, logits
            break
        if drafting.log_probs:
            draft.row_log_probs.append(log_q)
        token = q.argmax().view(1) if is_greedy(config.temperature) else torch.multinomial(
            q, 1, generator=drafting.generator)
        tokens.append(token)
        if drafting.lookup is not None:
            drafted.append(int(token))  # N looks its next guess up in what was drafted too
        draft.row_probs.append(q_rows)
        draft.mixed_probs.append(q)
        if (adaptive or fork_below is not None) and int(token) in drafting.ends and len(tokens) < gamma:
            draft.stop = StopReason.EOS
            break
        if adaptive and not length.keep_drafting(float(q[token])) and len(tokens) < gamma:
            draft.stop = StopReason.UNSURE
            break
    draft.tokens = torch.cat(tokens).tolist() if tokens else []
    _end_at_eos(drafting.drafter, draft, drafting.ends)
    end_before(drafting.drafter, draft, drafting.start.banned)
    return draft


def _end_at_eos(drafter: BatchedDrafter, draft: DraftChain, ends: frozenset[int]) -> None:
    """A fixed-length draft is read back once, at its end: cut it after its first end token."""
    end = next((i for i, token in enumerate(draft.tokens[:-1]) if token in ends), None)
    if end is not None:
        cut_draft(drafter, draft, end + 1, StopReason.EOS)


def end_before(drafter: BatchedDrafter, draft: DraftChain, banned: int | None) -> None:
    """The first block's drafts ride on the prompt's pass, where the target counts image placeholders
    against its image features: a drafted placeholder (`banned`; a random model's, never a trained one's)
    ends the draft before it."""
    if banned in draft.tokens:
        cut_draft(drafter, draft, draft.tokens.index(banned), StopReason.IMAGE)


def cut_draft(drafter: BatchedDrafter, draft: DraftChain, keep: int, why: StopReason) -> None:
    """Keep the first `keep` drafts, and forget the others in the drafter too, which was fed every draft
    but the last."""
    drafter.rollback(len(draft.tokens) - max(keep, 1))
    draft.truncate(keep, why)


class ChainVerifier:
    """Verifies one chain of drafts in one target forward and rolls both caches back to what was kept."""

    def __init__(self, start: BlockStart) -> None:
        self.start = start

    def verify(self, session: TargetSession, draft: DraftChain, config: GenerationConfig,
               generator: torch.Generator) -> Verdict:
        """One target forward over the last committed token and the drafts; for the first block, the
        prompt's own pass (`BlockStart.score`)."""
        target_logits = self.start.score(session, draft.tokens)
        target_probs = logits_to_probs(target_logits, config.temperature, config.top_p)
        tokens = torch.tensor(draft.tokens, dtype=torch.long, device=target_logits.device)
        if is_greedy(config.temperature):
            accepted, target_token = verify_greedy(tokens, target_logits)
        else:
            q = torch.stack(draft.mixed_probs) if draft.tokens else target_probs[:0]
            draws = [] if config.inspect else None
            accepted, target_token = verify_sampling(tokens, q, target_probs, generator, draws)
            return Verdict(accepted, target_token, target_probs, draws=draws or [])
        return Verdict(accepted, target_token, target_probs)

    def commit(self, session: TargetSession, drafter: BatchedDrafter, draft: DraftChain, verdict: Verdict,
               pending: list[int]) -> list[int]:
        """Roll back the rejected drafts; returns the committed tokens the drafter has not seen yet
        (`unseen_after`: the drafter was fed all of the drafts but the last)."""
        gamma, accepted = len(draft.tokens), verdict.accepted
        session.rollback(gamma - accepted)
        if accepted < gamma:
            drafter.rollback(gamma - 1 - accepted)
        fed = min(accepted, gamma - 1)  # of the accepted drafts
        return unseen_after(pending, gamma > 0, draft.tokens[:accepted], max(fed, 0), verdict.target_token)
