"""A Llama language model's forward over new tokens, without transformers' wrapper Python.

A step of the teaching drafter (2 layers, 128 wide) costs about 0.8 ms on a 2-core CPU, and its
arithmetic a fraction of that: the rest is the Python around it (the model's, each layer's and each
attention's forward, the mask builder, the output classes, the keyword plumbing). `LeanDecoder` calls
the same parts in a plain loop — each layer's norms, projections and MLP modules, the model's rotary
embedding, transformers' `apply_rotary_pos_emb`, the cache's own `update` and torch's attention — and
gives the same hidden states, bit for bit (the tests check it), for about 0.5 ms. It serves a dynamic
cache backend's token forwards (draft steps, verifies, trees, catch-ups: the CPU's; a GPU's static
caches replay CUDA graphs instead), for the target too, so that plain decoding gets it as well. It also
prefills the drafter's rows from their embeddings (`prefill`), where only the last position's logits are
wanted: every layer's keys and values are made for every position, but the last layer's queries,
attention and MLP only for the last position, the only one its output reaches (the M row of three
pictures, 1,040 tokens: 40 ms against 66 on a 2-core CPU). The target's prefill, which carries pixels,
still runs the whole model. Only transformers' own `LlamaModel` with SDPA attention qualifies (LLaVA-1.5's
language model, the paper's drafter and the teaching pair's); any other model runs whole.

A drafter's token forwards go one step further (`fused`): each layer's query, key and value projections
are one product, its gate and up projections one more, every weight stored transposed (x·W, which MKL
multiplies faster than x·Wᵀ at these sizes), the output head's too. On a 2-core CPU the teaching drafter's
14 small products a step, each costing nearly twice as much for two rows as for one, become 8: a step 12-15%
faster, one row or two. And a step of several rows multiplies them as a batch of one-row products against
the same weight (`torch.bmm` over a stride-0 view), which MKL runs for two rows at about 1.3 times one row
where one product of two rows costs nearly twice: a two-row step another 5-7% faster, 1.12-1.27 one-row
steps instead of 1.19-1.35. The sums run in another order, so its logits are the library's to rounding
(1e-5), not bit for bit: drafts may differ from the library's at a near-tie, never the output, which the
target's verification decides. The target stays unfused: its layers multiply in the order `matmul.py` chose
per row count, and joined copies of a 7B target's weights would double its memory. So does the prefill, whose
keys and values the tests hold to the library's.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import LlamaModel
from transformers.cache_utils import Cache
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb


@dataclass(frozen=True)
class Joined:
    """Linear layers that read the same input as one product: their weights side by side, transposed."""

    weight: torch.Tensor  # (in, sum of the outputs' widths)
    bias: torch.Tensor | None
    widths: tuple[int, ...]

    @classmethod
    def of(cls, *linears: nn.Linear) -> Joined:
        weight = torch.cat([linear.weight for linear in linears]).t().contiguous()
        bias = None
        if any(linear.bias is not None for linear in linears):
            bias = torch.cat([linear.bias if linear.bias is not None else linear.weight.new_zeros(linear.out_features)
                              for linear in linears])
        return cls(weight, bias, tuple(linear.out_features for linear in linears))

    def __call__(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Each layer's output of `x` (B, q, in), as views of the one product (a single layer's is the product:
        a split costs about 9 µs, and a drafter step makes 5 such products). A step of several rows (q = 1)
        multiplies them as a batch of one-row products against the same weight, which MKL runs as cheaply as
        one row and a third (two rows as one product: nearly twice one row, on a 2-core CPU)."""
        if x.dim() == 3 and x.shape[0] > 1 and x.shape[1] == 1:
            out = torch.bmm(x, self.weight.expand(x.shape[0], -1, -1))
        else:
            out = torch.matmul(x, self.weight)
        if self.bias is not None:
            out = out + self.bias
        return (out,) if len(self.widths) == 1 else out.split(self.widths, dim=-1)


@dataclass(frozen=True)
class FusedLayer:
    """A decoder layer's projections in four products: query, key and value; output; gate and up; down."""

    qkv: Joined
    out: Joined
    gate_up: Joined
    down: Joined

    @classmethod
    def of(cls, layer: nn.Module) -> FusedLayer:
        attention, mlp = layer.self_attn, layer.mlp
        return cls(Joined.of(attention.q_proj, attention.k_proj, attention.v_proj), Joined.of(attention.o_proj),
                   Joined.of(mlp.gate_proj, mlp.up_proj), Joined.of(mlp.down_proj))


class LeanDecoder:
    """A `LlamaModel`'s layers called directly: hidden states for new tokens over a cache; `fused`: with each
    layer's projections joined (`FusedLayer`), made at the first token forward from the weights as they are."""

    def __init__(self, model: LlamaModel, fused: bool = False, head: nn.Linear | None = None) -> None:
        self.model = model
        self.layers = list(model.layers[:model.config.num_hidden_layers])
        self.fused = fused
        self.head = head  # the output head, for `logits`
        self._fused: list[FusedLayer] | None = None
        self._fused_head: Joined | None = None

    def fused_layers(self) -> list[FusedLayer] | list[None]:
        """Each layer's joined projections (made once), or None for each where not fused."""
        if not self.fused:
            return [None] * len(self.layers)
        if self._fused is None:
            self._fused = [FusedLayer.of(layer) for layer in self.layers]
        return self._fused

    def __call__(self, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | None,
                 cache: Cache) -> torch.Tensor:
        """The final hidden states (B, q, D) of `ids` (B, q) at `positions` (B, q), appended to `cache`;
        `mask`: an additive (B, 1, q, cached + q) mask, or None where every new token sees the whole cache
        (one token a row, no padding: `is_causal` would align a longer query wrongly, so give a mask)."""
        hidden = self.model.embed_tokens(ids)
        rotary = self.model.rotary_emb(hidden, positions)
        for index, (layer, fused) in enumerate(zip(self.layers, self.fused_layers(), strict=True)):
            hidden = hidden + self._attention(index, layer.input_layernorm(hidden), rotary, mask, cache, fused=fused)
            normed = layer.post_attention_layernorm(hidden)
            if fused is None:
                hidden = hidden + layer.mlp(normed)
            else:
                gate, up = fused.gate_up(normed)
                hidden = hidden + fused.down(layer.mlp.act_fn(gate) * up)[0]
        return self.model.norm(hidden)

    def logits(self, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | None,
               cache: Cache) -> torch.Tensor:
        """The logits (B, q, V) of `ids`, as `__call__` takes them, through the output head (joined too where
        fused)."""
        hidden = self(ids, positions, mask, cache)
        if not self.fused:
            return self.head(hidden)
        if self._fused_head is None:
            self._fused_head = Joined.of(self.head)
        return self._fused_head(hidden)[0]

    def prefill(self, embeds: torch.Tensor, cache: Cache) -> torch.Tensor:
        """The final hidden state (B, 1, D) of the last of `embeds` (B, L, D), rows without padding, put into
        the empty `cache`. The keys and values are the library's, bit for bit; the last layer attends and runs
        its MLP for the last position alone, so that its hidden state matches the library's to rounding."""
        positions = torch.arange(embeds.shape[1], device=embeds.device)[None]
        hidden, rotary = embeds, self.model.rotary_emb(embeds, positions)
        for index, layer in enumerate(self.layers):
            last = 1 if index == len(self.layers) - 1 else None  # the whole prompt before the last layer
            attended = self._attention(index, layer.input_layernorm(hidden), rotary, None, cache,
                                       causal=last is None, last=last)
            hidden = hidden[:, -attended.shape[1]:] + attended
            hidden = hidden + layer.mlp(layer.post_attention_layernorm(hidden))
        return self.model.norm(hidden)

    def _attention(self, index: int, hidden: torch.Tensor, rotary: tuple[torch.Tensor, torch.Tensor],
                   mask: torch.Tensor | None, cache: Cache, causal: bool = False, last: int | None = None,
                   fused: FusedLayer | None = None) -> torch.Tensor:
        """Layer `index`'s `LlamaAttention.forward` with SDPA, as transformers runs it for a mask it is given, or
        `causal` (a prompt into an empty cache). `last`: queries for the last `last` positions only, each seeing
        every key (keys and values are made for all). `fused`: the layer's projections joined (token forwards
        only, never with `last`)."""
        attention = self.layers[index].self_attn
        shape = (*hidden.shape[:-1], -1, attention.head_dim)
        if fused is not None:
            query, key, value = (part.view(shape).transpose(1, 2) for part in fused.qkv(hidden))
        else:
            key = attention.k_proj(hidden).view(shape).transpose(1, 2)
            value = attention.v_proj(hidden).view(shape).transpose(1, 2)
        if last:
            cos, sin = rotary
            hidden = hidden[:, -last:]
            query = attention.q_proj(hidden).view(*hidden.shape[:-1], -1, attention.head_dim).transpose(1, 2)
            query = apply_rotary_pos_emb(query, query, cos[:, -last:], sin[:, -last:])[0]
            key = apply_rotary_pos_emb(key, key, cos, sin)[1]
        else:
            if fused is None:
                query = attention.q_proj(hidden).view(shape).transpose(1, 2)
            query, key = apply_rotary_pos_emb(query, key, *rotary)
        key, value = cache.update(key, value, index)
        out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, is_causal=causal,
                                             scale=attention.scaling, enable_gqa=attention.num_key_value_groups > 1)
        out = out.transpose(1, 2).reshape(*hidden.shape[:-1], -1)
        return attention.o_proj(out.contiguous()) if fused is None else fused.out(out)[0]


def lean_decoder(decoder: torch.nn.Module, head: nn.Linear | None = None, fused: bool = False) -> LeanDecoder | None:
    """A `LeanDecoder` for transformers' own `LlamaModel` with SDPA attention and its output `head` (`fused`:
    its projections joined); None for any other model."""
    if type(decoder) is LlamaModel and decoder.config._attn_implementation == "sdpa":
        return LeanDecoder(decoder, fused, head)
    return None
