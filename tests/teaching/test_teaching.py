"""Training the teaching pair: the data encoding, the schedule, resuming, and the training command."""

import json
from dataclasses import replace

import pytest
import torch
from transformers import LlavaForConditionalGeneration, PreTrainedTokenizerFast

from tabed.models.chat import chat_messages
from tabed.models.factory import llava_processor
from tabed.models.loading import load_pair
from tabed.teaching import cli, evaluate, train, wording, world
from tabed.teaching.knowledge import REAL_COUNTRIES

MICRO = train.RECIPES["micro"]


@pytest.fixture(scope="module")
def world_processor():
    tokenizer = train.build_tokenizer(dialogues=2000)
    return llava_processor(tokenizer, MICRO.size.image_size, MICRO.size.patch_size)


def test_tokenizer_keeps_world_words_whole_and_reads_digits_one_by_one(world_processor):
    tokenizer = world_processor.tokenizer
    tokens = tokenizer.tokenize("USER: What is the capital of France? ASSISTANT: The capital of France is Paris.")
    assert "▁capital" in tokens and "▁ASSISTANT" in tokens
    assert tokenizer.tokenize("17") == ["▁", "1", "7"]
    text = "The highest bar is bar C, the green one, with a value of 8."
    assert tokenizer.decode(tokenizer(text, add_special_tokens=False)["input_ids"]) == text
    assert tokenizer.convert_tokens_to_ids("<image>") != tokenizer.unk_token_id


def test_encoding_matches_the_processor_and_trains_on_answers_only(world_processor):
    tokenizer = world_processor.tokenizer
    for index in range(40):
        dialogue = world.training_dialogue(0, index)
        ids, labels = train.encode_dialogue(world_processor, dialogue)
        turns = train.dialogue_turns(dialogue, len(dialogue.exchanges))
        text = world_processor.apply_chat_template(chat_messages(turns), tokenize=False)
        images = [image for turn in turns for image in turn.images]
        expected = world_processor(text=text, images=images or None, return_tensors="pt")["input_ids"][0].tolist()
        assert ids == expected
        trained = [label for label in labels if label != -100]
        answers = "</s>".join(e.answer for e in dialogue.exchanges) + "</s>"
        assert tokenizer.decode(trained).replace(" ", "") == answers.replace(" ", "")


def test_scene_attributes_name_what_the_picture_shows():
    chart = world.ChartScene((3, 8), ("blue", "red"), seed=0)
    labels = train.scene_attributes(chart)
    assert labels["kind"] == [2] and labels["bars"] == [0] and labels["value"] == [3, 8, 0, 0]
    shapes = world.ShapesScene((world.Shape("star", "green", "bottom left"),), "dotted", seed=0)
    labels = train.scene_attributes(shapes)
    assert labels["shape"] == [4, 4, world.SHAPES.index("star"), 4]
    assert labels["colour"][2] == list(world.COLOURS).index("green")
    assert labels["background"] == [world.BACKGROUNDS.index("dotted")]
    text = train.scene_attributes(world.TextScene("17", "red", "grey", seed=0))
    assert text["kind"] == [1] and train.TEXTS[text["text"][0]] == "17"
    for name, (slots, classes) in train.ATTRIBUTES.items():
        for scene in (chart, shapes):
            assert len(train.scene_attributes(scene)[name]) == slots
            assert all(0 <= c < classes for c in train.scene_attributes(scene)[name])


def test_learning_rate_warms_up_then_decays_to_a_tenth():
    recipe = train.Recipe(MICRO.size, steps=100, batch_size=1, lr=1e-3, warmup=10)
    assert train.learning_rate(recipe, 0) == pytest.approx(1e-4)
    assert train.learning_rate(recipe, 9) == pytest.approx(1e-3)
    assert train.learning_rate(recipe, 99) == pytest.approx(1e-4, rel=0.01)
    rates = [train.learning_rate(recipe, s) for s in range(10, 100)]
    assert rates == sorted(rates, reverse=True)


def test_training_resumed_from_a_checkpoint_ends_where_one_run_ends(world_processor, tmp_path):
    straight = train.train("drafter", world_processor, train.Sitting(tmp_path / "a"), MICRO)
    assert (tmp_path / "a" / "drafter-vision.pt").exists()  # the vision pretraining stage, cached
    train.train("drafter", world_processor, train.Sitting(tmp_path / "b", until=2), MICRO)
    assert torch.load(tmp_path / "b" / "drafter.pt", weights_only=False)["step"] == 2
    resumed = train.train("drafter", world_processor, train.Sitting(tmp_path / "b"), MICRO)
    for (name, a), (_, b) in zip(straight.state_dict().items(), resumed.state_dict().items(), strict=True):
        assert torch.allclose(a, b, atol=1e-6), name


def test_vision_pretraining_is_cached_per_recipe(world_processor, tmp_path, capsys):
    train.train("drafter", world_processor, train.Sitting(tmp_path, until=1), MICRO)
    (tmp_path / "drafter.pt").unlink()
    train.train("drafter", world_processor, train.Sitting(tmp_path, until=1), MICRO)
    assert "another recipe" not in capsys.readouterr().err
    (tmp_path / "drafter.pt").unlink()
    longer = train.Recipe(**{**MICRO.__dict__, "vision_pretrain_steps": 5})
    train.train("drafter", world_processor, train.Sitting(tmp_path, until=1), longer)
    assert "pretraining the vision tower again" in capsys.readouterr().err


def test_a_changed_recipe_does_not_resume_silently(world_processor, tmp_path):
    train.train("drafter", world_processor, train.Sitting(tmp_path), MICRO)
    other = train.Recipe(**{**MICRO.__dict__, "lr": 5e-4})
    with pytest.raises(SystemExit, match="another recipe"):
        train.train("drafter", world_processor, train.Sitting(tmp_path), other)


@pytest.mark.slow
def test_train_command_writes_a_pair_the_loader_loads(tmp_path, capsys):
    out = tmp_path / "models"
    assert cli.main(["train", "--micro", "--work", str(tmp_path / "work"), "--out", str(out)]) == 0
    assert "step 4/4" in capsys.readouterr().err
    pair = load_pair(str(out / "target"), str(out / "drafter"), device="cpu", dtype="float32", name="micro")
    assert pair.target.config.text_config.num_hidden_layers == MICRO.size.text_layers
    assert (out / "target" / "model.safetensors").exists()
    dialogue = world.split("image", 1, 1)[0]
    assert isinstance(evaluate.answer(pair.target, pair.target_processor, dialogue, max_new_tokens=4), str)

    assert cli.main(["eval", "--models", str(out), "--cases", "3", "--drafting", "M,T"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report["block_efficiency"]) == set(world.SCENARIOS)
    assert set(report["fact_accuracy"]["target"]) == set(world.SCENARIOS)  # facts stated that are true
    assert all(set(row) == {"M", "T"} for row in report["block_efficiency"].values())
    assert all(set(row) == {"M", "T"} and all(set(profile) == {"tokens_per_miss", "near_tie_share"}
                                              for profile in row.values()) for row in report["misses"].values())
    counts = [len(d.scenes) for d in world.split("odd", train.EVAL_SEED, 3)]
    by_pictures = report["odd_by_pictures"]
    assert {int(n): row["cases"] for n, row in by_pictures.items()} == {n: counts.count(n) for n in set(counts)}
    assert all({"target_accuracy", "drafter_accuracy", "block_efficiency"} <= set(row) for row in by_pictures.values())


def test_examples_command_writes_pictures_and_prompts(tmp_path):
    assert cli.main(["examples", "--out", str(tmp_path), "--size", "96"]) == 0
    rows = json.loads((tmp_path / "examples.json").read_text())
    assert {row["scenario"] for row in rows} == {"image", "text", "odd"}
    assert all((tmp_path / name).exists() for row in rows for name in row["images"])
    assert [len(row["images"]) for row in rows if row["scenario"] == "odd"] == [3]


def test_a_dropped_picture_is_encoded_as_the_text_only_row_shows_it(world_processor):
    """Image dropout trains the drafter on exactly the prompt its T row gives at inference."""
    from tabed.engine.drafter import build_rows
    from tabed.models.chat import encode
    from tabed.models.factory import random_llava

    model = random_llava(MICRO.size, world_processor.tokenizer)
    dialogue = next(d for d in (world.training_dialogue(0, i) for i in range(50)) if d.scene is not None)
    ids, labels = train.encode_dialogue(world_processor, dialogue, image_as_newline=True)
    prompt = encode(world_processor, train.dialogue_turns(dialogue, 0), "cpu", torch.float32)
    (row,) = build_rows(model, world_processor.tokenizer, prompt, ("T",))
    assert ids[: len(row.input_ids)] == row.input_ids.tolist()
    assert labels[: len(row.input_ids)] == [-100] * len(row.input_ids)
    batch = train.training_batch(world_processor, replace(MICRO, batch_size=8, image_dropout=1.0,
                                                          followup_image_dropout=1.0), 0)
    assert "pixel_values" not in batch
    assert not (batch["input_ids"] == world_processor.tokenizer.convert_tokens_to_ids("<image>")).any()


def test_second_turns_have_their_own_picture_dropout(world_processor):
    """A drafter may be taught second turns mostly from the text: with only `followup_image_dropout`, the
    pictured dialogues of one turn keep their picture and those of two or three turns lose it."""
    recipe = replace(MICRO, batch_size=16, image_dropout=0.0, followup_image_dropout=1.0)
    image = world_processor.tokenizer.convert_tokens_to_ids("<image>")
    for step in range(train.BUCKET):
        batch = train.training_batch(world_processor, recipe, step)
        chosen = [d for _, d in train.batch_dialogues(recipe, step)]
        pictured = [bool((row == image).any()) for row in batch["input_ids"]]
        assert pictured == [d.scene is not None and len(d.exchanges) == 1 for d in chosen]


def test_the_drafter_is_taught_the_same_dialogues_without_the_chat_manner():
    """The drafter's last fine-tune (`Recipe.chat_manner`) shows answers without connectives, closings or
    contractions, each otherwise the stream's own; the target's keeps them."""
    assert train.FINE_TUNE["target"].chat_manner and not train.FINE_TUNE["drafter"].chat_manner
    for index in range(200):
        chatty = train.stream_dialogue(replace(MICRO, seed=8642), index)
        plain = train.stream_dialogue(replace(MICRO, seed=8642, chat_manner=False), index)
        assert [e.question for e in plain.exchanges] == [e.question for e in chatty.exchanges]
        assert [e.answer for e in plain.exchanges] == [wording.plain(e.answer) for e in chatty.exchanges]
        assert plain.scenes == chatty.scenes


def test_the_drafter_is_never_taught_the_invented_countries():
    """The drafter's stream draws again every dialogue that names an invented country; the target's keeps
    them (about one in seven of its dialogues), so that their facts are the target's alone."""
    assert not train.RECIPES["drafter"].invented_countries and not train.FINE_TUNE["drafter"].invented_countries
    assert train.RECIPES["target"].invented_countries and train.FINE_TUNE["target"].invented_countries
    for step in range(2):
        target = [d for _, d in train.batch_dialogues(replace(MICRO, seed=1234, batch_size=64), step)]
        drafter = [d for _, d in train.batch_dialogues(replace(MICRO, seed=4321, batch_size=64,
                                                               invented_countries=False), step)]
        assert sum(map(train.names_invented, target)) >= 4
        assert not any(map(train.names_invented, drafter))
        assert len(drafter) == 64  # drawn again, not left out
        assert any(country.name in (d.exchanges[0].answer or "") for d in drafter for country in REAL_COUNTRIES)
    asked = world.Dialogue((), (world.Exchange("Tell me about Briavia.", "I do not know."),), "text")
    assert train.names_invented(asked) and not train.names_invented(replace(asked, exchanges=()))


def test_the_fine_tuned_drafter_is_taught_first_turns_only():
    """The drafter's fine-tune cuts every dialogue to its first turn (as the paper's drafter was taught
    mostly single-turn image questions); the target's keeps its second and third turns."""
    assert train.FINE_TUNE["drafter"].max_turns == 1 and train.FINE_TUNE["target"].max_turns == 3
    recipe = replace(MICRO, seed=7, batch_size=16)
    full = dict(pair for step in range(train.BUCKET) for pair in train.batch_dialogues(recipe, step))
    first_only = replace(recipe, max_turns=1)
    cut = dict(pair for step in range(train.BUCKET) for pair in train.batch_dialogues(first_only, step))
    assert sum(len(d.exchanges) > 1 for d in full.values()) >= 20
    assert all(len(d.exchanges) == 1 for d in cut.values())
    assert {i: d.exchanges[0] for i, d in cut.items()} == {i: d.exchanges[0] for i, d in full.items()}
    assert {d.scenario for d in cut.values()} == {"image", "text"}


def test_the_targets_fine_tune_shows_the_pictures_of_its_richer_stream(world_processor):
    """The target's last fine-tune draws more of its pictures as scenes of shapes than the world does (the
    drafter's none beyond the world's own), and its batches show exactly the pictures of that stream."""
    assert train.FINE_TUNE["target"].shapes_share >= 0.5 and train.FINE_TUNE["drafter"].shapes_share == 0.0
    recipe = replace(MICRO, batch_size=16, shapes_share=1.0)
    for step in range(2):
        batch = train.training_batch(world_processor, recipe, step)
        chosen = [d for _, d in train.batch_dialogues(recipe, step)]
        pictures = [d.images()[0] for d in chosen if d.scene is not None]
        assert pictures and all(isinstance(d.scene, world.ShapesScene) for d in chosen if d.scene is not None)
        shown = world_processor.image_processor(pictures, return_tensors="pt")["pixel_values"]
        assert torch.equal(batch["pixel_values"], shown)


def test_odd_pictures_are_taught_to_the_target_and_their_answers_to_the_drafter_without_them(world_processor):
    """The target's last fine-tune shows odd pictures in a share of its dialogues, each picture in its batch;
    the drafter's shows their answers with each picture replaced by a newline, as its T row sees them: the
    paper's drafter never saw pictures unlike its training."""
    target, drafter = train.FINE_TUNE["target"], train.FINE_TUNE["drafter"]
    assert target.odd_share > 0 and target.odd_image_dropout == 0
    assert drafter.odd_share > 0 and drafter.odd_image_dropout == 1
    image = world_processor.tokenizer.convert_tokens_to_ids("<image>")
    for dropout in (0.0, 1.0):
        recipe = replace(MICRO, batch_size=16, odd_share=0.4, odd_image_dropout=dropout)
        odd = 0
        for step in range(train.BUCKET):
            batch = train.training_batch(world_processor, recipe, step)
            chosen = [d for _, d in train.batch_dialogues(recipe, step)]
            for row, dialogue in zip(batch["input_ids"], chosen, strict=True):
                is_odd = isinstance(dialogue.scene, world.OddScene)
                odd += is_odd
                shown = len(dialogue.scenes) if not (is_odd and dropout) else 0
                assert int((row == image).sum()) == shown * train.image_tokens(world_processor)
        assert 24 <= odd <= 80  # of 128 dialogues


def test_batches_of_a_bucket_hold_dialogues_of_similar_length_each_once():
    """Batch `s` is the same whoever draws it; the BUCKET batches around it share out their dialogues by
    length, every dialogue once."""
    recipe = replace(MICRO, seed=5, batch_size=8)
    parts = [train.batch_dialogues(recipe, step) for step in range(train.BUCKET)]
    assert parts[3] == train.batch_dialogues(recipe, 3)
    indices = sorted(index for part in parts for index, _ in part)
    assert indices == list(range(8 * train.BUCKET))
    lengths = [[sum(len(e.answer or "") + len(e.question) for e in d.exchanges) + 60 * len(d.scenes)
                for _, d in part] for part in parts]
    assert all(max(a) <= min(b) for a, b in zip(lengths, lengths[1:], strict=False))


def test_suite_command_writes_every_picture_of_a_case(tmp_path):
    from tabed.bench.suite import load_suite

    assert cli.main(["suite", "--out", str(tmp_path), "--cases", "6", "--size", "32"]) == 0
    cases = load_suite(tmp_path / "teaching.jsonl")
    assert {c.scenario for c in cases} == set(world.SCENARIOS)
    odd = [c for c in cases if c.scenario == "odd"]
    expected = [len(d.scenes) for d in world.split("odd", train.EVAL_SEED, 6)]
    assert [len(c.images) for c in odd] == expected and max(expected) > 1
    assert all((tmp_path / image).exists() for c in cases for image in c.images)


@pytest.mark.slow
def test_fine_tuning_starts_from_the_saved_pair_and_keeps_its_tokenizer(tmp_path, capsys):
    """`train --init DIR`: the shipped pair (here a micro one) as the starting point, its tokenizer kept and
    no vision pretraining; a recipe of another size is refused."""
    out = tmp_path / "models"
    assert cli.main(["train", "--micro", "--role", "drafter", "--work", str(tmp_path / "a"), "--out", str(out)]) == 0
    saved = LlavaForConditionalGeneration.from_pretrained(out / "drafter", dtype=torch.float32)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(out / "drafter")
    processor = llava_processor(tokenizer, MICRO.size.image_size, MICRO.size.patch_size)
    untrained = train.Recipe(**{**MICRO.__dict__, "steps": 0})
    start = train.train("drafter", processor, train.Sitting(tmp_path / "b", init=out), untrained)
    assert all(torch.equal(a, b) for a, b in zip(start.state_dict().values(), saved.state_dict().values(), strict=True))
    assert not (tmp_path / "b" / "drafter-vision.pt").exists() and "fine-tuning from" in capsys.readouterr().err
    bigger = train.Recipe(**{**MICRO.__dict__, "size": train.RECIPES["drafter"].size})
    with pytest.raises(SystemExit, match="not the shape this recipe trains"):
        train.train("drafter", processor, train.Sitting(tmp_path / "c", init=out), bigger)
    assert cli.main(["train", "--micro", "--role", "drafter", "--init", str(out), "--work", str(tmp_path / "d"),
                     "--out", str(tmp_path / "tuned")]) == 0
    assert PreTrainedTokenizerFast.from_pretrained(tmp_path / "tuned" / "drafter").get_vocab() == tokenizer.get_vocab()


@pytest.mark.slow
def test_fine_tuning_with_smaller_patches_keeps_what_fits_and_pretrains_the_new_tower(tmp_path, capsys):
    """A fine-tune that cuts pictures into smaller patches (more image tokens) starts from every saved weight
    whose shape fits, gives the tower fresh patch and position embeddings, and pretrains the tower again
    (from its saved layers) before fine-tuning; the exported drafter sees a picture as the new tokens."""
    out = tmp_path / "models"
    assert cli.main(["train", "--micro", "--role", "drafter", "--work", str(tmp_path / "a"), "--out", str(out)]) == 0
    saved = LlavaForConditionalGeneration.from_pretrained(out / "drafter", dtype=torch.float32).state_dict()
    tokenizer = PreTrainedTokenizerFast.from_pretrained(out / "drafter")
    finer = replace(MICRO.size, patch_size=MICRO.size.patch_size // 2, context=2 * MICRO.size.context)
    recipe = replace(MICRO, size=finer, steps=0)
    processor = llava_processor(tokenizer, finer.image_size, finer.patch_size)
    capsys.readouterr()
    model = train.train("drafter", processor, train.Sitting(tmp_path / "b", init=out), recipe).state_dict()
    assert "pretraining its vision tower again" in capsys.readouterr().err
    assert (tmp_path / "b" / "drafter-vision.pt").exists()
    embeddings = {k for k in model if k.startswith(train.VISION_EMBEDDINGS)}
    assert all(model[k].shape != saved[k].shape for k in embeddings if "class_embedding" not in k)
    tower = {k for k in model if k.startswith("model.vision_tower.")}
    assert all(torch.equal(model[k], saved[k]) for k in model.keys() - tower)  # the language model and projector
    assert any(not torch.equal(model[k], saved[k]) for k in tower - embeddings)  # the tower learned again
    assert train.image_tokens(processor) == 4 * train.image_tokens(
        llava_processor(tokenizer, MICRO.size.image_size, MICRO.size.patch_size))
    assert cli.main(["train", "--micro", "--role", "drafter", "--init", str(out), "--work", str(tmp_path / "c"),
                     "--out", str(tmp_path / "tuned")]) == 0  # the saved patches again: nothing to pretrain
    assert not (tmp_path / "c" / "drafter-vision.pt").exists()
