"""The batched drafter: K drafting methods as K rows of ONE forward of one drafter model.

Every row starts from the drafter's own encoding of the conversation (the M row); the other rows
replace each run of image placeholder tokens: T by a newline, C by "image: <caption>", P by a
shorter run filled with 2x2 average-pooled image features. Rows have different lengths, so they are
left-padded, with an attention mask and explicit position ids; after the prompt, every row is
extended with the same tokens, and a rejected block is rolled back in the shared KV cache. Rows may
rest (leave the batch, keeping their cache) and later catch up on what they missed and rejoin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from transformers import LlavaForConditionalGeneration

from ..errors import InputError
from ..models.caches import DynamicBackend
from ..models.chat import EncodedPrompt

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from ..models.caches import TreeLayout


@dataclass
class DrafterRow:
    """One drafting method's prompt: token ids (L,) and the features for its image placeholders."""

    method: str
    input_ids: torch.Tensor
    image_features: torch.Tensor | None = None


def image_token_id(model: PreTrainedModel) -> int:
    config = model.config
    token = getattr(config, "image_token_id", None)
    if token is None:
        token = getattr(config, "image_token_index", None)
    if token is None:
        raise InputError(f"{type(model).__name__} has no image_token_id in its config")
    return int(token)


def image_runs(ids: torch.Tensor, token_id: int) -> list[tuple[int, int]]:
    """(start, end) of each maximal run of `token_id` in a 1-D id tensor."""
    flags = (ids == token_id).tolist()
    runs, start = [], None
    for i, flag in enumerate(flags + [False]):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            runs.append((start, i))
            start = None
    return runs


def splice(ids: torch.Tensor, runs: list[tuple[int, int]], replacements: list[torch.Tensor]) -> torch.Tensor:
    """Replace each run of `ids` by the matching replacement ids."""
    pieces, last = [], 0
    for (start, end), replacement in zip(runs, replacements, strict=True):
        pieces += [ids[last:start], replacement.to(ids.device, ids.dtype)]
        last = end
    pieces.append(ids[last:])
    return torch.cat(pieces)


def newline_ids(tokenizer: PreTrainedTokenizerBase) -> torch.Tensor:
    """The newline token that stands in for an image in the T row (the last piece if it splits)."""
    ids = tokenizer.encode("\n", add_special_tokens=False)
    return torch.tensor(ids[-1:], dtype=torch.long)


def image_features(model: PreTrainedModel, prompt: EncodedPrompt) -> torch.Tensor:
    """The drafter's projected image features for every placeholder of the prompt, (N, D)."""
    out = model.get_image_features(**prompt.image_inputs, return_dict=True)
    return torch.cat(list(out.pooler_output), dim=0)


def vision_features(model: PreTrainedModel, prompt: EncodedPrompt) -> torch.Tensor:
    """A LLaVA-1.5-style drafter's vision features per image, as its projector takes them (B, N, D): the
    configured layer(s) of its vision tower, the CLS token dropped under the "default" strategy."""
    if not isinstance(model, LlavaForConditionalGeneration):
        raise InputError(
            f"pooled drafting (P) needs a LLaVA-1.5-style drafter with a square patch grid; "
            f"{type(model).__name__} is not one"
        )
    config = model.config
    hidden = model.model.vision_tower(prompt.image_inputs["pixel_values"], output_hidden_states=True).hidden_states
    layers = config.vision_feature_layer
    layers = [layers] if isinstance(layers, int) else list(layers)
    skip = 1 if config.vision_feature_select_strategy == "default" else 0
    return torch.cat([hidden[layer][:, skip:] for layer in layers], dim=-1)


def pooled_image_features(model: PreTrainedModel, prompt: EncodedPrompt,
                          features: torch.Tensor | None = None) -> list[torch.Tensor]:
    """Per image, the vision features (`vision_features`, computed unless given) average-pooled 2x2 BEFORE
    the projector (576 -> 144 tokens)."""
    features = vision_features(model, prompt) if features is None else features
    batch, count, width = features.shape
    side = math.isqrt(count)
    if side * side != count or side < 2:
        raise InputError(f"pooled drafting (P) needs a square patch grid; the drafter has {count} patches")
    grid = features.transpose(1, 2).reshape(batch, width, side, side)
    pooled = F.avg_pool2d(grid, kernel_size=2).flatten(2).transpose(1, 2)
    return list(model.model.multi_modal_projector(pooled))


def _shared_vision(model: PreTrainedModel, prompt: EncodedPrompt, methods: tuple[str, ...]) -> torch.Tensor | None:
    """M and P look at the same vision features (P pools them): one pass of the vision tower for both,
    where the drafter is a LLaVA that takes one image per image grid (no `image_sizes`)."""
    if {"M", "P"} <= set(methods) and isinstance(model, LlavaForConditionalGeneration) \
            and "pixel_values" in prompt.image_inputs and "image_sizes" not in prompt.image_inputs:
        return vision_features(model, prompt)
    return None


def build_rows(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompt: EncodedPrompt,
    methods: tuple[str, ...],
    captions: list[str] | None = None,
) -> list[DrafterRow]:
    """The prompt of each drafting method, derived from the drafter's own (M) encoding."""
    ids = prompt.input_ids[0]
    token_id = image_token_id(model)
    runs = image_runs(ids, token_id)
    rows = []
    shared = _shared_vision(model, prompt, methods) if runs else None
    for method in methods:
        if not runs or method == "T":
            replacements = [newline_ids(tokenizer)] * len(runs)
            rows.append(DrafterRow(method, splice(ids, runs, replacements)))
        elif method == "M":
            features = image_features(model, prompt) if shared is None else torch.cat(
                list(model.model.multi_modal_projector(shared)))
            rows.append(DrafterRow(method, ids, features))
        elif method == "C":
            if captions is None or len(captions) != len(runs):
                raise InputError(f"caption drafting (C) needs one caption per image ({len(runs)})")
            replacements = [
                torch.tensor(tokenizer.encode(f"image: {caption}", add_special_tokens=False), dtype=torch.long)
                for caption in captions
            ]
            rows.append(DrafterRow(method, splice(ids, runs, replacements)))
        elif method == "P":
            pooled = pooled_image_features(model, prompt, shared)
            if len(pooled) != len(runs):
                raise InputError(f"pooled drafting (P): {len(pooled)} images but {len(runs)} placeholders")
            replacements = [torch.full((f.shape[0],), token_id, dtype=torch.long) for f in pooled]
            rows.append(DrafterRow(method, splice(ids, runs, replacements), torch.cat(pooled)))
        else:
            raise InputError(f"unknown drafting method {method!r}")
    return rows


class BatchedDrafter:
    """K rows sharing one drafter's weights and one left-padded KV cache (held by a cache backend)."""

    def __init__(self, model, rows: list[DrafterRow], backend) -> None:
        self.model = model
        self.rows = rows
        self.device = model.device
        self.backend = backend
        self.active = list(range(len(rows)))  # the rows in the batch, in batch order
        self.rest_backend: DynamicBackend | None = None  # the other rows, with their caches as they left
        self.resting_rows: list[int] = []

    @property
    def can_rest(self) -> bool:
        """Rows can leave the batch of a dynamic cache (a static one keeps its batch size)."""
        return len(self.rows) > 1 and isinstance(self.backend, DynamicBackend)

    @property
    def batch_rows(self) -> list[int] | None:
        """The rows each batch row is, while some rest; None when every row runs."""
        return self.active if self.rest_backend is not None else None

    def rest(self, rows: list[int]) -> None:
        """Take these rows out of the draft steps; their caches stay as they are now."""
        self.rest_backend = self.backend.split([self.active.index(row) for row in rows])
        self.resting_rows = list(rows)
        self.active = [row for row in self.active if row not in rows]

    def catch_up(self, tokens: list[int]) -> torch.Tensor:
        """Feed the resting rows the committed tokens they missed, in one forward; their logits after
        each token (R, n, V)."""
        ids = torch.tensor([tokens], dtype=torch.long, device=self.device)
        return self.rest_backend.forward(ids.expand(len(self.resting_rows), -1))

    def wake(self) -> None:
        """The resting rows, caught up, rejoin the batch."""
        batch = self.active + self.resting_rows
        self.backend.join(self.rest_backend, [batch.index(row) for row in sorted(batch)])
        self.active, self.rest_backend, self.resting_rows = sorted(batch), None, []

    def _embed(self, row: DrafterRow) -> torch.Tensor:
        ids = row.input_ids.to(self.device)
        embeds = self.model.get_input_embeddings()(ids)
        if row.image_features is not None:
            slots = ids == image_token_id(self.model)
            if int(slots.sum()) != row.image_features.shape[0]:
                raise InputError(
                    f"row {row.method}: {int(slots.sum())} image placeholders but "
                    f"{row.image_features.shape[0]} image features"
                )
            embeds = embeds.clone()
            embeds[slots] = row.image_features.to(embeds.dtype)
        return embeds

    @torch.inference_mode()
    def prefill(self) -> torch.Tensor:
        """Run every row's prompt; returns the last logits (K, V). A dynamic cache runs rows of different
        lengths one by one (`DynamicBackend.prefill_each`); a static one, whose batch is fixed, in one
        left-padded forward."""
        embeds = [self._embed(row) for row in self.rows]
        if isinstance(self.backend, DynamicBackend) and len({e.shape[0] for e in embeds}) > 1:
            return self.backend.prefill_each([e[None] for e in embeds])
        longest = max(e.shape[0] for e in embeds)
        width = embeds[0].shape[1]
        batch = embeds[0].new_zeros(len(embeds), longest, width)
        mask = torch.zeros(len(embeds), longest, dtype=torch.long, device=self.device)
        for i, e in enumerate(embeds):
            batch[i, longest - e.shape[0]:] = e
            mask[i, longest - e.shape[0]:] = 1
        return self.backend.prefill(mask, inputs_embeds=batch)[:, -1]

    def step(self, tokens: list[int] | torch.Tensor) -> torch.Tensor:
        """Append the same tokens (a list, or ids already on the device) to every row in the batch;
        returns each one's next-token logits (rows, V)."""
        if not isinstance(tokens, torch.Tensor):
            tokens = torch.tensor(tokens, dtype=torch.long, device=self.device)
        return self.backend.forward(tokens.expand(len(self.active), tokens.shape[0]))[:, -1]

    def step_tree(self, tokens: list[int], layout: TreeLayout | None) -> torch.Tensor:
        """Append the same token-tree nodes to every row in the batch, placed by `layout` (a `TreeLayout`, or
        None when they extend the sequence plainly); returns each one's next-token logits after each node
        (rows, q, V)."""
        ids = torch.tensor([tokens], dtype=torch.long, device=self.device)
        return self.backend.forward(ids.expand(len(self.active), -1), layout)

    def keep(self, count: int, offsets: list[int]) -> None:
        """Of the last `count` tokens (tree nodes), keep those at `offsets` (the accepted path's)."""
        self.backend.keep(count, offsets)

    def rollback(self, count: int) -> None:
        """Forget the last `count` tokens of every row (the rejected drafts)."""
        self.backend.rewind(count)
