"""The house rules the code keeps: layers whose imports only go down, no import cycle, small functions."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ["tabed.errors", "tabed.models", "tabed.engine", "tabed.bench", "tabed.teaching", "tabed.page",
          "tabed.cli", "tabed.__main__", "tabed"]  # bottom to top; a module may import its own layer and those below


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted((ROOT / "tabed").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(name: str, path: Path) -> set[str]:
    """The tabed modules `name` imports (type-checking imports included: they are dependencies too)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    known, found = modules(), set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("tabed")}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join([*base, node.module] if node.module else base)
            if not target.startswith("tabed"):
                continue
            for alias in node.names:  # `from . import world` names a module
                found.add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in known else target)
    return found


def layer(name: str) -> int:
    for index, top in enumerate(LAYERS):
        if name == top or top != "tabed" and name.startswith(top + "."):
            return index
    raise AssertionError(f"{name} belongs to no layer")


def test_imports_only_go_down_a_layer():
    upward = [(name, target) for name, path in modules().items() for target in imports(name, path)
              if layer(target) > layer(name)]
    assert upward == []


def test_no_import_cycle():
    graph = {name: {t for t in imports(name, path) if t in modules() and t != name} for name, path in modules().items()}
    cycles, state = [], {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = "open"
        for target in graph[node]:
            if state.get(target) == "open":
                cycles.append(stack[stack.index(target):] + [target])
            elif target not in state:
                visit(target, [*stack, target])
        state[node] = "done"

    for name in graph:
        if name not in state:
            visit(name, [name])
    assert cycles == []


def test_functions_are_short_and_take_few_parameters():
    """No function over 80 lines, none with more than 8 parameters (the API's handlers included)."""
    long, wide = [], []
    for path in [*(ROOT / "tabed").rglob("*.py"), ROOT / "app.py"]:
        where = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            args = node.args
            names = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs] if a.arg not in ("self", "cls")]
            if node.end_lineno - node.lineno + 1 > 80:
                long.append((where, node.name))
            if len(names) > 8:
                wide.append((where, node.name, len(names)))
    assert long == [] and wide == []


def test_the_app_stays_thin():
    """app.py lays out and wires the page; and nothing at the page's edge reads a handler's arguments by
    introspection (the request's inputs are `tabed.page.request.Request`)."""
    source = (ROOT / "app.py").read_text()
    assert len(source.splitlines()) < 400
    assert "locals()" not in source and "inspect.signature" not in source


def test_the_docs_stay_short():
    """What a change adds to a README it takes out as much: history stays in git."""
    assert len((ROOT / "README.md").read_text().splitlines()) <= 300
    assert len((ROOT / "assets" / "bench" / "README.md").read_text().splitlines()) <= 400


def test_no_step_of_a_block_asks_whether_it_is_the_first():
    """What sets the first block apart (`drafts.AfterPrompt`) is a behaviour the steps call, not a flag
    they test: no engine module compares a first block with None or carries an `after_prompt` flag."""
    for path in sorted((ROOT / "tabed" / "engine").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare) and isinstance(node.left, ast.Name | ast.Attribute):
                name = node.left.id if isinstance(node.left, ast.Name) else node.left.attr
                assert "first" not in name or not any(isinstance(c, ast.Constant) and c.value is None
                                                      for c in node.comparators), f"{path.name}:{node.lineno}"
            assert not isinstance(node, ast.arg | ast.keyword) or node.arg != "after_prompt", path.name


def test_every_test_is_where_pytest_collects_it():
    """A test function or method indented into another function (an edit that split a class once left a browser
    test inside a helper) is never collected, and its promise goes untested without a word."""
    hidden = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        for outer in ast.walk(ast.parse(path.read_text())):
            if isinstance(outer, (ast.FunctionDef, ast.AsyncFunctionDef)):
                hidden += [(path.name, outer.name, node.name) for node in ast.walk(outer)
                           if node is not outer and isinstance(node, ast.FunctionDef) and node.name.startswith("test")]
    assert hidden == []
