"""Training the bundled teaching pair on the procedural world of `world.py` (`python -m tabed.teaching train`).

Both models are LLaVA (CLIP vision tower, projector, Llama) sharing one BPE tokenizer, saved with
`save_pretrained` so that the loader for `llava-hf/llava-1.5-7b-hf` loads them unchanged. Training
data is drawn on the fly from a seeded stream: batch `s` is the same on every run, so a run resumed
from a checkpoint continues exactly where it stopped.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import random
import re
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
from transformers import LlavaForConditionalGeneration, LlavaProcessor, PreTrainedTokenizerFast

from ..engine.drafter import newline_ids
from ..models.chat import Turn, chat_messages
from ..models.factory import LlavaSize, bpe_tokenizer, llava_processor, random_llava
from ..models.pair import resolve_device
from . import world
from .wording import plain

TOKENIZER_SEED = 0  # the tokenizer is trained on the first dialogues of the training stream
TOKENIZER_DIALOGUES = 20_000
VOCAB_SIZE = 1024
EVAL_SEED = 1  # held-out splits; training uses `Recipe.seed` (different)


@dataclass(frozen=True)
class Recipe:
    """Everything that decides what one training run produces."""

    size: LlavaSize
    steps: int
    batch_size: int
    lr: float
    warmup: int = 100
    seed: int = 1234
    weight_decay: float = 0.05
    # The image encoder (vision tower + projector) stays frozen for the first steps, then the tower and
    # the projector train at their own fractions of the rate (0: the tower stays as pretrained).
    # Trained from the start, the encoder collapses within ~50 steps to a constant "prompt" that ignores
    # the picture (measured: loss with shuffled pictures = loss with the right ones).
    vision_frozen_steps: int = 300
    vision_lr_scale: float = 0.2
    projector_lr_scale: float = 0.2
    # Before that, the vision tower alone learns to name what is in a picture (scene type, shape and
    # colour per quadrant, the printed text, bar values and colours), as LLaVA starts from a trained
    # CLIP: with random features the language model did not ground within 500 steps.
    vision_pretrain_steps: int = 600
    vision_pretrain_batch: int = 64
    vision_pretrain_lr: float = 1e-3
    # Share of pictured dialogues the model sees without their picture, exactly as the text-only row (T)
    # shows them (the picture replaced by a newline), answers unchanged: a drafter trained so has
    # practised guessing from the text alone.
    image_dropout: float = 0.0
    # The same for pictured dialogues of two or three turns: a drafter taught second turns mostly from the
    # text (as the paper's drafter, taught on single-turn image questions) relies less on the picture there.
    followup_image_dropout: float = 0.0
    # Whether the stream shows the world's invented countries; a drafter taught without them (each such
    # dialogue drawn again) misses their facts as a small drafter misses what only its target was taught.
    invented_countries: bool = True
    # Turns a training dialogue keeps (the later ones are cut): the paper's drafter was taught mostly
    # single-turn image questions, so on a second turn it has no habit of leaning on the text history.
    max_turns: int = 3
    # Share of the stream's pictures drawn as scenes of shapes (the rest from the world's mix, itself 40%
    # shapes): where a fine-tune teaches the target to tell which colour and corner go with which shape.
    shapes_share: float = 0.0
    # Share of training dialogues that show one to four odd pictures (noise, textures, inverted scenes), and
    # the share of those the model sees without their pictures, each replaced by a newline as in the T row.
    # The target is taught to say what such pictures are, as a strong model reads a picture it cannot use;
    # a drafter taught their answers from the text only drafts them well in its T row, and in its M row
    # reads an odd picture as one of the world's (its vision tower never saw one).
    odd_share: float = 0.0
    odd_image_dropout: float = 0.0
    # Whether the stream's answers keep a chat assistant's manner ("Also, ...", "I hope this helps.",
    # "there's"); a drafter taught them plainly (`wording.plain`: the same facts and words otherwise) has
    # another manner than its target, as a small drafter taught on other instruction data than its target has.
    chat_manner: bool = True


IMAGE = dict(image_size=64, patch_size=16, context=1024)  # 16 image tokens per picture
RECIPES = {
    "target": Recipe(
        LlavaSize(text_layers=6, text_width=384, text_heads=6, vision_layers=4, vision_width=192, vision_heads=3,
                  **IMAGE),
        steps=6000, batch_size=128, lr=1e-3, vision_pretrain_steps=1500,
    ),
    "drafter": Recipe(
        LlavaSize(text_layers=2, text_width=128, text_heads=2, vision_layers=2, vision_width=96, vision_heads=2,
                  **IMAGE),
        steps=3000, batch_size=64, lr=2e-3, seed=4321, vision_pretrain_steps=1500, image_dropout=0.1,
        followup_image_dropout=1.0, invented_countries=False,
    ),
}
# Fine-tuning a trained pair on this world (`train --init DIR`): the pair's vision and vocabulary are
# there already; what each fine-tune adds (the wording, the longer answers, the knowledge, which colour goes
# with which shape, what an odd picture is) is in the model card. Sized for a 2-core CPU inside one working
# session (fp32; the target's steps take 4 to 6 s, the drafter's 0.3 to 0.4 s).
FINE_TUNE = {
    # The target's last fine-tunes taught it what an odd picture is (noise, a blurry texture, an inverted
    # scene, one to four at once), in runs each from the last (the model card has them); this is the last: a
    # quarter of its dialogues show odd pictures, most in-world pictures are scenes of shapes so that it keeps
    # which colour goes with which shape, the vision tower as it was (its features tell an odd picture's kind
    # apart: a linear read-out of them is right 99% of the time), the projector at the full rate.
    "target": replace(RECIPES["target"], steps=160, batch_size=32, lr=2.5e-4, warmup=20, vision_frozen_steps=20,
                      vision_lr_scale=0.0, projector_lr_scale=1.0, shapes_share=0.6, odd_share=0.25, seed=4680),
    # The drafter's fine-tunes show first turns only, each with its picture (it has no habit of drafting from
    # the text history of a second turn), and a tenth of its dialogues odd pictures' answers with each picture
    # replaced by a newline, as its T row shows them: like the paper's drafter it never saw such pictures, so
    # its M row reads them as the world's. The last one words its answers plainly (no "Also,", no closing
    # remark, no contractions), where its target speaks as a chat assistant. Its last one also cuts pictures
    # into patches of 4 pixels: 256 tokens a picture, most of its prompt as LLaVA's 576 are of a 68M drafter's,
    # where the target takes 16 (its tower pretrained again first, `start_from`); a picture that fills the
    # drafter's context leaves the text history less of its attention, as in the paper's pair. Its projector
    # learns at the full rate: the new tower's features are new to it (M leads T on image questions by 1.10x;
    # by 1.08x with the projector at a fifth of the rate).
    "drafter": replace(RECIPES["drafter"], size=replace(RECIPES["drafter"].size, patch_size=4, context=2048),
                       steps=800, batch_size=32, lr=1.5e-3, warmup=50, vision_frozen_steps=100, max_turns=1,
                       projector_lr_scale=1.0, image_dropout=0.0, odd_share=0.1, odd_image_dropout=1.0,
                       chat_manner=False, seed=8643),
}
RECIPES |= {
    # seconds, for the smoke test
    "micro": Recipe(
        LlavaSize(text_layers=1, text_width=32, text_heads=2, vision_layers=1, vision_width=16, vision_heads=2,
                  image_size=32, patch_size=8, context=512),
        steps=4, batch_size=4, lr=1e-3, warmup=2, vision_frozen_steps=2, vision_pretrain_steps=3,
        vision_pretrain_batch=4,
    ),
}


def log_line(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- data


def build_tokenizer(dialogues: int = TOKENIZER_DIALOGUES) -> PreTrainedTokenizerFast:
    return bpe_tokenizer(world.corpus(TOKENIZER_SEED, dialogues), VOCAB_SIZE)


def dialogue_turns(dialogue: world.Dialogue, answered: int, size: int = world.CANVAS) -> list[Turn]:
    """The first `answered` exchanges with their answers, then the next question (if any) open."""
    turns = []
    for i, exchange in enumerate(dialogue.exchanges[: answered + 1]):
        images = dialogue.images(size) if i == 0 else []
        turns.append(Turn(exchange.question, images, exchange.answer if i < answered else None))
    return turns


def encode_dialogue(processor: LlavaProcessor, dialogue: world.Dialogue,
                    image_as_newline: bool = False) -> tuple[list[int], list[int]]:
    """Token ids of the whole conversation and labels that train on the answers (and their </s>) only.

    Each answer's span is found from the encoding of the conversation up to its question, so the
    prompt format is exactly the one the processor's chat template gives at inference time. With
    `image_as_newline` the picture's place holds one newline token, as in the drafter's T row."""
    tokenizer = processor.tokenizer
    image_id = tokenizer.convert_tokens_to_ids("<image>")
    messages = chat_messages([Turn(e.question, [None] * len(dialogue.scenes) if i == 0 else [], e.answer)
                              for i, e in enumerate(dialogue.exchanges)])

    def ids(count: int, open_question: bool) -> list[int]:
        shown = messages[: 2 * count + (1 if open_question else 0)]
        text = processor.apply_chat_template(shown, add_generation_prompt=open_question, tokenize=False)
        return tokenizer(text)["input_ids"]

    full = ids(len(dialogue.exchanges), False)
    labels = [-100] * len(full)
    for i in range(len(dialogue.exchanges)):
        start, end = len(ids(i, True)), len(ids(i + 1, False))
        if full[:end] != ids(i + 1, False):
            raise ValueError("the chat template does not encode a conversation as a prefix of its continuation")
        labels[start:end] = full[start:end]
    newline = int(newline_ids(tokenizer)[-1])
    expanded_ids, expanded_labels = [], []
    for token, label in zip(full, labels, strict=True):
        if token == image_id and image_as_newline:
            expanded_ids.append(newline)
            expanded_labels.append(label)
            continue
        repeat = image_tokens(processor) if token == image_id else 1
        expanded_ids += [token] * repeat
        expanded_labels += [label] * repeat
    return expanded_ids, expanded_labels


def image_tokens(processor: LlavaProcessor) -> int:
    size = processor.image_processor.crop_size["height"]
    return (size // processor.patch_size) ** 2 + processor.num_additional_image_tokens - 1


BUCKET = 8  # batches drawn together and sorted by length, so that a batch holds dialogues of similar length


def _rough_length(dialogue: world.Dialogue) -> int:
    return sum(len(e.question) + len(e.answer) for e in dialogue.exchanges) + 60 * len(dialogue.scenes)


INVENTED = re.compile(r"\b(?:" + "|".join(country.name for country in world.INVENTED_COUNTRIES) + r")\b")


def names_invented(dialogue: world.Dialogue) -> bool:
    return any(INVENTED.search(f"{e.question} {e.answer}") for e in dialogue.exchanges)


def stream_dialogue(recipe: Recipe, index: int) -> world.Dialogue:
    """Dialogue `index` of the recipe's training stream, cut to its first `max_turns` turns; without
    `invented_countries`, one that names an invented country is drawn again from another seed until it names
    none; without `chat_manner`, its answers are said plainly (`wording.plain`)."""
    def draw(seed: int) -> world.Dialogue:
        return world.training_dialogue(seed, index, recipe.shapes_share, recipe.odd_share).first_turns(recipe.max_turns)

    dialogue, redraw = draw(recipe.seed), 0
    while not recipe.invented_countries and names_invented(dialogue):
        redraw += 1
        dialogue = draw(recipe.seed + 1000 * redraw)
    if recipe.chat_manner:
        return dialogue
    exchanges = tuple(replace(e, answer=plain(e.answer)) for e in dialogue.exchanges)
    return replace(dialogue, exchanges=exchanges)


def batch_dialogues(recipe: Recipe, step: int) -> list[tuple[int, world.Dialogue]]:
    """The (index, dialogue) pairs of batch `step`: its share of the BUCKET batches around it, by length
    (padding cost half the compute of mixed batches on a CPU)."""
    size = recipe.batch_size
    first = step // BUCKET * BUCKET * size
    drawn = [(index, stream_dialogue(recipe, index)) for index in range(first, first + BUCKET * size)]
    drawn.sort(key=lambda pair: (_rough_length(pair[1]), pair[0]))
    part = step % BUCKET
    return drawn[part * size: (part + 1) * size]


def training_batch(processor: LlavaProcessor, recipe: Recipe, step: int) -> dict[str, torch.Tensor]:
    """Batch `step` of the stream: right-padded ids, answer-only labels, pixel values of the pictures."""
    dialogues, shown = [], []
    for index, dialogue in batch_dialogues(recipe, step):
        if isinstance(dialogue.scene, world.OddScene):
            dropout = recipe.odd_image_dropout
        else:
            dropout = recipe.followup_image_dropout if len(dialogue.exchanges) > 1 else recipe.image_dropout
        dropped = dialogue.scene is not None and random.Random(f"dropout {recipe.seed} {index}").random() < dropout
        dialogues.append(dialogue)
        shown.append(dialogue.scene is not None and not dropped)
    batch_size = recipe.batch_size
    encoded = [encode_dialogue(processor, d, image_as_newline=d.scene is not None and not keep)
               for d, keep in zip(dialogues, shown, strict=True)]
    length = max(len(ids) for ids, _ in encoded)
    pad = processor.tokenizer.pad_token_id
    input_ids = torch.full((batch_size, length), pad, dtype=torch.long)
    labels = torch.full((batch_size, length), -100, dtype=torch.long)
    mask = torch.zeros((batch_size, length), dtype=torch.long)
    for row, (ids, labs) in enumerate(encoded):
        input_ids[row, : len(ids)] = torch.tensor(ids)
        labels[row, : len(ids)] = torch.tensor(labs)
        mask[row, : len(ids)] = 1
    batch = {"input_ids": input_ids, "attention_mask": mask, "labels": labels}
    images = [image for d, keep in zip(dialogues, shown, strict=True) if keep for image in d.images()]
    if images:
        batch["pixel_values"] = processor.image_processor(images, return_tensors="pt")["pixel_values"]
    return batch


# ---------------------------------------------------------------- training

TEXTS = list(world.WORDS) + [str(n) for n in range(1, 21)]
# attribute: (slots per picture, classes per slot); the last class of a slot means "none"
ATTRIBUTES = {"kind": (1, 3), "background": (1, len(world.BACKGROUNDS)), "shape": (4, len(world.SHAPES) + 1),
              "colour": (4, len(world.COLOURS) + 1), "text": (1, len(TEXTS) + 1), "ink": (1, len(world.INK) + 1),
              "bars": (1, 3), "value": (4, 10), "bar_colour": (4, len(world.COLOURS) + 1)}


def scene_attributes(scene: world.Scene) -> dict[str, list[int]]:
    """What a picture shows, as class indices per attribute slot (the targets of vision pretraining)."""
    colours, none_colour = list(world.COLOURS), len(world.COLOURS)
    labels = {"kind": [0], "background": [0], "shape": [len(world.SHAPES)] * 4, "colour": [none_colour] * 4,
              "text": [len(TEXTS)], "ink": [len(world.INK)], "bars": [0], "value": [0] * 4,
              "bar_colour": [none_colour] * 4}
    if isinstance(scene, world.ShapesScene):
        labels["background"] = [world.BACKGROUNDS.index(scene.background)]
        for shape in scene.shapes:
            slot = world.POSITIONS.index(shape.position)
            labels["shape"][slot] = world.SHAPES.index(shape.kind)
            labels["colour"][slot] = colours.index(shape.colour)
    elif isinstance(scene, world.TextScene):
        labels["kind"] = [1]
        labels["background"] = [world.BACKGROUNDS.index(scene.background)]
        labels["text"] = [TEXTS.index(scene.text)]
        labels["ink"] = [list(world.INK).index(scene.ink)]
    elif isinstance(scene, world.ChartScene):
        labels["kind"] = [2]
        labels["bars"] = [len(scene.values) - 2]
        for slot, (value, colour) in enumerate(zip(scene.values, scene.colours, strict=True)):
            labels["value"][slot] = value
            labels["bar_colour"][slot] = colours.index(colour)
    return labels


def pretrain_vision(model: LlavaForConditionalGeneration, processor: LlavaProcessor, recipe: Recipe, work: Path,
                    role: str) -> None:
    """Train the vision tower with linear read-outs of the scene attributes; cached in `work`.

    The read-outs see the patch features only, the ones LLaVA passes on to the language model."""
    cache = work / f"{role}-vision.pt"
    tower = model.model.vision_tower
    made_by = {"size": asdict(recipe.size), "seed": recipe.seed, "steps": recipe.vision_pretrain_steps,
               "batch": recipe.vision_pretrain_batch, "lr": recipe.vision_pretrain_lr, "features": "patches"}
    if cache.exists():
        state = torch.load(cache, weights_only=False, map_location="cpu")
        if state.get("made_by") == made_by:
            tower.load_state_dict(state["tower"])
            return
        log_line(f"[{role}] {cache} was made with another recipe: pretraining the vision tower again")
    if recipe.vision_pretrain_steps <= 0:
        return
    size, device = recipe.size, next(tower.parameters()).device
    patches = (size.image_size // size.patch_size) ** 2
    heads = torch.nn.ModuleDict({name: torch.nn.Linear(size.vision_width * patches, slots * classes)
                                 for name, (slots, classes) in ATTRIBUTES.items()}).to(device)
    optimizer = torch.optim.AdamW([*tower.parameters(), *heads.parameters()], lr=recipe.vision_pretrain_lr)
    tower.train()
    started = time.perf_counter()
    for step in range(recipe.vision_pretrain_steps):
        rng = random.Random(recipe.seed * 1_000_003 + step)
        scenes = [world.random_scene(rng) for _ in range(recipe.vision_pretrain_batch)]
        pixels = processor.image_processor([world.render(s) for s in scenes], return_tensors="pt")["pixel_values"]
        labels = [scene_attributes(s) for s in scenes]
        with _autocast(device):
            features = tower(pixels.to(device), output_hidden_states=True).hidden_states[-1][:, 1:].flatten(1)
            loss = 0.0
            for name, (_, classes) in ATTRIBUTES.items():
                logits = heads[name](features).view(-1, classes)
                target = torch.tensor([label[name] for label in labels], device=device).view(-1)
                loss = loss + torch.nn.functional.cross_entropy(logits.float(), target)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if (step + 1) % 100 == 0 or step + 1 == recipe.vision_pretrain_steps:
            log_line(f"[{role}] vision pretraining {step + 1}/{recipe.vision_pretrain_steps}  "
                f"loss {float(loss.detach()):.3f}  elapsed {(time.perf_counter() - started) / 60:.1f} min")
    tower.eval()
    torch.save({"made_by": made_by, "tower": tower.state_dict()}, cache)


def _autocast(device: torch.device) -> contextlib.AbstractContextManager:
    """bf16 autocast on a GPU; none on a CPU, where it ran 30 times slower than fp32 on our 2-core machine
    (no bf16 instructions: a target step of 32 dialogues took 70 s against 2.3 s)."""
    return torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else contextlib.nullcontext()


def learning_rate(recipe: Recipe, step: int) -> float:
    """Linear warm-up, then cosine decay to a tenth."""
    if step < recipe.warmup:
        return recipe.lr * (step + 1) / recipe.warmup
    progress = (step - recipe.warmup) / max(1, recipe.steps - recipe.warmup)
    return recipe.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def _part(name: str) -> str:
    return "tower" if "vision_tower" in name else "projector" if "multi_modal_projector" in name else "language"


def _optimizer(model, recipe: Recipe) -> torch.optim.Optimizer:
    groups = []
    for part in ("tower", "projector", "language"):
        for decay in (True, False):
            params = [p for n, p in model.named_parameters() if _part(n) == part and (p.dim() >= 2) == decay]
            groups.append({"params": params, "weight_decay": recipe.weight_decay if decay else 0.0, "part": part})
    return torch.optim.AdamW(groups, lr=recipe.lr, betas=(0.9, 0.98))


def _set_rates(optimizer: torch.optim.Optimizer, recipe: Recipe, step: int) -> None:
    rate = learning_rate(recipe, step)
    scales = {"language": 1.0, "tower": recipe.vision_lr_scale, "projector": recipe.projector_lr_scale}
    for group in optimizer.param_groups:
        frozen = group["part"] != "language" and step < recipe.vision_frozen_steps
        group["lr"] = 0.0 if frozen else rate * scales[group["part"]]


class _Batches(torch.utils.data.Dataset):
    """Batches `first`, `first + 1`, ... of the training stream, for a DataLoader's worker processes."""

    def __init__(self, processor, recipe: Recipe, first: int, last: int):
        self.processor, self.recipe, self.first, self.last = processor, recipe, first, last

    def __len__(self) -> int:
        return self.last - self.first

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return training_batch(self.processor, self.recipe, self.first + i)


@dataclass(frozen=True)
class Sitting:
    """How one training sitting runs: where its checkpoint lives, whether to start over, the step to stop
    at (checkpoint kept, to split a long run into several sittings), the device (None: CUDA if present),
    the processes drawing batches (default: none on a CPU, whose cores the model needs; four beside a
    GPU; batch `s` is the same whichever process draws it), and a saved pair to fine-tune from (`init`:
    a folder with `target/` and `drafter/`, such as assets/models) instead of random weights."""

    work: Path
    init: Path | None = None
    restart: bool = False
    until: int | None = None
    device: str | None = "cpu"
    workers: int | None = None
    log_every: int = 20
    save_every: int = 100


def train(role: str, processor: LlavaProcessor, sitting: Sitting,
          recipe: Recipe | None = None) -> LlavaForConditionalGeneration:
    """Train one model of the pair, checkpointing to `work/<role>.pt`; returns the model in eval mode."""
    recipe = recipe or RECIPES[role]
    device = resolve_device(sitting.device)
    sitting.work.mkdir(parents=True, exist_ok=True)
    checkpoint = sitting.work / f"{role}.pt"
    model = random_llava(recipe.size, processor.tokenizer, seed=recipe.seed).to(device)
    optimizer = _optimizer(model, recipe)
    step = _resume(model, optimizer, checkpoint, recipe, sitting.restart)
    if step:
        log_line(f"[{role}] resuming from step {step}/{recipe.steps}")
    elif sitting.init is not None:
        if start_from(model, sitting.init / role):
            log_line(f"[{role}] {sitting.init / role} cuts pictures into other patches: pretraining its vision tower "
                "again")
            pretrain_vision(model, processor, recipe, sitting.work, role)
        log_line(f"[{role}] fine-tuning from {sitting.init / role}")
    else:
        pretrain_vision(model, processor, recipe, sitting.work, role)
    params = sum(p.numel() for p in model.parameters())
    log_line(f"[{role}] {params / 1e6:.1f}M parameters, {recipe.steps} steps of {recipe.batch_size} dialogues")
    model.train()
    progress = _Progress(role, recipe, step)
    last = min(recipe.steps, sitting.until or recipe.steps)
    workers = (0 if device.type == "cpu" else 4) if sitting.workers is None else sitting.workers
    batches = iter(torch.utils.data.DataLoader(_Batches(processor, recipe, step, last), batch_size=None,
                                               num_workers=workers, prefetch_factor=4 if workers else None))
    while step < last:
        batch = {name: tensor.to(device) for name, tensor in next(batches).items()}
        _set_rates(optimizer, recipe, step)
        with _autocast(device):
            loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        progress.add(int(batch["attention_mask"].sum()), float(loss.detach()))
        if step % sitting.log_every == 0 or step == last:
            progress.report(step, last)
        if step % sitting.save_every == 0 or step == last:
            state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step,
                     "recipe": asdict(recipe)}
            torch.save(state, checkpoint.with_suffix(".tmp"))
            checkpoint.with_suffix(".tmp").replace(checkpoint)
    return model.eval()


VISION_EMBEDDINGS = "model.vision_tower.embeddings."


def start_from(model: LlavaForConditionalGeneration, folder: Path) -> bool:
    """Load a saved model's weights into `model` (fine-tuning: its vision tower is trained already). A recipe
    may cut pictures into other patches than the saved model's: the tower's patch and position embeddings
    then keep their fresh weights, and True says the tower must be pretrained again; any other difference
    in shape (a recipe of another size) is refused."""
    saved = LlavaForConditionalGeneration.from_pretrained(folder, dtype=torch.float32).state_dict()
    mine = model.state_dict()
    changed = {k for k in mine.keys() & saved.keys() if saved[k].shape != mine[k].shape}
    if saved.keys() != mine.keys() or any(not k.startswith(VISION_EMBEDDINGS) for k in changed):
        raise SystemExit(f"{folder} is not the shape this recipe trains: fine-tune it with its own recipe")
    model.load_state_dict({k: v for k, v in saved.items() if k not in changed}, strict=not changed)
    return bool(changed)


def _resume(model: LlavaForConditionalGeneration, optimizer: torch.optim.Optimizer, checkpoint: Path,
            recipe: Recipe, restart: bool) -> int:
    """The step a checkpoint of this recipe reached, its weights and optimizer state loaded; 0 without one."""
    if not checkpoint.exists() or restart:
        return 0
    state = torch.load(checkpoint, weights_only=False, map_location=next(model.parameters()).device)
    if state["recipe"] != asdict(recipe):
        raise SystemExit(f"{checkpoint} was made with another recipe; pass --restart to start over")
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return state["step"]


class _Progress:
    """Loss, throughput and time left, logged every few steps."""

    def __init__(self, role: str, recipe: Recipe, first: int) -> None:
        self.role, self.recipe, self.first = role, recipe, first
        self.start, self.tokens, self.losses = time.perf_counter(), 0, []

    def add(self, tokens: int, loss: float) -> None:
        self.tokens += tokens
        self.losses.append(loss)

    def report(self, step: int, last: int) -> None:
        elapsed = time.perf_counter() - self.start
        eta = elapsed / (step - self.first) * (last - step)
        log_line(f"[{self.role}] step {step}/{self.recipe.steps}  loss {sum(self.losses) / len(self.losses):.4f}  "
            f"lr {learning_rate(self.recipe, step - 1):.2e}  {self.tokens / elapsed:.0f} tok/s  "
            f"elapsed {elapsed / 60:.1f} min  eta {eta / 60:.1f} min")
        self.losses = []


def export(model: LlavaForConditionalGeneration, processor: LlavaProcessor, folder: Path) -> None:
    """Save in half precision (what ships in assets/), with the processor and chat template."""
    folder.mkdir(parents=True, exist_ok=True)
    model.to(torch.float16).save_pretrained(folder)
    model.to(torch.float32)
    processor.save_pretrained(folder)


def load_or_build_tokenizer(work: Path) -> PreTrainedTokenizerFast:
    folder = work / "tokenizer"
    if (folder / "tokenizer.json").exists():
        return PreTrainedTokenizerFast.from_pretrained(folder)
    tokenizer = build_tokenizer()
    tokenizer.save_pretrained(folder)
    return tokenizer


def train_command(args: argparse.Namespace) -> int:
    if args.threads:
        torch.set_num_threads(args.threads)
    work, out = Path(args.work), Path(args.out)
    roles = ["target", "drafter"] if args.role == "both" else [args.role]
    init = Path(args.init) if args.init else None
    tokenizer = PreTrainedTokenizerFast.from_pretrained(init / roles[0]) if init else load_or_build_tokenizer(work)
    for role in roles:
        recipe = RECIPES["micro"] if args.micro else FINE_TUNE[role] if init else RECIPES[role]
        if args.steps:
            recipe = Recipe(**{**recipe.__dict__, "steps": args.steps})
        processor = llava_processor(tokenizer, recipe.size.image_size, recipe.size.patch_size)
        started = time.perf_counter()
        sitting = Sitting(work, init, restart=args.restart, until=args.until, device=args.device,
                          workers=args.workers)
        model = train(role, processor, sitting, recipe)
        if args.until and args.until < recipe.steps:
            log_line(f"[{role}] stopped at step {args.until}; run the same command without --until to go on")
            return 0
        export(model, processor, out / role)
        log_line(f"[{role}] saved to {out / role} ({(time.perf_counter() - started) / 60:.1f} min)")
    return 0
