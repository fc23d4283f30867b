"""One request at the page's edge: what /run and /follow_up take, by name and in order, as one value.

The page's controls, the two API handlers' named inputs (their signature, defaults and docstring) and the
run itself all come from `Request`: a setting added here is a control, an API input and a checked value at
once. Its values are as a browser or an API client sent them; `settings()` and `flag()` check them
(`controls.py`), so that a bad one is a line naming its field."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields

import gradio as gr

from ..engine.config import GenerationConfig
from ..engine.settings import Settings
from ..engine.spec import DEFAULT_SPEC, parse_spec
from .controls import FLAGS, MODES, page_flag, page_settings

DEFAULTS = GenerationConfig()


def _input(default: object, doc: str) -> object:
    return field(default=default, metadata={"doc": doc})


@dataclass(frozen=True)
class Request:
    """A run's inputs as sent (unchecked), in the API's order; each default is the page's."""

    pictures: object = _input(None, "image files shown with the prompt (none, one or several)")
    prompt: object = _input("", "the question")
    conversation: object = _input(None, "the session state (None from an API call: a new conversation)")
    preset: object = _input(None, 'model pair preset, e.g. "teaching" (None: the default pair)')
    methods: object = _input(parse_spec(DEFAULT_SPEC).methods,
                             'drafting methods, a list of "M", "T", "C", "P", "N"')
    mode: object = _input(MODES[0], f"the ensemble: {', '.join(map(repr, MODES))}")
    rule: object = _input(DEFAULTS.rule, 'TABED weight rule: "w-grid", "kld", "tvd" or "hedge"')
    window: object = _input(DEFAULTS.window, "TABED history window in positions (0 = all)")
    gamma: object = _input(DEFAULTS.gamma, "draft tokens per block: the most when adaptive, else always this many")
    max_new_tokens: object = _input(DEFAULTS.max_new_tokens, "the answer's length limit")
    temperature: object = _input(DEFAULTS.temperature, "0 = greedy")
    seed: object = _input(DEFAULTS.seed, "sampling seed")
    compare_ar: object = _input(True, "also decode with the target alone and compare the speed")
    adaptive: object = _input(DEFAULTS.adaptive, "stop a block's draft early when the ensemble is unsure")
    tree_width: object = _input(DEFAULTS.tree_width, "1 drafts a chain per block; 2-4 draft a token tree "
                                                     "expanding this many nodes per depth")
    tree_policy: object = _input(DEFAULTS.tree_policy, 'a tree node\'s children: "ensemble" (its top tokens), '
                                                       '"methods" (each method\'s top-1), "unsure" (its top '
                                                       "tokens only where the top one has under half the "
                                                       'ensemble\'s probability) or "members" (the ensemble\'s '
                                                       "own chain and each method's own)")
    tree_blocks: object = _input(DEFAULTS.tree_blocks, 'which blocks draft trees: "all", or "first" (drafted '
                                                       "before any weight is learned)")
    hedge_first: object = _input(DEFAULTS.hedge_first, "with a tree width of 1, TABED's first block forks where "
                                                       "the methods leave the ensemble unsure, when there is a "
                                                       "picture")
    methods_alone: object = _input(False, "after plain decoding, run each ticked method (but N) drafting alone "
                                          "with the same settings, for its real block efficiency and speed")
    repeat: object = _input(1, "runs of TABED and of plain decoding, taken in turn (1 to 9): the page shows the "
                               "median run's speed and the range of all")
    top_p: object = _input(DEFAULTS.top_p, "sampling keeps the most probable tokens whose probabilities add up to "
                                           "this (1 keeps every token)")

    def settings(self, notes: list[str]) -> Settings:
        """The run's checked settings (an emptied box takes the default, said in `notes`)."""
        config = {name: getattr(self, name) for name in CONFIG_INPUTS}
        return page_settings(self.methods, self.mode, notes, **config)

    def flag(self, name: str) -> bool | int:
        """One of the page's own switches and counts (`FLAGS`), checked."""
        return page_flag(name, getattr(self, name))


INPUTS = tuple(f.name for f in fields(Request))  # the API's named inputs, in order
CONFIG_INPUTS = tuple(name for name in INPUTS if name in {f.name for f in fields(GenerationConfig)})
assert set(FLAGS) <= set(INPUTS)
SIGNATURE = inspect.Signature(
    [inspect.Parameter(f.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=f.default) for f in fields(Request)]
    + [inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None, annotation=gr.Request)])


def api_handler(name: str, summary: str, body: Callable[[Request, gr.Request | None], Iterator]) -> Callable:
    """An event handler whose named inputs are `Request`'s fields: Gradio reads a handler's inputs, their
    defaults and their descriptions from its signature and docstring, and passes the browser's request to the
    parameter annotated `gr.Request`. `body` runs with the inputs as one `Request`."""

    def handler(*values: object, **named: object) -> Iterator:
        bound = SIGNATURE.bind(*values, **named)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        browser = arguments.pop("request")
        yield from body(Request(**arguments), browser)

    handler.__name__ = handler.__qualname__ = name
    handler.__signature__ = SIGNATURE
    handler.__annotations__ = {"request": gr.Request}
    handler.__doc__ = summary + "\n\nArgs:\n" + "".join(f"    {f.name}: {f.metadata['doc']}\n" for f in fields(Request))
    return handler
