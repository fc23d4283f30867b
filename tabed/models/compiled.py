"""A drafter's forward compiled, for its CUDA graphs on a GPU.

Replayed as a CUDA graph, a small drafter's step costs no launch overhead, but it is still about a
hundred tiny kernels (each norm, rotation and mask a few kernels of its own), each taking a few
microseconds of the GPU however little it computes: half a millisecond a step for the teaching drafter
widened to the 68M drafter's shape, against a few tens of microseconds of actual work. `torch.compile`
fuses them. On an H200 that made T alone 2.27x -> 2.46x plain decoding and the default 2.34x -> 2.48x
(one case per scenario), for about 20 s more warm-up. The target keeps its uncompiled forward: its step is
bound by reading its weights, which fusing does not change.

The whole forward is traced at once (`fullgraph`), so that a model that cannot be compiled fails before
any of it runs; it then runs uncompiled, and the pair says why. Each shape is compiled once: a step of one
or two tokens for each number of rows (1 to 4: T, MT, MTC, MTCP), eight in all, which is as many as
torch compiles of one function (`torch._dynamo.config.recompile_limit`; another pair of the same shapes
reuses them); past them a forward runs uncompiled and says so.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


class CompiledForward:
    """`run` compiled for each shape it is called with (the first call of a shape compiles it), or `run`
    itself once compiling failed (`why_not` says why)."""

    def __init__(self, run: Callable[..., torch.Tensor]) -> None:
        self.run = run
        self.compiled = torch.compile(run, fullgraph=True, dynamic=False)
        self.why_not: str | None = None

    def __call__(self, *args: torch.Tensor) -> torch.Tensor:
        if self.why_not is None:
            try:
                return self.compiled(*args)
            except Exception as exc:  # any failure to compile (no compiler, an untraceable model): run as it is
                said = str(exc).strip().splitlines()
                self.why_not = (f"the drafter's forward could not be compiled ({type(exc).__name__}"
                                f"{': ' + said[0] if said else ''}): it runs uncompiled")
        return self.run(*args)
