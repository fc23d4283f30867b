"""Cache backends: how a model runs forwards over a KV cache that is extended and rolled back.

Both the target (batch 1) and the batched drafter (K rows, left-padded) go through one of these:
- `DynamicBackend`: transformers' `DynamicCache`, eager, appending in place (`growing.py`); roll-back
  crops it. Any device.
- `StaticBackend`: a `StaticCache` allocated once per model and batch and reused across requests,
  with fixed-address inputs so that each query length's forward can be captured as a CUDA graph
  (replays cost a fraction of an eager forward's launch overhead). Roll-back rewinds the cache
  lengths in place: entries past the length are masked by causality and overwritten later.
  Without CUDA (or when capture fails) the same code runs eagerly and gives the dynamic path's tokens.
  A drafter's sequence forwards may be compiled before they are captured (`compiled.py`).

Every backend returns logits on the pair's vocabulary with the suppressed tokens masked. A forward may
append a token tree instead of a sequence (`TreeLayout`: each token sees only its ancestors among the
tree's tokens, at its depth's position), and `keep` then compacts the cache to one path of the tree.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import DynamicCache, LlavaForConditionalGeneration, StaticCache

from .compiled import CompiledForward
from .growing import growing_cache
from .lean import lean_decoder

CACHES = ("dynamic", "static")
TREE_GRAPH_TOKENS = 4  # tree forwards of at most this many tokens (a drafter's frontier) are replayed as graphs,
TREE_GRAPH_SPAN = 128  # within a tree of at most this many tokens (more: eager)
TREE_VERIFY_BUCKETS = (8, 16, 32, 64, 128)  # a target's whole tree is padded to one of these and replayed


def capture_graph(run: Callable[[], object], warm_ups: int = 1,
                  undo: Callable[[], None] | None = None) -> tuple[torch.cuda.CUDAGraph, object]:
    """`run` captured as a CUDA graph, and what it returned (its outputs, at fixed addresses, are what each
    replay rewrites). Before the capture it runs `warm_ups` times eagerly on a side stream (kernels
    loaded, workspaces made), each followed by `undo` where running has effects to take back."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(warm_ups):
            run()
            if undo is not None:
                undo()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = run()
    return graph, out


def text_path(model) -> tuple[torch.nn.Module, torch.nn.Module] | None:
    """A LLaVA's language model and output head, for forwards of token ids alone: its own forward adds nothing
    to them without pixels but the wrapper's Python, about a seventh of a small drafter's step on a CPU
    (0.12 of 0.84 ms on the teaching drafter). None for other models, which run whole."""
    if isinstance(model, LlavaForConditionalGeneration):
        return model.get_decoder(), model.get_output_embeddings()
    return None


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


@dataclass
class TreeLayout:
    """How the appended tokens of a tree forward sit: token i's position is the tree's first position
    plus `offsets[i]`; among the last `span` cache entries (the tree's tokens so far, these included),
    token i sees entry j only where `visible[i, j]` (its ancestors and itself); all before them it sees."""

    offsets: torch.Tensor  # (q,) long
    visible: torch.Tensor  # (q, span) bool

    @property
    def span(self) -> int:
        return int(self.visible.shape[1])


def limit_to_tree(attend: torch.Tensor, layout: TreeLayout | None, end: int | None = None) -> torch.Tensor:
    """`attend` (B, 1, queries, slots) with its last queries, a tree's tokens (as many as `layout` places),
    limited to their ancestors among the tree's `span` slots, which end at `end` (default: the last)."""
    if layout is None:
        return attend
    end = attend.shape[-1] if end is None else end
    attend = attend.clone()
    attend[..., -layout.visible.shape[0]:, end - layout.span:end] &= layout.visible.to(attend.device)
    return attend


def _pad_visible(visible: torch.Tensor, size: int) -> torch.Tensor:
    """A tree's visibility (n, n) grown to (size, size) for padding tokens that each see only themselves."""
    grown = torch.eye(size, dtype=torch.bool, device=visible.device)
    grown[:visible.shape[0], :visible.shape[1]] = visible
    return grown


def _keep_entries(layers, base: int, offsets: list[int]) -> None:
    """Move the entries at `base + offsets` of each layer's keys and values (B, H, slots, D) to `base`
    onwards, in order: a tree in the cache from `base`, compacted to one path."""
    if offsets == list(range(len(offsets))):
        return
    source = None
    for layer in layers:
        for tensor in (layer.keys, layer.values):
            if source is None:
                source = torch.tensor(offsets, dtype=torch.long, device=tensor.device) + base
            tensor[..., base:base + len(offsets), :] = tensor[..., source, :]


def prefill_positions(mask: torch.Tensor, layout: TreeLayout | None = None) -> torch.Tensor:
    """Position ids of a left-padded batch: 0 at each row's first real token; a tree after the prompt
    (its last `layout.span` tokens) at its depths' positions."""
    positions = (mask.cumsum(dim=-1) - 1).clamp_min(0)
    if layout is None:
        return positions
    first = mask.shape[1] - layout.span
    return torch.cat([positions[:, :first], positions[:, first - 1:first] + 1 + layout.offsets.to(mask.device)[None]],
                     dim=1)


def additive(attend: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A boolean attention pattern as the float mask attention takes as it is: 0 where attended."""
    return torch.zeros(attend.shape, dtype=dtype, device=attend.device).masked_fill_(~attend, torch.finfo(dtype).min)


class DynamicBackend:
    """Eager forwards over a `DynamicCache`; a fresh cache per prefill."""

    def __init__(self, model, vocab_size: int | None = None, suppressed: torch.Tensor | None = None,
                 fused: bool = False) -> None:
        """`fused`: token forwards with each layer's projections joined (`lean.py`: a drafter's, faster, the
        library's logits to rounding, not bit for bit)."""
        self.model = model
        self.text_path = text_path(model)
        self.lean = lean_decoder(*self.text_path, fused=fused) if self.text_path is not None else None
        self.vocab_size = vocab_size
        self.suppressed = suppressed
        self.cache: DynamicCache | None = None
        self.mask: torch.Tensor | None = None  # (B, cached length): 0 on left padding
        self.lengths: torch.Tensor | None = None  # (B,): real tokens per row, the next position id
        self.padded = False  # without padding no mask is passed: attention takes its plain causal path
        self._bias: torch.Tensor | None = None  # with padding: a single token's additive mask, and room to grow

    @torch.inference_mode()
    def prefill(self, mask: torch.Tensor, keep: int = 1, layout: TreeLayout | None = None, **inputs) -> torch.Tensor:
        """Run the prompt (ids or embeddings, plus any image inputs), ending with a tree when `layout`
        says so; the last `keep` logits (B, keep, V). Embeddings without padding, of which only the last
        logits are wanted (a drafter's rows), go through `LeanDecoder.prefill`."""
        self.cache = growing_cache(self.model.config)
        if self.lean is not None and keep == 1 and layout is None and set(inputs) == {"inputs_embeds"} \
                and bool(mask.all()):
            logits = self.text_path[1](self.lean.prefill(inputs["inputs_embeds"], self.cache))
        else:
            logits = self._prefill_whole(mask, keep, layout, inputs)
        self.mask, self.lengths = mask, mask.sum(dim=-1)
        self._padding_changed()
        return fit_logits(logits[:, -keep:], self.vocab_size, self.suppressed)

    def _prefill_whole(self, mask: torch.Tensor, keep: int, layout: TreeLayout | None, inputs: dict) -> torch.Tensor:
        """The whole model's prefill (pictures, padding, a tree), into the fresh cache; its last `keep` logits."""
        attention = mask
        if layout is not None:
            slots = torch.arange(mask.shape[1], device=mask.device)
            causal, itself = slots[None, :] <= slots[:, None], slots[None, :] == slots[:, None]
            attend = (mask.bool()[:, None, None, :] & causal) | itself
            attention = additive(limit_to_tree(attend, layout), self.model.dtype)
        return self.model(**inputs, attention_mask=attention, position_ids=prefill_positions(mask, layout),
                          cache=self.cache, use_cache=True, logits_to_keep=keep).logits

    @torch.inference_mode()
    def prefill_each(self, embeds: list[torch.Tensor]) -> torch.Tensor:
        """Run prompts of different lengths ((1, L, D) embeddings each) one by one and keep their caches as
        one left-padded batch; the last logits (B, V). Prefilled together, every row would be padded to the
        longest and cost as much as it (a text-only row beside three pictures' tokens, as much as three
        pictures)."""
        logits = self.prefill(embeds[0].new_ones(embeds[0].shape[:2], dtype=torch.long), inputs_embeds=embeds[0])
        for e in embeds[1:]:
            part = DynamicBackend(self.model, self.vocab_size, self.suppressed)
            logits = torch.cat([logits, part.prefill(e.new_ones(e.shape[:2], dtype=torch.long), inputs_embeds=e)])
            self.join(part, list(range(self.mask.shape[0] + 1)))
        return logits[:, -1]

    @torch.inference_mode()
    def forward(self, ids: torch.Tensor, layout: TreeLayout | None = None) -> torch.Tensor:
        """Append ids (B, q) to every row, a sequence or a tree (`layout`); logits (B, q, V)."""
        count = ids.shape[1]
        self.mask = torch.cat([self.mask, self.mask.new_ones(ids.shape)], dim=1)
        if layout is None:
            positions = self.lengths[:, None] + torch.arange(count, device=ids.device)
        else:
            positions = self.lengths[:, None] - (layout.span - count) + layout.offsets.to(ids.device)[None]
        mask = self._float_mask(count, layout) if self.padded or layout is not None else None
        logits = self._logits(ids, positions, mask)
        self.lengths = self.lengths + count
        return fit_logits(logits, self.vocab_size, self.suppressed)

    def _logits(self, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """The new tokens' logits, through the leanest path the model has: `LeanDecoder` (which needs a
        mask for several tokens: it leaves causality to the mask), its language model and head, or whole."""
        if self.lean is not None:
            if mask is None and ids.shape[1] > 1:
                mask = self._float_mask(ids.shape[1])
            return self.lean.logits(ids, positions, mask, self.cache)
        inputs = {"input_ids": ids, "attention_mask": mask, "position_ids": positions, "cache": self.cache,
                  "use_cache": True}
        if self.text_path is None:
            return self.model(**inputs).logits
        decoder, head = self.text_path
        return head(decoder(**inputs).last_hidden_state)

    def _float_mask(self, count: int, layout: TreeLayout | None = None) -> torch.Tensor:
        """(B, 1, count, cached length) additive mask for the last `count` tokens: causal (or the tree's
        `layout`), padding hidden. Taken as it is by attention, it saves transformers building one from
        the 2-D mask at every step (a quarter of a small drafter's step on a CPU)."""
        if count == 1 and layout is None:
            return self._step_mask()
        length = self.mask.shape[1]
        slots = torch.arange(length, device=self.mask.device)
        attend = (self.mask.bool()[:, None, None, :]
                  & (slots[None, None, None, :] <= slots[length - count:][None, None, :, None]))
        return additive(limit_to_tree(attend, layout), self.model.dtype)

    def _step_mask(self) -> torch.Tensor:
        """`_float_mask` of a single token, (B, 1, 1, cached length): a view of the padding's additive mask,
        made once for twice the length (the columns after the padding are all 0) instead of at every step
        (a left-padded drafter's steps are most of its forwards)."""
        length = self.mask.shape[1]
        if self._bias is None or self._bias.shape[-1] < length:
            grown = F.pad(self.mask.bool(), (0, length), value=True)[:, None, None, :]
            self._bias = additive(grown, self.model.dtype)
        return self._bias[..., :length]

    @torch.inference_mode()
    def keep(self, count: int, offsets: list[int]) -> None:
        """Of the last `count` tokens (a tree), keep those at `offsets` (ascending, a path), in order."""
        _keep_entries(self.cache.layers, self.mask.shape[1] - count, offsets)
        self.rewind(count - len(offsets))

    def rewind(self, count: int) -> None:
        """Forget the last `count` tokens of every row."""
        if count > 0:
            self.cache.crop(-count)
            self.mask = self.mask[:, :-count]
            self.lengths = self.lengths - count

    def split(self, rows: list[int]) -> DynamicBackend:
        """Take `rows` out of the batch: they become a backend of their own, with their cache as it is
        now; this one goes on with the others (a batch that costs less per forward)."""
        others = [row for row in range(self.mask.shape[0]) if row not in rows]
        part = DynamicBackend(self.model, self.vocab_size, self.suppressed)
        part.lean, part.text_path = self.lean, self.text_path  # this one's path (fused or not), weights and all
        part.cache = copy.copy(self.cache)  # its own layers, holding this one's tensors until the selection below
        part.cache.layers = [copy.copy(layer) for layer in self.cache.layers]
        part.cache.batch_select_indices(torch.tensor(rows, device=self.mask.device))
        self.cache.batch_select_indices(torch.tensor(others, device=self.mask.device))
        part.mask, part.lengths = self.mask[rows], self.lengths[rows]
        self.mask, self.lengths = self.mask[others], self.lengths[others]
        part._drop_shared_padding()
        self._drop_shared_padding()
        return part

    def join(self, part: DynamicBackend, order: list[int]) -> None:
        """Take the rows of `part` back: the joined batch's row i is row `order[i]` of this batch's rows
        followed by those of `part`."""
        width = max(self.mask.shape[1], part.mask.shape[1])
        self._pad_to(width)
        part._pad_to(width)
        index = torch.tensor(order, device=self.mask.device)
        for mine, theirs in zip(self.cache.layers, part.cache.layers, strict=True):
            mine.keys = torch.cat([mine.keys, theirs.keys])[index]
            mine.values = torch.cat([mine.values, theirs.values])[index]
        self.mask = torch.cat([self.mask, part.mask])[index]
        self.lengths = torch.cat([self.lengths, part.lengths])[index]
        self._padding_changed()

    def _padding_changed(self) -> None:
        """After the mask changed other than by tokens appended or rolled back (a prefill, rows split or
        joined): whether any row is padded, and no single step's mask made for the old padding."""
        self.padded, self._bias = not bool(self.mask.all()), None

    def _drop_shared_padding(self) -> None:
        """Drop the leading cache columns that are padding in every row: a short row left alone in the batch
        (T, once M rests) would otherwise attend through a mask over the pictures' padding at every step."""
        lead = int((self.mask == 0).all(dim=0).long().cumprod(dim=0).sum())
        if lead:
            for layer in self.cache.layers:
                layer.keys, layer.values = layer.keys[..., lead:, :], layer.values[..., lead:, :]
            self.mask = self.mask[:, lead:]
        self._padding_changed()

    def _pad_to(self, width: int) -> None:
        """Left-pad the cache (B, H, L, D) and the mask to `width` columns (to join a batch whose rows are
        longer)."""
        pad = width - self.mask.shape[1]
        if pad > 0:  # the new columns are masked: any value will do
            for layer in self.cache.layers:
                layer.keys, layer.values = F.pad(layer.keys, (0, 0, pad, 0)), F.pad(layer.values, (0, 0, pad, 0))
            self.mask = F.pad(self.mask, (pad, 0))


class StaticBackend:
    """Forwards over a preallocated `StaticCache`, replayed as CUDA graphs where possible.

    Made once per model and batch size (see `ModelPair.backend`); `prefill` starts a new request.
    """

    def __init__(self, model, batch: int, max_len: int, vocab_size: int | None = None,
                 suppressed: torch.Tensor | None = None, graphs: bool = False, compiled: bool = False) -> None:
        self.model = model
        self.batch, self.max_len = batch, max_len
        self.vocab_size, self.suppressed = vocab_size, suppressed
        self.graphs = graphs and model.device.type == "cuda"
        self.tree_graphs = True  # False once a tree forward failed to capture (sequences may still replay)
        self.why_eager: str | None = None  # set when graph capture failed
        device = model.device
        self.cache = StaticCache(config=model.config, max_cache_len=max_len)
        self.slots = torch.arange(max_len, device=device)
        self.valid = torch.ones(batch, max_len, dtype=torch.bool, device=device)  # False on left padding
        self.pads = torch.zeros(batch, 1, dtype=torch.long, device=device)  # left padding per row
        self._inputs: dict = {}  # query length, or ("tree", length, width) -> its fixed-address inputs
        self._graphs: dict = {}  # the same keys -> (graph, its logits)
        # a sequence's forward, compiled where asked (`compiled.py`: a small drafter's kernels fused)
        self._sequence = CompiledForward(self._run) if compiled else self._run

    @property
    def compiled(self) -> bool:
        """Whether its sequence forwards run compiled (asked to, and compiling has not failed)."""
        return isinstance(self._sequence, CompiledForward) and self._sequence.why_not is None

    @property
    def why_uncompiled(self) -> str | None:
        """Why a forward asked to be compiled runs uncompiled (None: it is compiled, or was not asked to be)."""
        return getattr(self._sequence, "why_not", None)

    def _lengths(self):
        return [layer.cumulative_length for layer in self.cache.layers]

    @torch.inference_mode()
    def prefill(self, mask: torch.Tensor, keep: int = 1, layout: TreeLayout | None = None, **inputs) -> torch.Tensor:
        """Start a request: reset the cache and run the prompt eagerly (ending with a tree when `layout`
        says so); the last `keep` logits (B, keep, V)."""
        if mask.shape[0] != self.batch or mask.shape[1] >= self.max_len:
            raise ValueError(f"prefill of {tuple(mask.shape)} does not fit a cache of {self.batch} x {self.max_len}")
        for length in self._lengths():
            length.zero_()
        width = mask.shape[1]
        self.valid.fill_(True)
        self.valid[:, :width] = mask.bool()
        self.pads.copy_((mask == 0).sum(dim=-1, keepdim=True))
        attend = limit_to_tree(self._attend(self.slots[:width]), layout, width)
        out = self.model(**inputs, attention_mask=additive(attend, self.model.dtype),
                         position_ids=prefill_positions(mask, layout), cache=self.cache, use_cache=True,
                         logits_to_keep=keep)
        return fit_logits(out.logits[:, -keep:], self.vocab_size, self.suppressed)

    def _attend(self, query: torch.Tensor) -> torch.Tensor:
        """(B, 1, q, max_len): what queries at cache slots `query` see. A query sees the valid slots up to
        its own; a padding query sees only itself, so that no row is fully masked (that would give NaN
        keys and values in the padding slots)."""
        slots, query = self.slots[None, None, None, :], query[None, None, :, None]
        return (self.valid[:, None, None, :] & (slots <= query)) | (slots == query)

    def _mask(self, query: torch.Tensor) -> torch.Tensor:
        """`_attend` as a float mask, which every attention implementation takes as it is."""
        return additive(self._attend(query), self.model.dtype)

    def _run(self, ids: torch.Tensor) -> torch.Tensor:
        """One forward of ids (B, q) at the cache's length; only device ops, so it can be captured."""
        count = ids.shape[1]
        query = self.cache.layers[0].cumulative_length + torch.arange(count, device=ids.device)  # cache slots
        out = self.model(input_ids=ids, attention_mask=self._mask(query), position_ids=query[None, :] - self.pads,
                         cache=self.cache, use_cache=True)
        return fit_logits(out.logits, self.vocab_size, self.suppressed)

    def _run_tree(self, ids: torch.Tensor, offsets: torch.Tensor, visible: torch.Tensor,
                  before: int | torch.Tensor) -> torch.Tensor:
        """One forward of a tree (B, q) at the cache's length; only device ops, so it can be captured.
        The tree starts `before` tokens back (its earlier tokens in the cache); token i sits `offsets[i]`
        after the tree's start and, among the `visible.shape[1]` slots from the start, sees those where
        `visible[i]` is True (columns past the tree's tokens may be anything: later slots are unseen)."""
        count, width = ids.shape[1], visible.shape[1]
        length = self.cache.layers[0].cumulative_length
        first = length - before  # the tree's first cache slot
        relative = self.slots - first
        inside = (relative >= 0) & (relative < width)
        seen = visible[:, relative.clamp(0, width - 1)]  # (q, slots): visible, read at each slot
        attend = self._attend(length + torch.arange(count, device=ids.device)) & (~inside | seen)
        out = self.model(input_ids=ids, attention_mask=additive(attend, self.model.dtype),
                         position_ids=first + offsets[None, :] - self.pads, cache=self.cache, use_cache=True)
        return fit_logits(out.logits, self.vocab_size, self.suppressed)

    @torch.inference_mode()
    def forward(self, ids: torch.Tensor, layout: TreeLayout | None = None) -> torch.Tensor:
        """Append ids (B, q) to every row, a sequence or a tree (`layout`); logits (B, q, V), a copy the
        next forward leaves alone."""
        if layout is not None:
            return self._forward_tree(ids, layout)
        count = ids.shape[1]
        graph = self._graph(count) if self.graphs else None
        if graph is None:
            return self._sequence(ids)
        replay, out = graph
        self._inputs[count].copy_(ids)
        replay.replay()
        return out.clone()

    def _forward_tree(self, ids: torch.Tensor, layout: TreeLayout) -> torch.Tensor:
        """A tree forward. A drafter's frontier (a few tokens of a tree within TREE_GRAPH_SPAN) goes
        through fixed-address inputs, its visibility padded to the span, and is replayed as a graph where
        there are graphs; so does a target's whole tree where there are graphs, padded to a bucket's size
        (its size changes every block); anything else runs eagerly."""
        count, device = ids.shape[1], ids.device
        if count <= TREE_GRAPH_TOKENS and layout.span <= TREE_GRAPH_SPAN:
            return self._replay_tree(ids, layout, count, TREE_GRAPH_SPAN)
        bucket = self._bucket(count) if self.graphs and self.tree_graphs and layout.span == count else None
        if bucket is None:
            return self._run_tree(ids, layout.offsets.to(device), layout.visible.to(device), layout.span - count)
        return self.padded_tree(ids, layout, bucket)

    @torch.inference_mode()
    def capture_trees(self, token: int, sizes: Iterable[int]) -> None:
        """With graphs, capture the tree forwards of these sizes (ascending) now, in a pair's warm-up on a
        prefilled cache, not in the first timed run that needs each: a frontier of up to TREE_GRAPH_TOKENS
        nodes (a drafter's tree step, a target's smallest trees) and each padded verify size that fits."""
        for size in sizes:
            if not (self.graphs and self.tree_graphs) or size > self._room():
                return
            chain = TreeLayout(torch.arange(size), torch.ones(size, size, dtype=torch.bool).tril())
            self.forward(torch.full((self.batch, size), token, device=self.model.device), chain)
            self.rewind(size)

    def _bucket(self, count: int) -> int | None:
        """The least verify bucket that holds `count` tokens and still fits in the cache."""
        room = self._room()
        return next((size for size in TREE_VERIFY_BUCKETS if count <= size <= room), None)

    def _room(self) -> int:
        """How many more tokens the cache holds."""
        return self.max_len - int(self.cache.layers[0].cumulative_length)

    def padded_tree(self, ids: torch.Tensor, layout: TreeLayout, bucket: int) -> torch.Tensor:
        """A whole tree (its span all in `ids`) padded to `bucket` tokens: the padding sees only itself and
        the prompt, nothing real sees it, and its cache entries are rolled back at once."""
        count = ids.shape[1]
        logits = self._replay_tree(torch.nn.functional.pad(ids, (0, bucket - count)),
                                   TreeLayout(torch.nn.functional.pad(layout.offsets, (0, bucket - count)),
                                              _pad_visible(layout.visible, bucket)), bucket, bucket)
        self.rewind(bucket - count)
        return logits[:, :count]

    def _replay_tree(self, ids: torch.Tensor, layout: TreeLayout, count: int, width: int) -> torch.Tensor:
        """A tree forward of `count` tokens through the fixed-address inputs of (count, width), its
        visibility padded to `width` columns; replayed as a graph where there are graphs."""
        inputs = self._tree_inputs(count, width)
        tokens, offsets, visible, before = inputs
        tokens.copy_(ids)
        offsets.copy_(layout.offsets)
        visible.copy_(torch.nn.functional.pad(layout.visible, (0, width - layout.span)))
        before.fill_(layout.span - count)
        graph = self._graph(("tree", count, width)) if self.graphs and self.tree_graphs else None
        if graph is None:
            return self._run_tree(*inputs)
        replay, out = graph
        replay.replay()
        return out.clone()

    def _tree_inputs(self, count: int, width: int) -> tuple[torch.Tensor, ...]:
        """Fixed-address inputs of a tree forward of `count` tokens within `width` slots: ids, offsets,
        visibility, and how many of the tree's tokens came before."""
        key = ("tree", count, width)
        if key not in self._inputs:
            device = self.model.device
            self._inputs[key] = (torch.zeros(self.batch, count, dtype=torch.long, device=device),
                                 torch.arange(count, device=device),
                                 torch.ones(count, width, dtype=torch.bool, device=device),
                                 torch.zeros((), dtype=torch.long, device=device))
        return self._inputs[key]

    def _graph(self, key: int | tuple[str, int, int]):
        """The captured forward of `key` (a token count, or ("tree", count, width)), captured on first use; None
        when capture fails."""
        if key not in self._graphs:
            try:
                self._graphs[key] = self._capture(key)
            except (RuntimeError, AssertionError) as exc:  # an unsupported model or a place without graphs
                what = "tree forwards" if isinstance(key, tuple) else "forwards"
                self.why_eager = f"CUDA graph capture failed ({str(exc).splitlines()[0]}): {what} run eager"
                if isinstance(key, tuple):  # sequences keep their graphs
                    self.tree_graphs = False
                else:
                    self.graphs = False
                return None
        return self._graphs.get(key)

    def _capture(self, key: int | tuple[str, int, int]):
        """Capture a forward (after two eager warm-ups on a side stream) over fixed-address inputs: a
        sequence of `key` tokens, or a tree of ("tree", count, width) tokens (warmed up on the inputs it is
        about to replay)."""
        if isinstance(key, tuple):
            count = key[1]
            run = functools.partial(self._run_tree, *self._tree_inputs(*key[1:]))
        else:
            count = key
            ids = self._inputs.setdefault(key, torch.zeros(self.batch, count, dtype=torch.long,
                                                           device=self.model.device))
            run = functools.partial(self._sequence, ids)
        return capture_graph(run, warm_ups=2, undo=functools.partial(self.rewind, count))

    @torch.inference_mode()
    def keep(self, count: int, offsets: list[int]) -> None:
        """Of the last `count` tokens (a tree), keep those at `offsets` (ascending, a path), in order."""
        _keep_entries(self.cache.layers, int(self.cache.layers[0].cumulative_length) - count, offsets)
        self.rewind(count - len(offsets))

    @torch.inference_mode()
    def rewind(self, count: int) -> None:
        """Forget the last `count` tokens of every row: lengths go back, entries stay until overwritten."""
        if count > 0:
            for length in self._lengths():
                length.sub_(count)
