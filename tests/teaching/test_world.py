"""The procedural world: reproducible per seed, answers true to the scene, worded anew each time, splits apart."""

import random
import re

import pytest

from tabed.teaching import answers, facts, wording, world


def test_training_stream_is_deterministic_per_seed():
    for index in range(50):
        a, b = world.training_dialogue(3, index), world.training_dialogue(3, index)
        assert a == b
        assert [e.answer for e in a.exchanges] == [e.answer for e in b.exchanges]
        assert len(a.scenes) <= 1  # training never shows more than one picture
        assert [i.tobytes() for i in a.images()] == [i.tobytes() for i in b.images()]
    first = [world.training_dialogue(3, i) for i in range(50)]
    other = [world.training_dialogue(4, i) for i in range(50)]
    assert sum(a == b for a, b in zip(first, other, strict=True)) < 5


def test_a_shapes_share_draws_more_scenes_of_shapes_and_none_leaves_the_stream_as_it_was():
    """The target's last fine-tune (`Recipe.shapes_share`) sees scenes of shapes more often than the world's
    own 40%; a stream without one is exactly the world's, so every other recipe's batches are unchanged."""
    def shapes(dialogues):
        pictured = [d for d in dialogues if d.scene is not None]
        return sum(isinstance(d.scene, world.ShapesScene) for d in pictured) / len(pictured)

    plain = [world.training_dialogue(3, i) for i in range(500)]
    richer = [world.training_dialogue(3, i, shapes_share=0.5) for i in range(500)]
    assert 0.3 < shapes(plain) < 0.5 and 0.6 < shapes(richer) < 0.8
    assert shapes([world.training_dialogue(3, i, shapes_share=1.0) for i in range(100)]) == 1.0
    for dialogue, unshared in zip(plain, (world.training_dialogue(3, i, shapes_share=0.0) for i in range(500)),
                                  strict=True):
        assert dialogue == unshared and [e.answer for e in dialogue.exchanges] == [e.answer for e in unshared.exchanges]


def test_held_out_splits_are_reproducible_and_differ_from_training():
    training = {world.training_dialogue(1234, i).scene for i in range(2000)}
    for scenario in world.SCENARIOS:
        split = world.split(scenario, 1, 30)
        assert split == world.split(scenario, 1, 30)
        assert all(d.scenario == scenario for d in split)
        # pictures are never repeated; text questions on the knowledge base may be
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
        assert d.exchanges[0].about_image  # asked about the pictures, the answer says what each is, in order
        sentences = d.exchanges[0].answer.split(". ")
        said = [sentence for sentence in sentences if any(kind in sentence for kind in world.ODD_KINDS)]
        assert len(said) == len(d.scenes)
        for sentence, scene in zip(said, d.scenes, strict=True):
            others = [kind for kind in world.ODD_KINDS if kind != scene.kind]
            assert scene.kind in sentence and not any(other in sentence for other in others)
    assert any(d.scene is None and not d.images() for d in world.split("text", 1, 40))
    assert all(not d.exchanges[0].about_image for d in world.split("text", 1, 40))


def test_the_training_stream_shows_odd_pictures_only_where_a_recipe_asks():
    """A share of odd dialogues leaves every other dialogue of the stream as it was."""
    plain = [world.training_dialogue(3, i) for i in range(400)]
    mixed = [world.training_dialogue(3, i, odd_share=0.25) for i in range(400)]
    assert not any(isinstance(d.scene, world.OddScene) for d in plain)
    odd = [d for d in mixed if isinstance(d.scene, world.OddScene)]
    assert 70 <= len(odd) <= 130
    assert all(m == p for m, p in zip(mixed, plain, strict=True) if m not in odd)
    assert 0.45 <= sum(d.exchanges[0].about_image for d in odd) / len(odd) <= 0.75
    assert {len(d.scenes) for d in odd} == set(range(world.ODD_PICTURES[0], world.ODD_PICTURES[1] + 1))
    assert any(len(d.exchanges) > 1 for d in odd)


def _exchanges(count: int = 1500):
    """The exchanges of a training stream that shows odd pictures too (a tenth of its dialogues)."""
    for index in range(count):
        dialogue = world.training_dialogue(7, index, odd_share=0.1)
        for exchange in dialogue.exchanges:
            yield dialogue, exchange


def test_answers_are_worded_anew_but_state_the_same_facts():
    """Wording and order are near-ties drawn for each example; whatever is drawn states the same facts."""
    worded, reworded = 0, 0
    for index, (_, exchange) in enumerate(_exchanges()):
        again = exchange.reword(random.Random(index))
        worded += 1
        reworded += again != exchange.answer and not exchange.answer.endswith(again)
        assert facts.check(again, exchange.answer) == facts.check(exchange.answer, exchange.answer), (again, exchange)
        assert facts.check(exchange.answer, again).wrong == 0
    assert reworded > 0.8 * worded


def test_interchangeable_words_are_drawn_one_by_one_and_state_no_fact():
    """Inside a sentence, "image" or "picture", "four" or "4", "is left of" or "is to the left of": each
    occurrence is its own near-tie, and no choice adds, drops or changes a fact."""
    text = ("The image shows four shapes on a white background. It is in the top left corner. The red star is "
            "to the left of the blue circle. So 23 plus 48 is 71. About 68 million people live there.")
    drawn = {wording.vary(random.Random(seed), text) for seed in range(300)}
    assert len(drawn) > 200
    assert all(facts.facts(varied) == facts.facts(text) for varied in drawn)
    for said in ("The picture contains 4 shapes", "The image has four shapes", "against a white background",
                 "It's in the top left.", "The red star is left of", "That means 23 plus 48 gives 71.", "Roughly 68"):
        assert any(said in varied for varied in drawn), said


def test_sentences_open_and_answers_close_either_way_stating_no_fact():
    """"Also," or "Additionally," or neither before each later sentence that can take one, a closing remark
    or none: near-ties between sentences, drawn one by one, that add no fact."""
    text = "The image shows four shapes. It is red. So 23 plus 48 is 71. The red star is above the blue circle."
    drawn = {wording.link(random.Random(seed), text) for seed in range(300)}
    assert len(drawn) == 3 * 3 * 3  # two sentences that can take a connective, and the closing
    for linked in drawn:
        assert facts.facts(linked) == facts.facts(text)
        assert linked.startswith("The image shows four shapes. ")  # the first sentence opens the answer
        assert ". So 23 plus 48 is 71." in linked  # "So" takes no connective
    for said in ("Also, it is red.", "Additionally, the red star", ". It is red.", "circle. I hope this helps.",
                 "Just ask if you want to know more.", "the blue circle."):
        assert any(said in linked for linked in drawn), said
    assert any(linked.endswith("the blue circle.") for linked in drawn)


def test_a_plain_answer_keeps_every_fact_and_word_but_the_chat_manner():
    """`plain` drops what `link` drew (connectives, the closing) and spells out contractions: the answer a
    drafter taught in another manner gives, stating the same facts in the same order."""
    text = ("The image shows four shapes. It's red. So 23 plus 48 is 71. There's a star above the blue circle. "
            "I can't count them.")
    for seed in range(100):
        linked = wording.link(random.Random(seed), text)
        assert wording.plain(linked) == ("The image shows four shapes. It is red. So 23 plus 48 is 71. There is a "
                                         "star above the blue circle. I cannot count them.")
    for _, exchange in _exchanges(800):
        said = wording.plain(exchange.answer)
        assert not re.search(r"\b(?:Also|Additionally),|I hope this helps|Just ask|'s\b|can't", said), said
        assert facts.facts(said) == facts.facts(exchange.answer)
        assert wording.plain(said) == said


def test_every_interchangeable_phrase_occurs_in_the_worlds_answers():
    said = " ".join(exchange.answer for _, exchange in _exchanges(1500))
    for pattern, _ in wording.SYNONYMS:
        assert re.search(pattern, said), pattern


def test_answers_are_long_and_several_sentences():
    lengths = [len(exchange.answer.split()) for _, exchange in _exchanges(500)]
    assert min(lengths) >= 5 and max(lengths) <= 110
    assert sum(lengths) / len(lengths) >= 30
    sentences = [len(re.findall(r"[.?!](?: |$)", exchange.answer)) for _, exchange in _exchanges(500)]
    assert sum(sentences) / len(sentences) >= 3.5


def _unclosed(answer: str) -> str:
    """An answer without its closing remark."""
    for closing in filter(None, wording.CLOSINGS):
        answer = answer.removesuffix(" " + closing)
    return answer


def _named(text: str) -> set[tuple[str, str]]:
    pattern = "|".join(world.COLOURS)
    return set(re.findall(rf"\b({pattern}) ({'|'.join(world.SHAPES)})\b", text))


def test_shape_descriptions_name_every_shape_and_true_relations():
    rng = random.Random(1)
    seen = 0
    for _ in range(300):
        scene = world.random_shapes(rng)
        exchange = world.image_question(scene, rng)
        if not exchange.question.startswith(("Describe", "What do you see", "What is in")):
            continue
        seen += 1
        place = {(s.colour, s.kind): s.position for s in scene.shapes}
        assert _named(exchange.answer) == set(place)
        for shape in scene.shapes:
            assert re.search(rf"\b{shape.colour} {shape.kind}\b[^.]*\b{shape.position}\b|"
                             rf"\b{shape.position}\b[^.]*\b{shape.colour} {shape.kind}\b", exchange.answer)
        relations = (r"[Tt]he (\w+ \w+) (?:is|sits) (?:to the )?(left|right|above|below|over|under)(?: of)? "
                     r"the (\w+ \w+)\.")
        stated = re.findall(relations, exchange.answer)
        assert len(stated) == len(answers._relations(scene))
        for a, relation, b in stated:
            pa, pb = place[tuple(a.split())], place[tuple(b.split())]
            shared, side = {"left": (0, "left"), "right": (0, "right"),  # same row: top/bottom
                            "above": (1, "top"), "over": (1, "top"), "below": (1, "bottom"),
                            "under": (1, "bottom")}[relation]
            assert pa.split()[shared] == pb.split()[shared] and side in pa.split() and side not in pb.split()
        assert exchange.answer.count(scene.background) == 1
    assert seen > 100


def test_chart_answers_read_the_chart_and_add_right():
    rng = random.Random(0)
    for _ in range(300):
        scene = world.random_chart(rng)
        exchange = world.image_question(scene, rng)
        top = max(range(len(scene.values)), key=scene.values.__getitem__)
        if "highest?" in exchange.question:
            assert re.search(rf"\bbar {world.LABELS[top]}\b.*\b{scene.values[top]}\b", exchange.answer, re.I)
            assert exchange.number == scene.values[top]
        if exchange.question.startswith("Describe"):
            for label, value, colour in zip(world.LABELS, scene.values, scene.colours, strict=False):
                assert re.search(rf"(Bar {label}\b[^.]*\b{colour}\b[^.]*\b{value}\b|{colour} bar {label} goes up to "
                                 rf"{value}\b)", exchange.answer, re.I)
        if "total" in exchange.question or exchange.question.startswith("Add up"):
            assert _unclosed(exchange.answer).endswith(f" {sum(scene.values)}.")
            assert exchange.number == sum(scene.values)


@pytest.mark.parametrize(("a", "b"), [(23, 48), (5, 4), (59, 39), (40, 2), (99, 0)])
def test_addition_goes_column_by_column(a, b):
    text = answers.addition(a, b)(random.Random(0))
    assert _unclosed(text).endswith(f"{a + b}.")
    assert re.search(rf"\b{a % 10} plus {b % 10}(?: is| makes| gives|, which is) {a % 10 + b % 10}\b", text)
    assert ("carry 1" in text) == (a % 10 + b % 10 >= 10)


def test_knowledge_answers_state_every_fact_of_their_subject():
    rng = random.Random(3)
    for _ in range(200):
        exchange = world.text_question(rng)
        for country in world.COUNTRIES:
            if re.search(rf"\b{country.name}\?|\b{country.name}\.$", exchange.question):
                for fact in (country.capital, country.continent, country.language, f"{country.millions} million"):
                    assert fact in exchange.answer
        for animal in world.ANIMALS:
            if re.search(rf"\b(a|an|the) {animal.name}\b", exchange.question):
                for fact in (animal.sound, animal.food, animal.covering, animal.kind):
                    assert re.search(rf"\b{fact}\b", exchange.answer)


def test_follow_ups_rework_the_first_answer():
    rng = random.Random(2)
    first = world.text_question(random.Random(5))
    seen = set()
    for _ in range(300):
        follow = world.follow_up(None, first, rng)
        if follow.question in ("Say that again in other words.", "Can you put that differently?",
                               "Are you sure?", "Is that right?"):
            seen.add("again")
            assert facts.check(follow.answer, first.answer) == facts.check(first.answer, first.answer)
            assert follow.answer != first.answer
        elif follow.answer.startswith(("In short", "To sum up")):
            seen.add("summary")
            assert facts.facts(follow.answer) == facts.facts(first.gist)
        elif "that number" in follow.question:
            seen.add("add")
            b = int(re.search(r"\d+", follow.question).group())
            assert _unclosed(follow.answer).endswith(f" {first.number + b}.")
    assert seen == {"again", "summary", "add"}


def test_unknown_scenario_is_refused():
    with pytest.raises(ValueError, match="unknown scenario"):
        world.scenario_dialogue("poetry", 0, 0)
