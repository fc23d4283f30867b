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
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import LlamaModel
from transformers.cache_utils import Cache
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb


class LeanDecoder:
    """A `LlamaModel`'s layers called directly: hidden states for new tokens over a cache."""

    def __init__(self, model: LlamaModel) -> None:
        self.model = model
        self.layers = list(model.layers[:model.config.num_hidden_layers])

    def __call__(self, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | None,
                 cache: Cache) -> torch.Tensor:
        """The final hidden states (B, q, D) of `ids` (B, q) at `positions` (B, q), appended to `cache`;
        `mask`: an additive (B, 1, q, cached + q) mask, or None where every new token sees the whole cache
        (one token a row, no padding: `is_causal` would align a longer query wrongly, so give a mask)."""
        hidden = self.model.embed_tokens(ids)
        rotary = self.model.rotary_emb(hidden, positions)
        for index, layer in enumerate(self.layers):
            hidden = hidden + self._attention(layer.self_attn, layer.input_layernorm(hidden), rotary, mask,
                                              cache, index)
            hidden = hidden + layer.mlp(layer.post_attention_layernorm(hidden))
        return self.model.norm(hidden)

    def prefill(self, embeds: torch.Tensor, cache: Cache) -> torch.Tensor:
        """The final hidden state (B, 1, D) of the last of `embeds` (B, L, D), rows without padding, put into
        the empty `cache`. The keys and values are the library's, bit for bit; the last layer attends and runs
        its MLP for the last position alone, so that its hidden state matches the library's to rounding."""
        positions = torch.arange(embeds.shape[1], device=embeds.device)[None]
        hidden, rotary = embeds, self.model.rotary_emb(embeds, positions)
        for index, layer in enumerate(self.layers):
            last = 1 if index == len(self.layers) - 1 else None  # the whole prompt before the last layer
            attended = self._attention(layer.self_attn, layer.input_layernorm(hidden), rotary, None, cache, index,
                                       causal=last is None, last=last)
            hidden = hidden[:, -attended.shape[1]:] + attended
            hidden = hidden + layer.mlp(layer.post_attention_layernorm(hidden))
        return self.model.norm(hidden)

    @staticmethod
    def _attention(attention, hidden: torch.Tensor, rotary: tuple[torch.Tensor, torch.Tensor],
                   mask: torch.Tensor | None, cache: Cache, index: int, causal: bool = False,
                   last: int | None = None) -> torch.Tensor:
        """`LlamaAttention.forward` with SDPA, as transformers runs it for a mask it is given, or `causal` (a
        prompt into an empty cache). `last`: queries for the last `last` positions only, each seeing every key
        (keys and values are made for all)."""
        shape = (*hidden.shape[:-1], -1, attention.head_dim)
        key = attention.k_proj(hidden).view(shape).transpose(1, 2)
        value = attention.v_proj(hidden).view(shape).transpose(1, 2)
        if last:
            cos, sin = rotary
            hidden = hidden[:, -last:]
            query = attention.q_proj(hidden).view(*hidden.shape[:-1], -1, attention.head_dim).transpose(1, 2)
            query = apply_rotary_pos_emb(query, query, cos[:, -last:], sin[:, -last:])[0]
            key = apply_rotary_pos_emb(key, key, cos, sin)[1]
        else:
            query = attention.q_proj(hidden).view(shape).transpose(1, 2)
            query, key = apply_rotary_pos_emb(query, key, *rotary)
        key, value = cache.update(key, value, index)
        out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, is_causal=causal,
                                             scale=attention.scaling, enable_gqa=attention.num_key_value_groups > 1)
        return attention.o_proj(out.transpose(1, 2).reshape(*hidden.shape[:-1], -1).contiguous())


def lean_decoder(decoder: torch.nn.Module) -> LeanDecoder | None:
    """A `LeanDecoder` for transformers' own `LlamaModel` with SDPA attention; None for any other model."""
    if type(decoder) is LlamaModel and decoder.config._attn_implementation == "sdpa":
        return LeanDecoder(decoder)
    return None
