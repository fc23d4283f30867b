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
steps instead of 1.19-1.35. Its small operations are fewer too: the query and key projections also give their
rotated halves (`rotated_half`), so that both are rotated in three operations instead of fourteen; the rotary
embedding's cos and sin are rows of a table; each norm is torch's `rms_norm`, one call. A step 9-13% faster,
one row or two. The sums run in another order, so its logits are the library's to rounding
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

FIXED_ROPE = ("default", "linear", "llama3", "yarn")  # rotary embeddings whose cos and sin depend on positions alone
ROPE_ROWS = 512  # positions in a fused decoder's first table of them


@dataclass(frozen=True)
class Joined:
    """Linear layers that read the same input as one product: their weights side by side, transposed."""

    weight: torch.Tensor  # (in, sum of the outputs' widths)
    bias: torch.Tensor | None
    widths: tuple[int, ...]

    @classmethod
    def of(cls, *linears: nn.Linear) -> Joined:
        return cls.stacked(*((linear.weight, linear.bias) for linear in linears))

    @classmethod
    def stacked(cls, *parts: tuple[torch.Tensor, torch.Tensor | None]) -> Joined:
        """Parts given as (weight (out, in), bias or None), each one output of the product."""
        weight, bias = stacked(*parts)
        return cls(weight.t().contiguous(), bias, tuple(part.shape[0] for part, _ in parts))

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


def stacked(*parts: tuple[torch.Tensor, torch.Tensor | None]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Linear layers' (weight (out, in), bias or None) as one: the weights stacked, the biases too (zeros where
    one has none, None where none has one)."""
    weight = torch.cat([part for part, _ in parts])
    if all(bias is None for _, bias in parts):
        return weight, None
    return weight, torch.cat([bias if bias is not None else part.new_zeros(part.shape[0]) for part, bias in parts])


def rotated_half(rows: torch.Tensor, head_dim: int) -> torch.Tensor:
    """A projection's weight (out, in) or bias (out,) whose outputs are the original's under transformers'
    `rotate_half`, in each head: (x1, x2) -> (-x2, x1). A product then gives a rotary embedding's rotated
    half with the query and key themselves, instead of four operations each at every forward."""
    heads = rows.view(-1, head_dim, *rows.shape[1:])
    half = head_dim // 2
    return torch.cat([-heads[:, half:], heads[:, :half]], dim=1).reshape(rows.shape)


@dataclass(frozen=True)
class FusedLayer:
    """A decoder layer's projections in four products: query and key, value, and the query and key rotated
    (`rotated_half`); output; gate and up; down."""

    qkv: Joined
    out: Joined
    gate_up: Joined
    down: Joined
    heads: int  # query heads
    head_dim: int

    @classmethod
    def of(cls, layer: nn.Module) -> FusedLayer:
        attention, mlp = layer.self_attn, layer.mlp
        head_dim = attention.head_dim
        query, key, value = ((projection.weight, projection.bias)
                             for projection in (attention.q_proj, attention.k_proj, attention.v_proj))
        weight, bias = stacked(query, key)
        turned = rotated_half(weight, head_dim), None if bias is None else rotated_half(bias, head_dim)
        return cls(Joined.stacked((weight, bias), value, turned), Joined.of(attention.o_proj),
                   Joined.of(mlp.gate_proj, mlp.up_proj), Joined.of(mlp.down_proj),
                   attention.q_proj.out_features // head_dim, head_dim)

    def attention_inputs(self, hidden: torch.Tensor, rotary: tuple[torch.Tensor, torch.Tensor],
                         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The query, key and value (B, heads, q, D) of `hidden` (B, q, width), the query and key rotated together
        as transformers rotates each (x·cos + rotate_half(x)·sin), with rotate_half(x) from the product."""
        query_key, value, turned = self.qkv(hidden)
        shape = (*hidden.shape[:-1], -1, self.head_dim)
        cos, sin = (part.unsqueeze(-2) for part in rotary)
        rotated = ((query_key.view(shape) * cos) + (turned.view(shape) * sin)).transpose(1, 2)
        query, key = rotated.split([self.heads, rotated.shape[1] - self.heads], dim=1)
        return query, key, value.view(shape).transpose(1, 2)


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
        self._rope: tuple[torch.Tensor, torch.Tensor] | None = None  # fused: cos and sin (positions, D), from 0

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
        rotary = self._rotary(hidden, positions)
        for index, (layer, fused) in enumerate(zip(self.layers, self.fused_layers(), strict=True)):
            hidden = hidden + self._attention(index, self._norm(layer.input_layernorm, hidden), rotary, mask, cache,
                                              fused=fused)
            normed = self._norm(layer.post_attention_layernorm, hidden)
            if fused is None:
                hidden = hidden + layer.mlp(normed)
            else:
                gate, up = fused.gate_up(normed)
                hidden = hidden + fused.down(layer.mlp.act_fn(gate) * up)[0]
        return self._norm(self.model.norm, hidden)

    def _norm(self, norm: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
        """`norm`, a `LlamaRMSNorm`, of `hidden`; where fused, as torch's `rms_norm`: one call instead of the
        module's six operations (the same values in float32)."""
        if not self.fused:
            return norm(hidden)
        return F.rms_norm(hidden, norm.weight.shape, norm.weight, norm.variance_epsilon)

    def _rotary(self, hidden: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The rotary embedding's cos and sin (B, q, D) at `positions`; where fused and the embedding depends on
        the positions alone, rows of a table made once (grown when positions pass its end) instead of about ten
        operations at every forward."""
        rotary = self.model.rotary_emb
        if not self.fused or rotary.rope_type not in FIXED_ROPE:
            return rotary(hidden, positions)
        end = int(positions.max()) + 1
        if self._rope is None or self._rope[0].shape[0] < end:
            size = max(end, ROPE_ROWS, 2 * (0 if self._rope is None else self._rope[0].shape[0]))
            cos, sin = rotary(hidden, torch.arange(size, device=positions.device)[None])
            self._rope = cos[0], sin[0]
        return self._rope[0][positions], self._rope[1][positions]

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
            query, key, value = fused.attention_inputs(hidden, rotary)
        else:
            key = attention.k_proj(hidden).view(shape).transpose(1, 2)
            value = attention.v_proj(hidden).view(shape).transpose(1, 2)
        if last:
            cos, sin = rotary
            hidden = hidden[:, -last:]
            query = attention.q_proj(hidden).view(*hidden.shape[:-1], -1, attention.head_dim).transpose(1, 2)
            query = apply_rotary_pos_emb(query, query, cos[:, -last:], sin[:, -last:])[0]
            key = apply_rotary_pos_emb(key, key, cos, sin)[1]
        elif fused is None:
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
