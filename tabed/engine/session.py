"""The target's side of a run: its cache backend behind prefill, forward and roll-back, and the clock
that times each phase."""

from __future__ import annotations

import time

import torch

from ..models.caches import TreeLayout
from ..models.chat import EncodedPrompt

BUSY_SHARE = 0.6  # on a CPU, a run that got less than this much of one core shared the machine: timings unreliable


class Clock:
    """Wall time that waits for queued GPU work, so each phase is charged what it really cost; and the
    process's CPU time, which tells a run that had its cores from one that shared them."""

    def __init__(self, device: torch.device) -> None:
        self.cuda, self.cpu = device.type == "cuda", device.type == "cpu"
        self.start = self.now()
        self.cpu_start = time.process_time()

    def cpu_share(self) -> float:
        """CPU seconds this process got per second of wall time since the start: about its number of
        busy threads on an idle CPU, a fraction of that when other processes were using the cores."""
        wall = self.now() - self.start
        return (time.process_time() - self.cpu_start) / wall if wall > 0 else 0.0

    def busy(self, share: float) -> bool:
        """Whether a run on a CPU that got this `cpu_share` shared the machine, so that its timings mean
        nothing: on an idle machine a CPU-bound run keeps at least one core busy."""
        return self.cpu and share < BUSY_SHARE

    def now(self) -> float:
        if self.cuda:
            torch.cuda.synchronize()
        return time.perf_counter()

    def elapsed(self) -> float:
        return self.now() - self.start


class TargetSession:
    """The target with its cache backend: prefill, score new tokens, roll back rejected ones."""

    def __init__(self, backend) -> None:
        self.backend = backend

    def prefill(self, prompt: EncodedPrompt, drafts: list[int] = (),
                layout: TreeLayout | None = None) -> torch.Tensor:
        """The prompt's pass, with any draft tokens after it (a chain, or a tree laid out by `layout`):
        logits (len(drafts) + 1, V), the first scoring the answer's first token."""
        ids = prompt.input_ids
        if drafts:
            ids = torch.cat([ids, torch.tensor([list(drafts)], dtype=ids.dtype, device=ids.device)], dim=1)
        mask = torch.ones_like(ids)
        return self.backend.prefill(mask, keep=len(drafts) + 1, layout=layout, input_ids=ids,
                                    **prompt.image_inputs)[0]

    def forward(self, tokens: list[int], layout: TreeLayout | None = None) -> torch.Tensor:
        """Logits (len(tokens), V): position i scores the token after tokens[i] (after token i of a tree
        laid out by `layout`)."""
        device = self.backend.model.device
        return self.backend.forward(torch.tensor([tokens], dtype=torch.long, device=device), layout)[0]

    def rollback(self, count: int) -> None:
        self.backend.rewind(count)

    def keep(self, count: int, offsets: list[int]) -> None:
        """Of the last `count` tokens (a tree), keep the path at `offsets`."""
        self.backend.keep(count, offsets)
