"""Loading a target/drafter pair: presets, device and dtype, and the checks that make a pair usable."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import (
    AutoConfig,
    AutoModelForImageTextToText,
    AutoProcessor,
    PretrainedConfig,
    PreTrainedTokenizerBase,
    ProcessorMixin,
)
from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

from .backends import CACHES, DynamicBackend, StaticBackend
from .draft_length import AUTO_CAP
from .errors import InputError, ModelLoadError, VocabularyMismatchError
from .stats_graph import GraphedStats, worth_a_graph
from .widen import LLAVA_7B, LVLM_68M, Shape, widen

ASSETS = Path(__file__).resolve().parent.parent / "assets"
PRESET_ENV = "TABED_PRESET"
FLORENCE_CAPTIONER = "florence-community/Florence-2-large-ft"
MAX_GAMMA = 64  # the longest draft a block may have (the static caches leave room for it)


@dataclass(frozen=True)
class Preset:
    target: str
    drafter: str
    description: str
    needs_gpu: bool = False
    captioner: str | None = None  # model id for C drafting; None: the drafter captions in M mode
    widen: tuple[Shape, Shape] | None = None  # built in memory: target and drafter widened to these shapes


PRESETS: dict[str, Preset] = {
    "teaching": Preset(
        target=str(ASSETS / "models" / "target"),
        drafter=str(ASSETS / "models" / "drafter"),
        description="bundled teaching pair (CPU, no network)",
    ),
    "teaching-7b": Preset(
        target=str(ASSETS / "models" / "target"),
        drafter=str(ASSETS / "models" / "drafter"),
        description="the teaching pair at LLaVA-1.5-7B + 68M's cost: same answers, real speed (GPU, no download)",
        needs_gpu=True,
        widen=(LLAVA_7B, LVLM_68M),
    ),
    "llava-1.5-7b": Preset(
        target="llava-hf/llava-1.5-7b-hf",
        drafter="mjbooo/lvlm68m",
        description="the paper's pair: LLaVA-1.5-7B + LLaVA-1.5-68m (GPU, download ~14 GB)",
        needs_gpu=True,
        captioner=FLORENCE_CAPTIONER,
    ),
    "llava-1.5-13b": Preset(
        target="llava-hf/llava-1.5-13b-hf",
        drafter="mjbooo/lvlm68m",
        description="LLaVA-1.5-13B + LLaVA-1.5-68m (GPU, download ~26 GB)",
        needs_gpu=True,
        captioner=FLORENCE_CAPTIONER,
    ),
}
DEFAULT_PRESET = "teaching"
DEFAULT_GPU_PRESET = "teaching-7b"


def default_preset() -> str:
    """The preset used when none is named: $TABED_PRESET, else the teaching pair at the 7B pair's cost on a
    GPU (the tiny pair is launch-bound there: speculative decoding cannot win) and the bundled pair on a CPU."""
    fallback = DEFAULT_GPU_PRESET if torch.cuda.is_available() else DEFAULT_PRESET
    name = os.environ.get(PRESET_ENV, "").strip() or fallback
    if name not in PRESETS:
        raise ModelLoadError(f"${PRESET_ENV}={name!r} is not a preset; choose one of {', '.join(PRESETS)}")
    return name


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
    notes: list[str] = field(default_factory=list)  # one-time remarks (e.g. why graphs are off)
    _static: dict = field(default_factory=dict, repr=False)  # (role, batch) -> StaticBackend, and
    # ("stats", rule, methods) -> GraphedStats or None: made once, reused by every request

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
            return DynamicBackend(model, self.vocab_size, self.suppressed)
        key = (role, batch)
        if key not in self._static:
            self._static[key] = StaticBackend(model, batch, self.context_length + MAX_GAMMA + 1, self.vocab_size,
                                              self.suppressed, graphs=self.device.type == "cuda")
        backend = self._static[key]
        if backend.why_eager and backend.why_eager not in self.notes:
            self.notes.append(backend.why_eager)
        return backend

    def weight_stats(self, rule: str, methods: int) -> GraphedStats | None:
        """The weight history's block statistics as a replayed CUDA graph, made once, for static caches on
        a GPU where the padded computation stays small; None elsewhere (the history sums them eagerly)."""
        if self.cache != "static" or self.device.type != "cuda":
            return None
        key = ("stats", rule, methods)
        if key not in self._static:
            self._static[key] = self._graphed_stats(rule, methods)
        return self._static[key]

    def _graphed_stats(self, rule: str, methods: int) -> GraphedStats | None:
        positions = AUTO_CAP + 1  # a default block's verified positions; a longer one is summed eagerly
        if not worth_a_graph(rule, methods, self.vocab_size, positions):
            return None
        try:
            return GraphedStats(rule, methods, self.vocab_size, positions, self.device)
        except RuntimeError as exc:  # a place without graphs: the eager sum
            self.notes.append(f"CUDA graph of the weight statistics failed ({str(exc).splitlines()[0]})")
            return None

    @property
    def context_length(self) -> int:
        """The shortest context of the two language models (max position embeddings)."""
        lengths = []
        for model in (self.target, self.drafter):
            text = model.config.get_text_config()
            lengths.append(getattr(text, "max_position_embeddings", None) or 1 << 30)
        return min(lengths)


def _looks_local(name: str) -> bool:
    """Hub ids are `name` or `owner/name`; anything else is a folder."""
    return name.startswith((".", "/", "~")) or name.count("/") > 1 or Path(name).exists()


def check_source(name: str, role: str) -> str:
    """A hub id as it is, or a local folder (expanded) that exists: a missing one is named plainly (the hub
    client would call its path a malformed repo id)."""
    expanded = os.path.expanduser(name)
    if _looks_local(name) and not Path(expanded).is_dir():
        bundled = str(ASSETS) in expanded
        hint = (" (the bundled teaching pair is missing: restore assets/models from git, or retrain it with "
                "`python -m tabed.teaching train`, "
                "or choose another pair)") if bundled else ""
        raise ModelLoadError(f"{role} folder not found: {name}{hint}")
    return expanded


def _load_config(name: str, role: str):
    try:
        config = AutoConfig.from_pretrained(name)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot load the {role} {name!r}: {str(exc).splitlines()[0]}") from None
    if config.model_type not in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES:
        raise ModelLoadError(
            f"the {role} {name!r} is a {config.model_type!r} model, not an image-text-to-text model "
            "(a vision-language model such as LLaVA)"
        )
    return config


def _load_processor(name: str):
    """The repo's multimodal processor, or None when it ships none (or only a tokenizer)."""
    try:
        processor = AutoProcessor.from_pretrained(name)
    except (OSError, ValueError, TypeError):
        return None
    return processor if hasattr(processor, "image_processor") and hasattr(processor, "tokenizer") else None


def complete_processor(processor: ProcessorMixin, config: PretrainedConfig, role: str,
                       say: Callable[[str], None]) -> None:
    """LLaVA processor configs saved by transformers 4.x lack `patch_size` (and the count of extra
    vision tokens, and the feature strategy); 5.x's `LlavaProcessor` cannot count a picture's image
    tokens without them. Take them from the model's config, and say so."""
    vision = getattr(config, "vision_config", None)
    if getattr(processor, "patch_size", 0) is not None or getattr(vision, "patch_size", None) is None:
        return
    processor.patch_size = vision.patch_size
    processor.vision_feature_select_strategy = getattr(config, "vision_feature_select_strategy", "default")
    processor.num_additional_image_tokens = 1 if vision.model_type.startswith("clip") else 0  # CLIP's class token
    say(f"the {role}'s processor config has no patch_size (saved by older transformers): using "
        f"{vision.patch_size} from the model's config")


def check_vocabularies(target_processor: ProcessorMixin, drafter_processor: ProcessorMixin, target_name: str,
                       drafter_name: str) -> None:
    """Refuse a pair whose tokenizers map tokens to different ids."""
    target_vocab = target_processor.tokenizer.get_vocab()
    drafter_vocab = drafter_processor.tokenizer.get_vocab()
    if target_vocab == drafter_vocab:
        return
    differing = sorted(set(target_vocab.items()) ^ set(drafter_vocab.items()), key=lambda item: item[1])
    example = differing[0][0] if differing else "?"
    raise VocabularyMismatchError(
        f"target {target_name!r} ({len(target_vocab)} tokens) and drafter {drafter_name!r} "
        f"({len(drafter_vocab)} tokens) do not share a vocabulary (e.g. token {example!r} differs); "
        "speculative decoding needs a drafter with the target's tokenizer"
    )


def load_pair(
    target: str,
    drafter: str,
    device: str | None = None,
    dtype: str | torch.dtype | None = None,
    name: str | None = None,
    captioner: str | None = None,
    progress: Callable[[str], None] | None = None,
    cache: str | None = None,
    widen_to: tuple[Shape, Shape] | None = None,
    widen_on: str | None = None,
) -> ModelPair:
    """Load a target and a drafter (hub ids or local folders) as one checked pair.

    Hub downloads show transformers' own progress bars; `progress` receives a line per stage.
    `widen_to` builds function-preserving widenings of both models in memory (see `widen.py`), on the
    target device or on `widen_on` (e.g. "cpu" where CUDA exists only inside a request, as on ZeroGPU).
    """
    say = progress or (lambda message: None)
    torch_device = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, torch_device)
    cache = resolve_cache(cache, torch_device)
    if torch_device.type == "cuda" and torch.backends.cuda.cudnn_sdp_enabled():
        # cuDNN's attention plans every new shape (~70 ms each for a 7B model on an H100): eager decoding
        # meets a new shape at every step and every prompt; the other kernels do not pay that.
        torch.backends.cuda.enable_cudnn_sdp(False)
        say("cuDNN attention off for this process (it plans each new shape for tens of milliseconds)")
    sources = {role: check_source(src, role) for role, src in (("target", target), ("drafter", drafter))}
    configs = {role: _load_config(src, role) for role, src in sources.items()}
    for role, config in configs.items():
        version = str(getattr(config, "transformers_version", None) or "5")
        if version.split(".")[0].isdigit() and int(version.split(".")[0]) < 5:
            say(f"the {role} was saved by transformers {version}: its weights' old names are converted on load")
    say("loading processors")
    target_processor = _load_processor(sources["target"])
    if target_processor is None:
        raise ModelLoadError(f"the target {target!r} has no processor (tokenizer + image processor)")
    complete_processor(target_processor, configs["target"], "target", say)
    drafter_processor = _load_processor(sources["drafter"])
    if drafter_processor is None:
        drafter_processor = target_processor
    else:
        complete_processor(drafter_processor, configs["drafter"], "drafter", say)
    check_vocabularies(target_processor, drafter_processor, target, drafter)
    shapes = dict(zip(sources, widen_to or (None, None), strict=True))
    models = {role: _load_model(role, src, torch_device, torch_dtype, shapes[role], widen_on, say)
              for role, src in sources.items()}
    say("models ready")
    return ModelPair(
        target=models["target"],
        drafter=models["drafter"],
        target_processor=target_processor,
        drafter_processor=drafter_processor,
        device=torch_device,
        dtype=torch_dtype,
        name=name or f"{target} + {drafter}",
        captioner=captioner,
        cache=cache,
    )


def _load_model(role: str, source: str, device: torch.device, dtype: torch.dtype, shape: Shape | None,
                widen_on: str | None, say: Callable[[str], None]):
    say(f"loading the {role} {source} ({dtype}, {device})")
    try:
        model = AutoModelForImageTextToText.from_pretrained(source, dtype=torch.float32 if shape else dtype)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot load the {role} {source!r}: {str(exc).splitlines()[0]}") from None
    if shape is not None:
        say(f"widening the {role} to {shape.layers} layers x {shape.hidden} ({dtype}, {device})")
        model = widen(model, shape, device=widen_on or device, dtype=dtype)
    return model.to(device).eval()


def load_preset(name: str | None = None, **kwargs) -> ModelPair:
    """Load a named preset (default: $TABED_PRESET or the bundled teaching pair)."""
    name = name or default_preset()
    if name not in PRESETS:
        raise ModelLoadError(f"unknown preset {name!r}: choose one of {', '.join(PRESETS)}")
    preset = PRESETS[name]
    if preset.widen and resolve_device(kwargs.get("device")).type != "cuda":
        raise ModelLoadError(f"the preset {name!r} needs a GPU (it builds a 7B-sized model): on a CPU use 'teaching', "
                             "which gives the same answers")
    return load_pair(preset.target, preset.drafter, name=name, captioner=preset.captioner, widen_to=preset.widen,
                     **kwargs)
