"""Function-preserving widening of a LLaVA checkpoint (Llama language model) to a bigger shape.

A widened model computes the same function as the original at the cost of the bigger one: the
hidden state is zero-padded (x' = [x; 0]) and nothing ever writes into the padded dimensions.
- RMSNorm: the mean of squares shrinks by d/D, so the weight becomes w·√(d/D) and ε becomes ε·d/D.
- Heads: head h keeps its place; with a bigger head size each small dimension r goes where RoPE
  gives it the same frequency, and queries are scaled by √(HD/hd) to undo the 1/√head_dim change.
  Extra heads and unmapped dimensions have zero values, so they add nothing.
- MLP: extra rows of `up_proj` are zero, so the extra units output exactly 0.
- Extra layers: `v_proj` and `up_proj` are zero, so the block adds exactly 0 while every matmul runs.
- Vocabulary: extra tokens are listed in the generation config's `suppress_tokens`, which the
  engine (and transformers' `generate`) masks, so they can never be chosen.
Weights that only read padded inputs may be anything: they keep the model's random initialisation,
so that the GPU does the same work (and draws the same power) as with real weights.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
from transformers import LlavaConfig, LlavaForConditionalGeneration

from ..errors import InputError


@dataclass(frozen=True)
class Shape:
    """The language model's shape after widening (vocab None: unchanged)."""

    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab: int | None = None

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


LLAVA_7B = Shape(hidden=4096, layers=32, heads=32, intermediate=11008, vocab=32064)
LVLM_68M = Shape(hidden=768, layers=2, heads=12, intermediate=3072, vocab=32064)


@dataclass(frozen=True)
class Widening:
    """Both models of a pair widened in memory to these shapes, built on `on` (default: the pair's device;
    "cpu" where CUDA exists only inside a request, as on ZeroGPU)."""

    target: Shape
    drafter: Shape
    on: str | None = None


def _check(text, shape: Shape) -> None:
    small_heads, small_hd = text.num_attention_heads, text.head_dim
    problems = []
    if text.model_type != "llama":
        problems.append(f"the language model is {text.model_type!r}, not Llama")
    if text.num_key_value_heads != small_heads:
        problems.append("grouped-query attention is not supported")
    if getattr(text, "attention_bias", False) or getattr(text, "mlp_bias", False):
        problems.append("biased attention or MLP projections are not supported")
    if (text.rope_parameters or {}).get("rope_type", "default") != "default":
        problems.append("only the default RoPE is supported")
    if shape.hidden % shape.heads:
        problems.append(f"hidden {shape.hidden} is not a multiple of heads {shape.heads}")
    elif shape.head_dim % small_hd:
        problems.append(f"head size {shape.head_dim} is not a multiple of {small_hd}")
    for name, small, big in (("hidden", text.hidden_size, shape.hidden), ("layers", text.num_hidden_layers,
                             shape.layers), ("heads", small_heads, shape.heads),
                             ("intermediate", text.intermediate_size, shape.intermediate),
                             ("vocab", text.vocab_size, shape.vocab or text.vocab_size)):
        if big < small:
            problems.append(f"{name} {big} is smaller than the model's {small}")
    if problems:
        raise InputError("cannot widen this model: " + "; ".join(problems))


def widened_config(config: LlavaConfig, shape: Shape) -> LlavaConfig:
    """The LLaVA config of the widened model."""
    config = copy.deepcopy(config)
    text = config.text_config
    _check(text, shape)
    ratio = text.hidden_size / shape.hidden
    text.rms_norm_eps = text.rms_norm_eps * ratio
    text.hidden_size, text.num_hidden_layers, text.intermediate_size = shape.hidden, shape.layers, shape.intermediate
    text.num_attention_heads = text.num_key_value_heads = shape.heads
    text.head_dim = shape.head_dim
    text.vocab_size = shape.vocab or text.vocab_size
    return config


def query_rows(heads: int, head_dim: int, big_head_dim: int) -> torch.Tensor:
    """Where each small q/k row goes: same head, the big dimension with the same RoPE frequency.

    HF's RoPE pairs dimension i with i + hd/2 and gives i the frequency θ^(−2i/hd); in a head s times
    bigger, dimension i·s has that frequency."""
    half, big_half, s = head_dim // 2, big_head_dim // 2, big_head_dim // head_dim
    r = torch.arange(head_dim)
    within = (r // half) * big_half + (r % half) * s
    return (torch.arange(heads)[:, None] * big_head_dim + within).flatten()


def value_rows(heads: int, head_dim: int, big_head_dim: int) -> torch.Tensor:
    """Where each small v row (and o_proj column) goes: same head, the first dimensions."""
    return (torch.arange(heads)[:, None] * big_head_dim + torch.arange(head_dim)).flatten()


def _put(big: torch.Tensor, small: torch.Tensor, rows=None, cols=None) -> None:
    """big[rows, cols] = small, rows/cols defaulting to the leading ones."""
    rows = torch.arange(small.shape[0]) if rows is None else rows
    if small.dim() == 1:
        big[rows.to(big.device)] = small.to(big)
        return
    cols = torch.arange(small.shape[1]) if cols is None else cols
    big[rows.to(big.device)[:, None], cols.to(big.device)[None, :]] = small.to(big)


def _norm(big, small, d: int, ratio: float) -> None:
    big.weight.zero_()
    big.weight[:d] = small.weight.to(big.weight) * math.sqrt(ratio)


def _attention(big, small, text, shape: Shape) -> None:
    d, n, hd, big_hd = text.hidden_size, text.num_attention_heads, text.head_dim, shape.head_dim
    q_rows, v_rows = query_rows(n, hd, big_hd), value_rows(n, hd, big_hd)
    real = n * big_hd
    for name, scale in (("q_proj", math.sqrt(big_hd / hd)), ("k_proj", 1.0)):
        weight = getattr(big, name).weight
        weight[:real, :d] = 0.0  # unmapped dimensions of real heads: zero, so q·k is unchanged
        _put(weight, getattr(small, name).weight * scale, q_rows)
    big.v_proj.weight[:, :d] = 0.0  # extra heads and unmapped dimensions carry zero values
    _put(big.v_proj.weight, small.v_proj.weight, v_rows)
    big.o_proj.weight[d:] = 0.0  # nothing is written into padded dimensions
    _put(big.o_proj.weight, small.o_proj.weight, cols=v_rows)


def _mlp(big, small, d: int) -> None:
    inner = small.up_proj.weight.shape[0]
    _put(big.gate_proj.weight, small.gate_proj.weight)
    big.up_proj.weight[inner:, :d] = 0.0  # extra units output silu(gate)·0 = 0
    _put(big.up_proj.weight, small.up_proj.weight)
    big.down_proj.weight[d:] = 0.0
    _put(big.down_proj.weight, small.down_proj.weight)


def _identity_layer(layer, d: int) -> None:
    """A decoder block that adds exactly zero: no values, no MLP input, no writes into padding."""
    layer.self_attn.v_proj.weight[:, :d] = 0.0
    layer.self_attn.o_proj.weight[d:] = 0.0
    layer.mlp.up_proj.weight[:, :d] = 0.0
    layer.mlp.down_proj.weight[d:] = 0.0


def _projector(big, small, d: int) -> None:
    _put(big.linear_1.weight, small.linear_1.weight)  # extra rows stay random ...
    big.linear_2.weight.zero_()  # ... and are read by nothing
    _put(big.linear_2.weight, small.linear_2.weight)
    if small.linear_1.bias is not None:
        _put(big.linear_1.bias, small.linear_1.bias)
        big.linear_2.bias.zero_()
        _put(big.linear_2.bias, small.linear_2.bias)


@torch.no_grad()
def widen(model: LlavaForConditionalGeneration, shape: Shape, device: str | torch.device | None = None,
          dtype: torch.dtype | None = None, seed: int = 0) -> LlavaForConditionalGeneration:
    """A LLaVA model of the given language-model shape computing the same function as `model`."""
    if not isinstance(model, LlavaForConditionalGeneration):
        raise InputError(f"widening needs a LLaVA model, not {type(model).__name__}")
    config = widened_config(model.config, shape)
    text, d = model.config.text_config, model.config.text_config.hidden_size
    ratio = d / shape.hidden
    device = torch.device(device) if device is not None else model.device
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), torch.device(device):
        torch.manual_seed(seed)
        big = LlavaForConditionalGeneration._from_config(config, dtype=dtype or model.dtype)
    small_lm, big_lm = model.model.language_model, big.model.language_model
    big.model.vision_tower.load_state_dict(model.model.vision_tower.state_dict())
    _projector(big.model.multi_modal_projector, model.model.multi_modal_projector, d)
    big_lm.embed_tokens.weight[:, d:] = 0.0
    _put(big_lm.embed_tokens.weight, small_lm.embed_tokens.weight)
    for index, layer in enumerate(big_lm.layers):
        if index >= len(small_lm.layers):
            _identity_layer(layer, d)
            continue
        source = small_lm.layers[index]
        _norm(layer.input_layernorm, source.input_layernorm, d, ratio)
        _norm(layer.post_attention_layernorm, source.post_attention_layernorm, d, ratio)
        _attention(layer.self_attn, source.self_attn, text, shape)
        _mlp(layer.mlp, source.mlp, d)
    _norm(big_lm.norm, small_lm.norm, d, ratio)
    _put(big.lm_head.weight, model.lm_head.weight)
    big.lm_head.weight[text.vocab_size:, :d] = 0.0
    big.generation_config = copy.deepcopy(model.generation_config)
    extra = list(range(text.vocab_size, config.text_config.vocab_size))
    if extra:
        big.generation_config.suppress_tokens = sorted(set(big.generation_config.suppress_tokens or []) | set(extra))
    return big.eval()
