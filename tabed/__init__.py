"""TABED: speculative decoding for vision-language models with a test-time adaptive ensemble of drafts.

    from tabed import Settings, Turn, collect, load_image, load_preset, speculative_generate
    from tabed import BlockEvent, autoregressive_generate, compare

    pair = load_preset("teaching")                       # or load_pair("llava-hf/llava-1.5-7b-hf", "mjbooo/lvlm68m")
    turns = [Turn("Describe the image.", [load_image("assets/examples/shapes.png")])]
    settings = Settings.parse("tabed-MT", gamma="auto", max_new_tokens=128)
    for event in speculative_generate(pair, turns, settings.spec, settings.config):
        if isinstance(event, BlockEvent):                 # one draft-then-verify block, as it happens
            print(event.weights, event.accepted, len(event.draft))
    plain = collect(autoregressive_generate(pair, turns, settings.config))
    result = collect(speculative_generate(pair, turns, settings.spec, settings.config))
    print(result.text, result.token_ids == plain.token_ids, compare(result, plain))

Layers, each importing only those before it: `errors`; `models` (the chat format, cache backends, a
loaded pair, presets, loading, warm-up, widening, captioning, the tiny-model factory); `engine` (drafting
specs, settings, events, sampling, the batched drafter, what a block drafts, the ensemble and its weight
rules, chains, trees, resting rows, lookup, the loop); `bench`; `teaching` (the teaching world and its
pair); `page` (what the app shows); `cli`.

On a GPU, call `skip_cudnn_attention()` once before decoding, as the CLI and the app do: a choice for the
whole process, which loading leaves to its caller (why: its docstring).
"""

from .engine.config import GenerationConfig
from .engine.events import BlockEvent, Event, Finished, GenerationResult, Metrics, Started, StopReason, TokenEvent
from .engine.loop import autoregressive_generate, collect, compare, speculative_generate, warm_up
from .engine.settings import Settings
from .engine.spec import DraftingSpec, parse_spec
from .errors import InputError, ModelLoadError, TabedError, VocabularyMismatchError
from .models.chat import Turn, load_image
from .models.loading import load_pair, load_preset, skip_cudnn_attention
from .models.pair import ModelPair

__all__ = [
    "BlockEvent", "DraftingSpec", "Event", "Finished", "GenerationConfig", "GenerationResult", "InputError",
    "Metrics", "ModelLoadError", "ModelPair", "Settings", "Started", "StopReason", "TabedError", "TokenEvent", "Turn",
    "VocabularyMismatchError", "autoregressive_generate", "collect", "compare", "load_image", "load_pair",
    "load_preset", "parse_spec", "skip_cudnn_attention", "speculative_generate", "warm_up",
]
