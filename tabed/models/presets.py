"""The named model pairs: the bundled teaching pair, its 7B-cost widening, and the paper's pairs."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from ..errors import ModelLoadError
from .widen import LLAVA_7B, LVLM_68M, Shape

_HERE = Path(__file__).resolve()
# the repository's assets/ beside the code, or the copy an installed package carries as tabed/assets (pyproject.toml)
ASSETS = next((path for path in (_HERE.parents[2] / "assets", _HERE.parents[1] / "assets")
               if (path / "models").is_dir()), _HERE.parents[2] / "assets")
PRESET_ENV = "TABED_PRESET"
FLORENCE_CAPTIONER = "florence-community/Florence-2-large-ft"


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
