"""The page says what a bundled example was built to show only when a run asks that example's questions of its
pictures: matched by the pictures' content, whatever their files are called, turn by turn."""

import json

from PIL import Image

from tabed.page.examples import LATER_TURN, OWN_QUESTION, Examples


def _folder(tmp_path):
    for name, colour in (("red.png", (200, 0, 0)), ("blue.png", (0, 0, 200))):
        Image.new("RGB", (8, 8), colour).save(tmp_path / name)
    rows = [{"images": ["red.png"], "prompt": "What colour?", "follow_up": "Again?", "scenario": "image",
             "lesson": "a red picture", "follow_up_lesson": "a second turn"},
            {"images": ["red.png", "blue.png"], "prompt": "What colour?", "follow_up": "Again?", "scenario": "image",
             "lesson": "two pictures", "follow_up_lesson": ""},
            {"images": [], "prompt": "What is 2 plus 2?", "follow_up": "And 3?", "scenario": "text",
             "lesson": "no picture", "follow_up_lesson": "no picture, again"}]
    (tmp_path / "examples.json").write_text(json.dumps(rows))
    return Examples(tmp_path)


def test_an_examples_lesson_follows_its_pictures_by_content_and_its_prompts_turn_by_turn(tmp_path):
    examples = _folder(tmp_path)
    upload = tmp_path / "uploaded" / "photo.png"
    upload.parent.mkdir()
    upload.write_bytes((tmp_path / "red.png").read_bytes())
    def built(lesson: str) -> str:
        return f"This example was built to show {lesson}."

    assert examples.lesson([str(upload)], ["What colour?"]) == built("a red picture")  # another name, same picture
    assert examples.lesson([str(upload)], ["What colour?", "Again?"]) == built("a second turn")
    assert examples.lesson([str(upload), str(tmp_path / "blue.png")], ["What colour?"]) == built("two pictures")
    assert examples.lesson([], ["What is 2 plus 2?", "And 3?"]) == built("no picture, again")
    # another picture, another question, a follow-up asked first, a picture gone: a question of one's own
    assert examples.lesson([str(tmp_path / "blue.png")], ["What colour?"]) == OWN_QUESTION
    assert examples.lesson([str(upload)], ["What colour is it?"]) == OWN_QUESTION
    assert examples.lesson([str(upload)], ["Again?"]) == OWN_QUESTION
    assert examples.lesson([str(tmp_path / "gone.png")], ["What colour?"]) == OWN_QUESTION
    assert examples.lesson([], ["What colour?"]) == OWN_QUESTION  # no picture: still what the pair knows
    # any later turn about pictures is one, said as such: this example's own second turn says nothing more
    assert examples.lesson([str(upload), str(tmp_path / "blue.png")], ["What colour?", "Again?"]) == LATER_TURN
    assert examples.lesson([str(upload)], ["What colour is it?", "And now?"]) == LATER_TURN
    assert examples.lesson([], ["What is 3 plus 3?", "And 4?"]) is None  # no picture: no such turn


def test_the_examples_table_and_follow_ups_come_from_the_folder(tmp_path):
    examples = _folder(tmp_path)
    assert examples.starts()[0] == [[str(tmp_path / "red.png")], "What colour?"]
    assert examples.starts()[2] == [None, "What is 2 plus 2?"]
    assert examples.follow_ups() == [["Again?"], ["And 3?"]]
    assert Examples(tmp_path / "nowhere").starts() == []
