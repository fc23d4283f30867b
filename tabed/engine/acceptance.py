"""How a run's drafts fared, counted from its blocks: how many tokens each block kept, how often the
target kept the draft at each position, and how often each method's own guess there was the target's.

A block's drafts are judged in order: the draft at position j (1 … γ) is kept only if every one before
it was, so the rate at a position counts, among the blocks that drafted that far, those that kept it.
Only verified positions say anything of a method's guess: the kept drafts and the first rejected one,
whose true token is the target's own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .events import BlockEvent


@dataclass
class PositionCounts:
    """At one draft position: how many blocks drafted that far, and how many kept their draft there."""

    drafted: int = 0
    kept: int = 0

    @property
    def rate(self) -> float:
        return self.kept / self.drafted if self.drafted else 0.0


@dataclass
class Acceptance:
    """A run's acceptance, block by block (`count`), in the figures a report shows (`summary`)."""

    histogram: list[int] = field(default_factory=list)  # blocks by the number of drafts they kept
    positions: list[PositionCounts] = field(default_factory=list)  # per draft position, 1 first
    method_positions: dict[str, list[PositionCounts]] = field(default_factory=dict)  # verified guesses, matched

    @classmethod
    def count(cls, blocks: list[BlockEvent]) -> Acceptance:
        counts = cls()
        for block in blocks:
            counts.add(block)
        return counts

    def add(self, block: BlockEvent) -> None:
        self.histogram += [0] * (block.accepted + 1 - len(self.histogram))
        self.histogram[block.accepted] += 1
        _grow(self.positions, len(block.draft))
        for j in range(len(block.draft)):
            self.positions[j].drafted += 1
            self.positions[j].kept += j < block.accepted
        for method, guesses in block.drafts.items():  # a resting method guessed nothing
            known = min(len(guesses), len(block.draft), len(block.emitted))  # positions whose truth is known
            rows = self.method_positions.setdefault(method, [])
            _grow(rows, known)
            for j in range(known):
                rows[j].drafted += 1
                rows[j].kept += guesses[j] == block.emitted[j]

    def mean_accepted(self) -> float:
        blocks = sum(self.histogram)
        return sum(kept * count for kept, count in enumerate(self.histogram)) / blocks if blocks else 0.0

    def summary(self) -> dict:
        """`accepted_histogram` (blocks, indexed by drafts kept), `acceptance_by_position` (per position:
        the rate and the blocks that drafted that far), `method_match_by_position` (per method and
        position: its top-1 guess's match rate and the verified guesses), `mean_accepted`."""
        return {
            "accepted_histogram": list(self.histogram),
            "acceptance_by_position": [_cell(counts) for counts in self.positions],
            "method_match_by_position": {m: [_cell(counts) for counts in rows]
                                         for m, rows in self.method_positions.items()},
            "mean_accepted": self.mean_accepted(),
        }


def _grow(rows: list[PositionCounts], length: int) -> None:
    rows += [PositionCounts() for _ in range(length - len(rows))]


def _cell(counts: PositionCounts) -> dict:
    return {"rate": counts.rate, "blocks": counts.drafted}
