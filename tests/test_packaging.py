"""The engine as a package: `pip install .` gives `from tabed import …` and `python -m tabed generate` on the bundled
teaching pair from any folder, and pyproject.toml declares the packages requirements.txt pins."""

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile

import pytest
from packaging.requirements import Requirement

from mutants import ROOT

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def requirements_txt() -> dict[str, Requirement]:
    lines = (line.split("#")[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines())
    return {(r := Requirement(line)).name.lower(): r for line in lines if line}


def test_pyproject_declares_what_requirements_txt_pins():
    """Every package of pyproject.toml (the engine's, the app's and the tests' extras) is in requirements.txt, and
    the version pinned there is one pyproject.toml allows; nothing in requirements.txt is missing from it."""
    pinned = requirements_txt()
    declared = [Requirement(line) for line in PROJECT["dependencies"]]
    declared += [Requirement(line) for extra in PROJECT["optional-dependencies"].values() for line in extra]
    assert {r.name.lower() for r in declared} == set(pinned)
    for requirement in declared:
        wanted = pinned[requirement.name.lower()].specifier
        exact = next((s.version for s in wanted if s.operator == "=="), None)
        assert (requirement.specifier.contains(exact) if exact else wanted == requirement.specifier), requirement


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The wheel `pip` builds from a copy of the repository (a build writes into its source), unpacked as an
    install would: its folder, and the wheel's file names."""
    work = tmp_path_factory.mktemp("package")
    source = work / "source"
    source.mkdir()
    for name in ("tabed", "assets"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "README.md"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
                           "--no-index", "-q", "-w", str(work / "wheel")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    (wheel,) = (work / "wheel").glob("tabed-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(work / "site")
        names = set(archive.namelist())
    return work / "site", names


@pytest.mark.slow
def test_the_wheel_holds_every_module_and_the_teaching_pair(installed):
    _, names = installed
    modules = {path.relative_to(ROOT).as_posix() for path in (ROOT / "tabed").rglob("*.py")}
    assert modules <= names, sorted(modules - names)
    pair = {f"tabed/assets/models/{role}/{file}" for role in ("target", "drafter")
            for file in ("config.json", "model.safetensors", "tokenizer.json")}
    assert pair | {"tabed/assets/examples/shapes.png", "tabed/assets/bench/teaching.jsonl"} <= names
    assert not any(name.startswith(("tests/", "assets/", "app.py")) for name in names)


@pytest.mark.slow
def test_the_installed_package_imports_and_generates_from_another_folder(installed, tmp_path):
    site, _ = installed
    env = {**os.environ, "PYTHONPATH": str(site), "HF_HUB_OFFLINE": "1"}
    imported = subprocess.run([sys.executable, "-c", "import tabed; from tabed import load_preset, parse_spec, Turn; "
                               "from tabed.models.presets import ASSETS; print(tabed.__file__, ASSETS)"],
                              cwd=tmp_path, env=env, capture_output=True, text=True)
    assert imported.returncode == 0, imported.stderr
    module, assets = imported.stdout.split()
    assert module == str(site / "tabed" / "__init__.py") and assets == str(site / "tabed" / "assets")
    picture = site / "tabed" / "assets" / "examples" / "shapes.png"
    done = subprocess.run([sys.executable, "-m", "tabed", "generate", "--prompt", "Describe the image.", "--image",
                           str(picture), "--max-new-tokens", "6", "--json"], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["pair"] == "teaching" and len(report["token_ids"]) == 6 and report["text"].strip()
