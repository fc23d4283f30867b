"""Loading a target/drafter pair: hub ids or folders, processors, widening, and the checks that make a
pair usable."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import torch
from transformers import (
    AutoConfig,
    AutoModelForImageTextToText,
    AutoProcessor,
    PretrainedConfig,
    ProcessorMixin,
)
from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

from ..errors import ModelLoadError, VocabularyMismatchError
from .matmul import choose_linears, linear_path
from .pair import ModelPair, resolve_cache, resolve_device, resolve_dtype
from .presets import ASSETS, PRESETS, default_preset
from .widen import Shape, Widening
from .widen import widen as widen_model


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
                       progress_line: Callable[[str], None]) -> None:
    """LLaVA processor configs saved by transformers 4.x lack `patch_size` (and the count of extra
    vision tokens, and the feature strategy); 5.x's `LlavaProcessor` cannot count a picture's image
    tokens without them. Take them from the model's config, and say so on `progress_line`."""
    vision = getattr(config, "vision_config", None)
    if getattr(processor, "patch_size", 0) is not None or getattr(vision, "patch_size", None) is None:
        return
    processor.patch_size = vision.patch_size
    processor.vision_feature_select_strategy = getattr(config, "vision_feature_select_strategy", "default")
    processor.num_additional_image_tokens = 1 if vision.model_type.startswith("clip") else 0  # CLIP's class token
    progress_line(f"the {role}'s processor config has no patch_size (saved by older transformers): using "
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


def skip_cudnn_attention() -> None:
    """A choice for the whole process, made by the entry points (app.py and the CLI) before they load a
    pair, never by loading: PyTorch's attention is not to use cuDNN's kernel, which plans every new shape
    (~70 ms each for a 7B model on an H100), and eager decoding meets a new shape at every step and every
    prompt; the other kernels do not pay that. A flag only: it touches no device."""
    torch.backends.cuda.enable_cudnn_sdp(False)


def load_pair(
    target: str,
    drafter: str,
    device: str | None = None,
    dtype: str | torch.dtype | None = None,
    name: str | None = None,
    progress: Callable[[str], None] | None = None,
    cache: str | None = None,
    widen: Widening | None = None,
) -> ModelPair:
    """Load a target and a drafter (hub ids or local folders) as one checked pair.

    Hub downloads show transformers' own progress bars; `progress` receives a line per stage.
    `widen` builds function-preserving widenings of both models in memory (see `widen.py`). How their token-path
    linear layers multiply is $TABED_LINEAR's (`matmul.linear_path`): the faster order on a CPU by default.
    """
    progress_line = progress or (lambda message: None)
    torch_device = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, torch_device)
    cache = resolve_cache(cache, torch_device)
    sources = {role: check_source(src, role) for role, src in (("target", target), ("drafter", drafter))}
    configs = {role: _load_config(src, role) for role, src in sources.items()}
    for role, config in configs.items():
        version = str(getattr(config, "transformers_version", None) or "5")
        if version.split(".")[0].isdigit() and int(version.split(".")[0]) < 5:
            progress_line(f"the {role} was saved by transformers {version}: its weights' old names are converted "
                          "on load")
    target_processor, drafter_processor = _load_processors(sources, configs, progress_line)
    check_vocabularies(target_processor, drafter_processor, target, drafter)
    shapes = {"target": widen.target, "drafter": widen.drafter} if widen else {}
    models = {role: _load_model(role, src, (torch_device, torch_dtype), shapes.get(role),
                                widen.on if widen else None, progress_line)
              for role, src in sources.items()}
    path = linear_path()
    if path == "auto" and torch_device.type == "cpu":
        progress_line("timing the linear layers' two orders of multiplication")
    linears = {role: choose_linears(model, torch_device, path) for role, model in models.items()}
    progress_line("models ready")
    return ModelPair(target=models["target"], drafter=models["drafter"], target_processor=target_processor,
                     drafter_processor=drafter_processor, device=torch_device, dtype=torch_dtype,
                     name=name or f"{target} + {drafter}", cache=cache, linears=linears)


def _load_processors(sources: dict[str, str], configs: dict[str, PretrainedConfig],
                     progress_line: Callable[[str], None]) -> tuple[ProcessorMixin, ProcessorMixin]:
    """The target's processor and the drafter's (the target's when the drafter ships none), completed."""
    progress_line("loading processors")
    target_processor = _load_processor(sources["target"])
    if target_processor is None:
        raise ModelLoadError(f"the target {sources['target']!r} has no processor (tokenizer + image processor)")
    complete_processor(target_processor, configs["target"], "target", progress_line)
    drafter_processor = _load_processor(sources["drafter"])
    if drafter_processor is None:
        return target_processor, target_processor
    complete_processor(drafter_processor, configs["drafter"], "drafter", progress_line)
    return target_processor, drafter_processor


def _load_model(role: str, source: str, placement: tuple[torch.device, torch.dtype], shape: Shape | None,
                widen_on: str | None, progress_line: Callable[[str], None]):
    device, dtype = placement
    progress_line(f"loading the {role} {source} ({dtype}, {device})")
    try:
        model = AutoModelForImageTextToText.from_pretrained(source, dtype=torch.float32 if shape else dtype)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot load the {role} {source!r}: {str(exc).splitlines()[0]}") from None
    if shape is not None:
        progress_line(f"widening the {role} to {shape.layers} layers x {shape.hidden} ({dtype}, {device})")
        model = widen_model(model, shape, device=widen_on or device, dtype=dtype)
    return model.to(device).eval()


def load_preset(name: str | None = None, widen_on: str | None = None, **kwargs) -> ModelPair:
    """Load a named preset (default: $TABED_PRESET or the bundled teaching pair). A widened preset is built
    on the pair's device, or on `widen_on` (e.g. "cpu" where CUDA exists only inside a request, as on
    ZeroGPU); `kwargs` go to `load_pair`."""
    name = name or default_preset()
    if name not in PRESETS:
        raise ModelLoadError(f"unknown preset {name!r}: choose one of {', '.join(PRESETS)}")
    preset = PRESETS[name]
    if preset.widen and resolve_device(kwargs.get("device")).type != "cuda":
        raise ModelLoadError(f"the preset {name!r} needs a GPU (it builds a 7B-sized model): on a CPU use 'teaching', "
                             "which gives the same answers")
    widening = Widening(*preset.widen, on=widen_on) if preset.widen else None
    pair = load_pair(preset.target, preset.drafter, name=name, widen=widening, **kwargs)
    pair.captioner = preset.captioner
    return pair
