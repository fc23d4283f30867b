"""Cache backends: how a model runs forwards over a KV cache that is extended and rolled back.

Both the target (batch 1) and the batched drafter (K rows, left-padded) go through one of these:
- `DynamicBackend`: transformers' `DynamicCache`, eager; roll-back crops it. Any device.
- `StaticBackend`: a `StaticCache` allocated once per model and batch and reused across requests,
  with fixed-address inputs so that each query length's forward can be captured as a CUDA graph
  (replays cost a fraction of an eager forward's launch overhead). Roll-back rewinds the cache
  lengths in place: entries past the length are masked by causality and overwritten later.
  Without CUDA (or when capture fails) the same code runs eagerly and gives the dynamic path's tokens.

Every backend returns logits on the pair's vocabulary with the suppressed tokens masked.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache, StaticCache

CACHES = ("dynamic", "static")


def fit_logits(logits: torch.Tensor, vocab_size: int | None, suppressed: torch.Tensor | None) -> torch.Tensor:
    """Logits on `vocab_size` entries (cut or padded with -inf) with the `suppressed` ids at -inf."""
    if vocab_size is not None and logits.shape[-1] > vocab_size:
        logits = logits[..., :vocab_size]
    elif vocab_size is not None and logits.shape[-1] < vocab_size:
        pad = logits.new_full((*logits.shape[:-1], vocab_size - logits.shape[-1]), float("-inf"))
        logits = torch.cat([logits, pad], dim=-1)
    if suppressed is not None and suppressed.numel():
        logits = logits.index_fill(-1, suppressed, float("-inf"))
    return logits


def prefill_positions(mask: torch.Tensor) -> torch.Tensor:
    """Position ids of a left-padded batch: 0 at each row's first real token."""
    return (mask.cumsum(dim=-1) - 1).clamp_min(0)


class DynamicBackend:
    """Eager forwards over a `DynamicCache`; a fresh cache per prefill."""

    def __init__(self, model, vocab_size: int | None = None, suppressed: torch.Tensor | None = None) -> None:
        self.model = model
        self.vocab_size = vocab_size
        self.suppressed = suppressed
        self.cache: DynamicCache | None = None
        self.mask: torch.Tensor | None = None  # (B, cached length): 0 on left padding
        self.lengths: torch.Tensor | None = None  # (B,): real tokens per row, the next position id
        self.padded = False  # without padding no mask is passed: attention takes its plain causal path

    @torch.inference_mode()
    def prefill(self, mask: torch.Tensor, keep: int = 1, **inputs) -> torch.Tensor:
        """Run the prompt (ids or embeddings, plus any image inputs); the last `keep` logits (B, keep, V)."""
        self.cache = DynamicCache(config=self.model.config)
        out = self.model(**inputs, attention_mask=mask, position_ids=prefill_positions(mask),
                         past_key_values=self.cache, use_cache=True, logits_to_keep=keep)
        self.mask, self.lengths, self.padded = mask, mask.sum(dim=-1), not bool(mask.all())
        return fit_logits(out.logits[:, -keep:], self.vocab_size, self.suppressed)

    @torch.inference_mode()
    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Append ids (B, q) to every row; logits (B, q, V)."""
        count = ids.shape[1]
        self.mask = torch.cat([self.mask, self.mask.new_ones(ids.shape)], dim=1)
        positions = self.lengths[:, None] + torch.arange(count, device=ids.device)
        out = self.model(input_ids=ids, attention_mask=self._float_mask(count) if self.padded else None,
                         position_ids=positions, past_key_values=self.cache, use_cache=True)
        self.lengths = self.lengths + count
        return fit_logits(out.logits, self.vocab_size, self.suppressed)

    def _float_mask(self, count: int) -> torch.Tensor:
        """(B, 1, count, cached length) additive mask for the last `count` tokens: causal, padding hidden.
        Taken as it is by attention, it saves transformers building one from the 2-D mask at every step
        (a quarter of a small drafter's step on a CPU)."""
        length = self.mask.shape[1]
        slots = torch.arange(length, device=self.mask.device)
        attend = (self.mask.bool()[:, None, None, :]
                  & (slots[None, None, None, :] <= slots[length - count:][None, None, :, None]))
        return torch.zeros(attend.shape, dtype=self.model.dtype, device=self.mask.device).masked_fill_(
            ~attend, torch.finfo(self.model.dtype).min)

    def rewind(self, count: int) -> None:
        """Forget the last `count` tokens of every row."""
        if count > 0:
            self.cache.crop(-count)
            self.mask = self.mask[:, :-count]
            self.lengths = self.lengths - count


class StaticBackend:
    """Forwards over a preallocated `StaticCache`, replayed as CUDA graphs where possible.

    Made once per model and batch size (see `ModelPair.backend`); `prefill` starts a new request.
    """

    def __init__(self, model, batch: int, max_len: int, vocab_size: int | None = None,
                 suppressed: torch.Tensor | None = None, graphs: bool = False) -> None:
        self.model = model
        self.batch, self.max_len = batch, max_len
        self.vocab_size, self.suppressed = vocab_size, suppressed
        self.graphs = graphs and model.device.type == "cuda"
        self.why_eager: str | None = None  # set when graph capture failed
        device = model.device
        self.cache = StaticCache(config=model.config, max_cache_len=max_len)
        self.slots = torch.arange(max_len, device=device)
        self.valid = torch.ones(batch, max_len, dtype=torch.bool, device=device)  # False on left padding
        self.pads = torch.zeros(batch, 1, dtype=torch.long, device=device)  # left padding per row
        self.min = torch.finfo(model.dtype).min
        self._inputs: dict[int, torch.Tensor] = {}  # query length -> fixed-address ids (B, q)
        self._graphs: dict[int, tuple[torch.cuda.CUDAGraph, torch.Tensor]] = {}

    def _lengths(self):
        return [layer.cumulative_length for layer in self.cache.layers]

    @torch.inference_mode()
    def prefill(self, mask: torch.Tensor, keep: int = 1, **inputs) -> torch.Tensor:
        """Start a request: reset the cache and run the prompt eagerly; the last `keep` logits (B, keep, V)."""
        if mask.shape[0] != self.batch or mask.shape[1] >= self.max_len:
            raise ValueError(f"prefill of {tuple(mask.shape)} does not fit a cache of {self.batch} x {self.max_len}")
        for length in self._lengths():
            length.zero_()
        width = mask.shape[1]
        self.valid.fill_(True)
        self.valid[:, :width] = mask.bool()
        self.pads.copy_((mask == 0).sum(dim=-1, keepdim=True))
        out = self.model(**inputs, attention_mask=self._mask(self.slots[:width]), position_ids=prefill_positions(mask),
                         past_key_values=self.cache, use_cache=True, logits_to_keep=keep)
        return fit_logits(out.logits[:, -keep:], self.vocab_size, self.suppressed)

    def _mask(self, query: torch.Tensor) -> torch.Tensor:
        """(B, 1, q, max_len) float mask for queries at cache slots `query`: 0 where attended.

        A query sees the valid slots up to its own; a padding query sees only itself, so that no row is
        fully masked (that would give NaN keys and values in the padding slots). A float mask is taken
        as it is by every attention implementation."""
        slots, query = self.slots[None, None, None, :], query[None, None, :, None]
        attend = (self.valid[:, None, None, :] & (slots <= query)) | (slots == query)
        return torch.zeros(attend.shape, dtype=self.model.dtype, device=query.device).masked_fill_(~attend, self.min)

    def _run(self, ids: torch.Tensor) -> torch.Tensor:
        """One forward of ids (B, q) at the cache's length; only device ops, so it can be captured."""
        count = ids.shape[1]
        query = self.cache.layers[0].cumulative_length + torch.arange(count, device=ids.device)  # cache slots
        out = self.model(input_ids=ids, attention_mask=self._mask(query), position_ids=query[None, :] - self.pads,
                         past_key_values=self.cache, use_cache=True)
        return fit_logits(out.logits, self.vocab_size, self.suppressed)

    @torch.inference_mode()
    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Append ids (B, q) to every row; logits (B, q, V), a copy the next forward leaves alone."""
        count = ids.shape[1]
        graph = self._graph(count) if self.graphs else None
        if graph is None:
            return self._run(ids)
        replay, out = graph
        self._inputs[count].copy_(ids)
        replay.replay()
        return out.clone()

    def _graph(self, count: int):
        """The captured forward of `count` tokens (captured on first use), or None when capture fails."""
        if count not in self._graphs:
            try:
                self._graphs[count] = self._capture(count)
            except (RuntimeError, AssertionError) as exc:  # an unsupported model or a place without graphs
                self.graphs = False
                self.why_eager = f"CUDA graph capture failed ({str(exc).splitlines()[0]}): running eager"
                return None
        return self._graphs.get(count)

    def _capture(self, count: int):
        """Capture the forward of `count` tokens (after two eager warm-ups on a side stream)."""
        ids = self._inputs.setdefault(count, torch.zeros(self.batch, count, dtype=torch.long,
                                                         device=self.model.device))
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                self._run(ids)
                self.rewind(count)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = self._run(ids)
        return graph, out

    @torch.inference_mode()
    def rewind(self, count: int) -> None:
        """Forget the last `count` tokens of every row: lengths go back, entries stay until overwritten."""
        if count > 0:
            for length in self._lengths():
                length.sub_(count)
