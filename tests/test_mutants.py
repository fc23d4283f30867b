"""The mutation check's list stays true to today's source: every mutant applies once and names tests that
exist (running the mutants themselves takes minutes: `python tests/mutants.py`)."""

import ast

import pytest

from mutants import HUNG, MUTANTS, ROOT, Mutant, passes_clean, pytest_run, unchecked_report


def names_in(path) -> set[str]:
    """A test file's functions, and its classes' methods as pytest names them ("Class::method"): at the top
    level only, as pytest collects them (a test indented into another function by mistake is never run)."""
    tree = ast.parse(path.read_text())
    functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    return functions | {f"{cls.name}::{node.name}" for cls in tree.body if isinstance(cls, ast.ClassDef)
                        for node in cls.body if isinstance(node, ast.FunctionDef)}


TESTS = {path: names_in(path) for path in (ROOT / "tests").rglob("test_*.py")}


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_every_mutant_applies_once_and_names_real_tests(mutant):
    source = (ROOT / mutant.path).read_text()
    assert source.count(mutant.before) == 1 and mutant.before != mutant.after
    for test in mutant.tests:
        path, _, name = test.partition("::")
        assert ROOT / path in TESTS, test
        assert not name or name.split("[")[0] in TESTS[ROOT / path], test  # a parametrized id: its test


def test_the_mutants_are_twenty_and_named_once():
    assert len(MUTANTS) >= 20 and len({m.name for m in MUTANTS}) == len(MUTANTS)


def test_tests_that_hang_under_a_mutant_are_stopped_and_said_to(tmp_path):
    """A mutant may make its tests loop for ever (a race whose clock stands still): the check stops them at
    their limit and counts the mutant caught, rather than waiting with them."""
    (tmp_path / "test_forever.py").write_text("import time\n\n\ndef test_forever():\n    time.sleep(60)\n")
    status, _, said = pytest_run(tmp_path, ("test_forever.py",), limit_s=3)
    assert status == HUNG and said == "still running after 3 s"


def test_a_mutant_whose_tests_fail_on_clean_code_is_unchecked_and_shows_why(tmp_path):
    """A test that fails before any fault would count every fault caught: the mutant is left unchecked, and
    the report ends with the failure itself, since a busy machine and a flaky test read the same otherwise."""
    (tmp_path / "test_broken.py").write_text("def test_broken():\n    assert 1 + 1 == 3, 'broken before any fault'\n")
    mutant = Mutant("broken", "test_broken.py", "1 + 1", "1 + 2", ("test_broken.py",))
    with pytest.raises(RuntimeError) as raised:
        passes_clean(tmp_path, mutant)
    report = unchecked_report(mutant, raised.value)
    assert report.startswith("UNCHECKED broken: broken: its tests do not pass on clean code (pytest exited 1")
    assert "broken before any fault" in report and "1 failed" in report
