"""Rows that earn nothing rest.

A drafting method whose weight has been 0 for `REST_AFTER` blocks in a row still costs its row in every
draft step (two rows cost about 1.2 times one on a CPU). So its row leaves the drafter's batch, keeping
its cache as it was. Its distributions are then missing at the positions the target verifies, and the
weight history needs them: those blocks' statistics wait. After `PROBE_EVERY` blocks the resting rows
catch up, in ONE forward over the committed tokens they missed, which gives their distributions at
every waiting position; the waiting blocks then enter the history in order, and the weights are
computed from exactly what they would have been computed from without resting, only later (meanwhile
they stay as they were: the resting methods at 0). Rows whose weight is no longer 0 rejoin the batch;
the others go on resting, and wait twice as long before the next catch-up (up to `PROBE_AT_MOST`
blocks): a method that earned nothing twice is unlikely to earn at the next block, and a catch-up costs
about two drafter steps. Drafts, and so greedy output, are untouched: a resting method's weight is 0,
so it adds nothing to the ensemble.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from .drafter import BatchedDrafter
from .ensemble import WeightHistory
from .sampling import logits_to_log_probs, logits_to_probs

if TYPE_CHECKING:
    from .config import GenerationConfig

REST_AFTER = 2  # blocks in a row with a zero weight before a method's row rests
PROBE_EVERY = 3  # blocks a row rests before it first catches up and the weights are computed with it
PROBE_AT_MOST = 24  # the longest wait between catch-ups, which doubles while the rows keep resting


@dataclass
class Waiting:
    """One block's verified positions, waiting for the resting rows' distributions there."""

    position: int  # the answer position of the first (the distribution after the answer's first `position` tokens)
    target_probs: torch.Tensor  # (n, V)
    row_probs: torch.Tensor  # (n, K, V); the resting methods' rows are zeros until filled
    row_log_probs: torch.Tensor | None  # (n, K, V), for the log-loss rules


@dataclass
class RestSchedule:
    """Which rows rest, since when, and the history they owe."""

    history: WeightHistory
    models: int  # methods with a drafter row (N, the last method when there, has none)
    zero_blocks: list[int] = field(default_factory=list)  # per model method: blocks in a row at weight 0
    seen: int = 0  # how many answer tokens the resting rows have seen
    rested: int = 0  # blocks since they last caught up
    probe_every: int = 0  # blocks between catch-ups now: PROBE_EVERY when rows start resting, then doubling
    probed: bool = False  # the resting rows caught up before this block
    waiting: list[Waiting] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.zero_blocks = [0] * self.models

    def waiting_positions(self) -> int:
        """Verified positions not yet in the history: they wait for the resting rows to catch up."""
        return sum(block.target_probs.shape[0] for block in self.waiting)

    def before_block(self, drafter: BatchedDrafter, out: list[int], seen: int, config: GenerationConfig) -> None:
        """Before a block's weights are computed: resting rows that are due catch up on the answer's
        first `seen` tokens (what the batch has seen) and the history they owed is added."""
        if drafter.rest_backend is None or self.rested < self.probe_every:
            return
        logits = drafter.catch_up(out[self.seen:seen])  # logits i: after the answer's first seen + i + 1 tokens
        probs = logits_to_probs(logits, config.temperature, config.top_p)
        log_probs = logits_to_log_probs(logits, config.temperature) if self.history.needs_log_q else None
        for block in self.waiting:
            at = torch.arange(block.position, block.position + block.target_probs.shape[0]) - self.seen - 1
            block.row_probs[:, drafter.resting_rows] = probs[:, at].transpose(0, 1)
            if block.row_log_probs is not None:
                block.row_log_probs[:, drafter.resting_rows] = log_probs[:, at].transpose(0, 1)
        # in order (a window drops positions in order), in one pass
        self.history.add_blocks([(block.target_probs, block.row_probs, block.row_log_probs) for block in self.waiting])
        self.seen, self.rested, self.waiting, self.probed = seen, 0, [], True

    def choose(self, drafter: BatchedDrafter, weights: torch.Tensor, seen: int) -> None:
        """With this block's weights: caught-up rows that earn again rejoin, and those that do not wait twice as
        long for the next catch-up; rows at 0 for `REST_AFTER` blocks (this one included) rest, from the
        answer's first `seen` tokens on."""
        zero = (weights[:self.models] == 0).tolist()
        self.zero_blocks = [count + 1 if is_zero else 0 for count, is_zero in zip(self.zero_blocks, zero, strict=True)]
        if drafter.rest_backend is not None:
            if self.probed and not all(zero[row] for row in drafter.resting_rows):
                drafter.wake()
            elif self.probed:
                self.probe_every = min(2 * self.probe_every, PROBE_AT_MOST)
            self.probed = False
            return
        tired = [row for row in range(self.models) if self.zero_blocks[row] >= REST_AFTER]
        if tired and len(tired) < self.models:
            drafter.rest(tired)
            self.seen, self.rested, self.probe_every = seen, 0, PROBE_EVERY

    def record(self, drafter: BatchedDrafter, position: int, target_probs: torch.Tensor, row_probs: torch.Tensor,
               row_log_probs: torch.Tensor | None) -> None:
        """A block's verified positions, from answer `position` on, for the history: added now, or, while rows
        rest, when they catch up."""
        if drafter.rest_backend is None:
            self.history.add(target_probs, row_probs, row_log_probs)
            return
        self.waiting.append(Waiting(position, target_probs, row_probs, row_log_probs))
        self.rested += 1
