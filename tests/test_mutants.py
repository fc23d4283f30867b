"""The mutation check's list stays true to today's source: every mutant applies once and names tests that
exist (running the mutants themselves takes minutes: `python tests/mutants.py`)."""

import ast

import pytest

from mutants import MUTANTS, ROOT

TESTS = {path: {node.name for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.FunctionDef)}
         for path in (ROOT / "tests").rglob("test_*.py")}


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_every_mutant_applies_once_and_names_real_tests(mutant):
    source = (ROOT / mutant.path).read_text()
    assert source.count(mutant.before) == 1 and mutant.before != mutant.after
    for test in mutant.tests:
        path, _, name = test.partition("::")
        assert ROOT / path in TESTS, test
        assert not name or name in TESTS[ROOT / path], test


def test_the_mutants_are_twenty_and_named_once():
    assert len(MUTANTS) >= 20 and len({m.name for m in MUTANTS}) == len(MUTANTS)
