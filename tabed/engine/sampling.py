"""Turning logits into distributions, choosing tokens, and lossless verification of a draft block.

Verification follows the standard speculative-decoding argument: greedy keeps the longest prefix
equal to the target's argmax; sampling accepts draft x with probability min(1, p(x)/q(x)), where q is
the exact distribution x was drawn from, and on rejection samples from norm(max(p - q, 0)). Either way
the emitted tokens are distributed exactly as if the target had decoded alone.
"""

from __future__ import annotations

import torch


def is_greedy(temperature: float) -> bool:
    return temperature <= 0.0


def logits_to_probs(logits: torch.Tensor, temperature: float, top_p: float = 1.0) -> torch.Tensor:
    """The distribution tokens are sampled from (softmax at temperature 1 when greedy).

    Greedy decoding never samples; its distributions are still needed for the ensemble's history.
    """
    logits = logits.float()
    if is_greedy(temperature):
        return torch.softmax(logits, dim=-1)
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        before = sorted_probs.cumsum(dim=-1) - sorted_probs
        sorted_probs = sorted_probs.masked_fill(before >= top_p, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


def logits_to_log_probs(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """The log-softmax at the sampling temperature (1 when greedy), before any top-p cut: what the
    log-loss weight rules measure, exact where the probabilities underflow."""
    logits = logits.float()
    return torch.log_softmax(logits if is_greedy(temperature) else logits / temperature, dim=-1)


def choose_token(
    logits: torch.Tensor, probs: torch.Tensor, temperature: float, generator: torch.Generator | None
) -> int:
    """The target's own next token: argmax of the logits (greedy) or a sample from `probs`."""
    if is_greedy(temperature):
        return int(logits.argmax(dim=-1))
    return int(torch.multinomial(probs, 1, generator=generator))


def verify_greedy(drafts: torch.Tensor, target_logits: torch.Tensor) -> tuple[int, int]:
    """Accept the longest prefix of `drafts` (γ,) equal to the target's argmax.

    `target_logits` (γ+1, V) scores the positions after the last committed token and after each draft.
    Returns (accepted count n, the target's own token at position n: correction or bonus).
    """
    choices = target_logits.argmax(dim=-1)
    gamma = drafts.shape[0]
    agree = (drafts == choices[:gamma]).long()
    accepted = int(agree.cumprod(dim=0).sum()) if gamma else 0
    return accepted, int(choices[accepted])


def residual(p: torch.Tensor, proposal: torch.Tensor) -> torch.Tensor:
    """What is left of p once a draw from `proposal` was rejected: norm(max(p - q, 0)), or p itself where
    p == q up to rounding (nothing is left)."""
    left = (p - proposal).clamp_min(0.0)
    total = left.sum()
    return left / total if total > 0 else p


def verify_sampling(
    drafts: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    generator: torch.Generator | None,
    draws: list[float] | None = None,
) -> tuple[int, int]:
    """Rejection sampling of drafts (γ,) drawn from `draft_probs` (γ, V) against `target_probs` (γ+1, V);
    the uniform draws are appended to `draws` when it is given (read back only then)."""
    gamma = drafts.shape[0]
    if gamma:
        index = torch.arange(gamma, device=drafts.device)
        p = target_probs[index, drafts]
        q = draft_probs[index, drafts]
        u = torch.rand(gamma, generator=generator, device=drafts.device)
        if draws is not None:
            draws.extend(u.tolist())
        accept = (u * q < p).long()  # u < p/q, written without a division
        accepted = int(accept.cumprod(dim=0).sum())
    else:
        accepted = 0
    if accepted == gamma:
        return accepted, int(torch.multinomial(target_probs[gamma], 1, generator=generator))
    left = residual(target_probs[accepted], draft_probs[accepted])
    return accepted, int(torch.multinomial(left, 1, generator=generator))
