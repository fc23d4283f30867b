"""Two of the page's parts as Gradio components, laid out by `app.py`: the Settings accordion, its controls
named as the request's inputs, and the block stepper."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from ..engine.config import LIMITS, TREE_POLICIES
from ..engine.draft_length import AUTO_CAP
from ..engine.spec import METHOD_NAMES, RULES
from ..engine.speed import REPEATS
from ..models.presets import PRESETS
from . import stepper, texts
from .controls import LABELS, MODES
from .request import Request


def preset_choices() -> list[tuple[str, str]]:
    return [(f"{name}: {preset.description}", name) for name, preset in PRESETS.items()]


def settings_accordion(default: str, page: Request) -> dict[str, gr.components.Component]:
    """The Settings accordion's controls, by the name of the request's input each one is: the words from the
    page's table (`controls.LABELS`), the values from the page's defaults (`page`), the bounds from the
    engine's."""
    def shown(name: str, **more) -> dict:
        return {"label": LABELS[name], "value": getattr(page, name), **more}

    with gr.Accordion("Settings", open=False, elem_id="settings"):
        preset = gr.Dropdown(preset_choices(), **shown("preset", value=default),
                             info="presets marked GPU need a GPU and download their weights once")
        methods = gr.CheckboxGroup([(f"{m}: {name}", m) for m, name in METHOD_NAMES.items()],
                                   **shown("methods", value=list(page.methods)))
        mode = gr.Radio(MODES, **shown("mode"), info="single method: the first ticked method drafts alone; the weight "
                        "rule and its window are TABED's own (a static ensemble or one method learns no weights)")
        rule = gr.Radio([(texts.RULE_PHRASES[r], r) for r in RULES], **shown("rule"), elem_id="settings-rule")
        window = gr.Number(**shown("window"), precision=0, minimum=0, info="positions the weights learn from; 0 = all")
        with gr.Row():
            gamma = gr.Slider(LIMITS["gamma"][0], AUTO_CAP, **shown("gamma"), step=1, precision=0,
                              elem_id="settings-gamma", info="the most, when the draft length is adaptive")
            adaptive = gr.Checkbox(**shown("adaptive"), elem_id="settings-adaptive",
                                   info="stop drafting when the ensemble is unsure")
        with gr.Row():
            tree_width = gr.Slider(*LIMITS["tree_width"], **shown("tree_width"), step=1, precision=0,
                                   elem_id="settings-tree-width",
                                   info="1 drafts a chain; more draws a token tree this many nodes wide per depth")
            tree_policy = gr.Radio(list(TREE_POLICIES), **shown("tree_policy"), elem_id="settings-tree-policy",
                                   info="the ensemble's top tokens, each method's own top-1, the top tokens "
                                        "only where the ensemble is unsure (top under 1/2), or the ensemble's "
                                        "chain and each method's own")
            tree_blocks = gr.Radio([("every block", "all"), ("the first block", "first")], **shown("tree_blocks"),
                                   elem_id="settings-tree-blocks",
                                   info="the first block is drafted before any weight is learned")
        hedge_first = gr.Checkbox(**shown("hedge_first"), elem_id="settings-hedge-first",
                                  info="with chains and a picture, TABED's first block (drafted before any weight "
                                       "is learned) forks where the methods leave the ensemble unsure")
        max_new_tokens = gr.Slider(*LIMITS["max_new_tokens"], **shown("max_new_tokens"), step=1, precision=0,
                                   elem_id="settings-max-new-tokens",
                                   info="the prompt and the answer share the models' context (1024 tokens for the "
                                        "teaching pair): a run lowers this to what its prompt leaves, and says so")
        with gr.Row():
            temperature = gr.Slider(*LIMITS["temperature"], **shown("temperature"), step=0.05,
                                    elem_id="settings-temperature", info="0 is greedy")
            top_p = gr.Slider(0.01, 1.0, **shown("top_p"), step=0.01, elem_id="settings-top-p",
                              info="sampling draws from the likeliest tokens that add up to this (1 keeps every "
                                   "token)")
        seed = gr.Number(**shown("seed"), precision=0)
        with gr.Row():
            compare_ar = gr.Checkbox(**shown("compare_ar"))
            repeat = gr.Slider(*REPEATS, **shown("repeat"), step=1, precision=0, elem_id="settings-repeat",
                               info="each side runs this many times, in turn: the speed shown is the median run's, "
                                    "with the range (3 or 5 for a figure to show others)")
        methods_alone = gr.Checkbox(**shown("methods_alone"), elem_id="settings-methods-alone",
                                    info="its real block efficiency and speed beside the ensemble's (the metrics' "
                                         "per-method rows are otherwise lower bounds); slower: one run per method")
    return dict(preset=preset, methods=methods, mode=mode, rule=rule, window=window, gamma=gamma,
                max_new_tokens=max_new_tokens, temperature=temperature, seed=seed, compare_ar=compare_ar,
                adaptive=adaptive, tree_width=tree_width, tree_policy=tree_policy, tree_blocks=tree_blocks,
                hedge_first=hedge_first, methods_alone=methods_alone, top_p=top_p, repeat=repeat)


def stepper_group() -> SimpleNamespace:
    """The block stepper: one block of the last answer at a time, by number, previous / next, a row of the
    block table, a block of the weights chart (`texts.STEP_ON_CLICK_JS`) or a token of the answer picked."""
    ui = SimpleNamespace()
    with gr.Group(elem_id="stepper"):
        gr.Markdown("**Step through a block** of the last answer: tap one of its tokens, a row of the block table or "
                    "a block of the weights chart, or:")
        with gr.Row(equal_height=True):
            ui.previous = gr.Button("◀ previous", elem_id="step-previous", size="sm", min_width=80)
            ui.index = gr.Number(0, label="block", precision=0, elem_id="step-index", min_width=80)
            ui.next = gr.Button("next ▶", elem_id="step-next", size="sm", min_width=80)
        ui.view = gr.HTML(stepper.step_html(None, [], 0), elem_id="step-view")
    return ui
