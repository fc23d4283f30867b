"""The procedural world: reproducible per seed, answers true to the scene, splits apart."""

import random

import pytest

from tabed.teaching import world


def test_training_stream_is_deterministic_per_seed():
    for index in range(50):
        a, b = world.training_dialogue(3, index), world.training_dialogue(3, index)
        assert a == b
        assert len(a.scenes) <= 1  # training never shows more than one picture
        assert [i.tobytes() for i in a.images()] == [i.tobytes() for i in b.images()]
    first = [world.training_dialogue(3, i) for i in range(50)]
    other = [world.training_dialogue(4, i) for i in range(50)]
    assert sum(a == b for a, b in zip(first, other, strict=True)) < 5


def test_held_out_splits_are_reproducible_and_differ_from_training():
    training = {world.training_dialogue(1234, i).scene for i in range(2000)}
    for scenario in world.SCENARIOS:
        split = world.split(scenario, 1, 30)
        assert split == world.split(scenario, 1, 30)
        assert all(d.scenario == scenario for d in split)
        # pictures are never repeated; text questions on the small knowledge base may be
        assert not any(d.scene in training for d in split if d.scene is not None)
    followups = world.split("followup", 1, 30)
    assert all(len(d.exchanges) == 2 for d in followups)


def test_scenarios_have_the_pictures_they_promise():
    for d in world.split("image", 1, 40):
        assert d.scene is not None and d.exchanges[0].about_image
        assert [i.size for i in d.images()] == [(world.CANVAS, world.CANVAS)]
    odd = world.split("odd", 1, 40)
    assert {len(d.scenes) for d in odd} == set(range(world.ODD_PICTURES[0], world.ODD_PICTURES[1] + 1))
    for d in odd:
        assert all(isinstance(scene, world.OddScene) for scene in d.scenes)
        assert all(image.mode == "RGB" for image in d.images())
        if d.exchanges[0].about_image:
            assert d.exchanges[0].answer is None  # nothing in an odd picture has a right answer
    assert any(d.scene is None and not d.images() for d in world.split("text", 1, 40))
    assert all(not d.exchanges[0].about_image for d in world.split("text", 1, 40))


def test_chart_answers_read_the_chart():
    rng = random.Random(0)
    for _ in range(200):
        scene = world.random_chart(rng)
        exchange = world.image_question(scene, rng)
        top = max(scene.values)
        if exchange.question.startswith("Which bar") and "highest" in exchange.question:
            label = world.LABELS[scene.values.index(top)]
            assert exchange.answer.startswith(f"The highest bar is bar {label}")
            assert exchange.answer.endswith(f"value of {top}.")
            assert exchange.number == top


def test_shape_answers_match_the_scene():
    rng = random.Random(1)
    for _ in range(200):
        scene = world.random_shapes(rng)
        exchange = world.image_question(scene, rng)
        assert len({s.kind for s in scene.shapes}) == len(scene.shapes)
        assert len({s.position for s in scene.shapes}) == len(scene.shapes)
        for shape in scene.shapes:
            if exchange.question in (f"What colour is the {shape.kind}?", f"Which colour does the {shape.kind} have?"):
                assert exchange.answer == (f"The {shape.kind} is {shape.colour}. "
                                           f"It is at the {shape.position} of the image.")


def test_follow_ups_build_on_the_first_answer():
    rng = random.Random(2)
    first = world.Exchange("What is 4 plus 3?", "4 plus 3 equals 7, so the answer is 7.", 7, "it is 7")
    seen = set()
    for _ in range(200):
        follow = world.follow_up(None, first, rng)
        if follow.question.endswith(("to that number.", "?")) and "that number" in follow.question:
            seen.add("add")
            b = int(follow.question.split()[1] if follow.question.startswith("Add") else
                    follow.question.rstrip("?").split()[-1])
            assert follow.answer == f"7 plus {b} equals {7 + b}, so the answer is {7 + b}."
        elif follow.question in ("Are you sure?", "Is that right?"):
            seen.add("sure")
            assert follow.answer == "Yes, I am sure. 4 plus 3 equals 7, so the answer is 7."
        elif follow.answer.startswith("In short"):
            seen.add("summary")
            assert follow.answer == "In short, it is 7."
    assert seen == {"add", "sure", "summary"}


def test_answers_are_sentences_of_several_tokens():
    lengths = [len(e.answer.split()) for i in range(500) for e in world.training_dialogue(0, i).exchanges]
    assert min(lengths) >= 4 and max(lengths) <= 60
    assert sum(lengths) / len(lengths) >= 8


def test_unknown_scenario_is_refused():
    with pytest.raises(ValueError, match="unknown scenario"):
        world.scenario_dialogue("poetry", 0, 0)
