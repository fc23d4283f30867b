"""A loaded target/drafter pair: its models, processors, device and dtype, and its cache backends."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from transformers import PreTrainedTokenizerBase

from ..errors import InputError, ModelLoadError
from .caches import CACHES, DynamicBackend, StaticBackend
from .matmul import LinearChoice

MAX_GAMMA = 64  # the longest draft a block may have (the static caches leave room for it)


def resolve_device(device: str | None = None) -> torch.device:
    """The device asked for, checked to exist here (a clear error, not torch's assertion deep inside the
    first `.to()`); by default CUDA where there is one, else the CPU."""
    if not device:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        chosen = torch.device(device)
    except RuntimeError:
        raise InputError(f"unknown device {device!r}: use cpu, cuda or cuda:N") from None
    if chosen.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise InputError(f"device {device!r}: this machine has no CUDA GPU (or torch was built without CUDA); "
                             "use cpu")
        if chosen.index is not None and chosen.index >= count:
            raise InputError(f"device {device!r}: this machine has {count} CUDA GPU(s), cuda:0 to cuda:{count - 1}")
    return chosen


def resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    """fp16 on CUDA (as in the paper), fp32 on CPU, unless told otherwise."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype:
        names = {"float16": torch.float16, "fp16": torch.float16, "bfloat16": torch.bfloat16,
                 "bf16": torch.bfloat16, "float32": torch.float32, "fp32": torch.float32}
        if dtype not in names:
            raise ModelLoadError(f"unknown dtype {dtype!r}: choose one of {', '.join(names)}")
        return names[dtype]
    return torch.float16 if device.type == "cuda" else torch.float32


def resolve_cache(cache: str | None, device: torch.device) -> str:
    """Static caches with CUDA graphs on a GPU, dynamic caches elsewhere, unless told otherwise."""
    if cache is None:
        return "static" if device.type == "cuda" else "dynamic"
    if cache not in CACHES:
        raise ModelLoadError(f"unknown cache {cache!r}: choose one of {', '.join(CACHES)}")
    return cache


@dataclass
class ModelPair:
    """A target and a drafter that share a vocabulary, with their processors."""

    target: torch.nn.Module
    drafter: torch.nn.Module
    target_processor: object
    drafter_processor: object
    device: torch.device
    dtype: torch.dtype
    name: str
    captioner: str | None = None  # captioner model id for C drafting; None: the drafter captions
    caption_model: object | None = field(default=None, repr=False)  # made on first use
    cache: str = "dynamic"  # KV cache backend: "dynamic" (eager) or "static" (CUDA graphs on a GPU)
    notes: list[str] = field(default_factory=list)  # facts of the pair (e.g. why graphs are off), said by every run
    linears: dict[str, LinearChoice] = field(default_factory=dict)  # per role: how its linear layers multiply
    # (role, batch) -> StaticBackend, and what the engine keeps with the pair (`reused`): made once, reused
    # by every request
    _static: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.cache not in CACHES:
            raise ModelLoadError(f"unknown cache {self.cache!r}: choose one of {', '.join(CACHES)}")

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        return self.target_processor.tokenizer

    @property
    def vocab_size(self) -> int:
        return int(self.target.get_output_embeddings().weight.shape[0])

    @property
    def eos_token_ids(self) -> set[int]:
        ids = self.target.generation_config.eos_token_id
        if ids is None:
            ids = self.tokenizer.eos_token_id
        ids = ids if isinstance(ids, list) else [ids]
        return {int(i) for i in ids if i is not None}

    @functools.cached_property
    def suppressed(self) -> torch.Tensor | None:
        """Token ids the generation configs forbid (e.g. a widened vocabulary's padding), on the device."""
        ids = set()
        for model in (self.target, self.drafter):
            ids |= set(getattr(model.generation_config, "suppress_tokens", None) or [])
        ids = sorted(i for i in ids if i < self.vocab_size)
        return torch.tensor(ids, dtype=torch.long, device=self.device) if ids else None

    def backend(self, role: str, batch: int = 1) -> DynamicBackend | StaticBackend:
        """A cache backend for the target or the drafter with `batch` rows (static ones are made once)."""
        model = self.target if role == "target" else self.drafter
        if self.cache == "dynamic":
            return DynamicBackend(model, self.vocab_size, self.suppressed, fused=role == "drafter")
        graphs = self.device.type == "cuda"
        backend = self.reused((role, batch), lambda: StaticBackend(
            model, batch, self.context_of(role) + MAX_GAMMA + 1, self.vocab_size, self.suppressed,
            graphs=graphs, compiled=graphs and role == "drafter"))
        for why in (backend.why_eager, backend.why_uncompiled):
            if why and why not in self.notes:
                self.notes.append(why)
        return backend

    @property
    def compiled_roles(self) -> list[str]:
        """The models whose steps run compiled so far (`compiled.py`: a GPU's drafter, unless that failed)."""
        return sorted({key[0] for key, made in self._static.items()
                       if isinstance(made, StaticBackend) and made.compiled})

    def reused(self, key: tuple, make: Callable[[], object]) -> object:
        """An object made once for this pair by `make()` and reused by every request (the engine's CUDA
        graphs beside the caches' own: new tensors would mean new addresses and a new capture)."""
        if key not in self._static:
            self._static[key] = make()
        return self._static[key]

    def context_of(self, role: str) -> int:
        """The context of the target's or the drafter's language model (its max position embeddings): each
        model's prompt is checked against its own, as a drafter may see a picture as more tokens."""
        model = self.target if role == "target" else self.drafter
        return getattr(model.config.get_text_config(), "max_position_embeddings", None) or 1 << 30
