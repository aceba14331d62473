"""Dependencies point one way: api/ -> models/ <- bot/, and the command line wires them together.

- ``models`` is the domain: it imports no transport (FastAPI, Starlette, Slack) and neither
  ``api`` nor ``bot``;
- ``bot`` never imports ``api``: the two doors meet only in the domain;
- inside ``api``, only the command line (``api/cli``) imports ``bot``, to run the bot beside the
  API in one process;
- the product and the benchmarks never import the test tree;
- ``models/`` holds feature packages: the only modules at its top are the shared ones.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TRANSPORTS = {"fastapi", "starlette", "slack_bolt", "slack_sdk"}
MODELS_TOP_LEVEL = {"__init__.py", "tables.py"}


def imported_packages(path: Path) -> set[str]:
    """The top-level packages a module imports, wherever in the module it imports them."""
    imported: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module.split(".")[0])
    return imported


def modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def relative(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("path", modules("models"), ids=relative)
def test_the_domain_imports_no_transport(path: Path) -> None:
    assert not imported_packages(path) & (TRANSPORTS | {"api", "bot", "tests", "bench"})


@pytest.mark.parametrize("path", modules("bot"), ids=relative)
def test_the_bot_never_imports_the_api(path: Path) -> None:
    assert not imported_packages(path) & {"api", "tests", "bench"}


@pytest.mark.parametrize("path", modules("api"), ids=relative)
def test_only_the_command_line_wires_the_bot_into_the_api(path: Path) -> None:
    imported = imported_packages(path)
    assert not imported & {"tests", "bench"}
    if path.parent != ROOT / "api" / "cli":
        assert "bot" not in imported


@pytest.mark.parametrize("path", modules("bench"), ids=relative)
def test_the_benchmarks_do_not_depend_on_the_test_tree(path: Path) -> None:
    assert "tests" not in imported_packages(path)


def test_the_domain_is_made_of_feature_packages() -> None:
    loose = {path.name for path in (ROOT / "models").glob("*.py")} - MODELS_TOP_LEVEL
    assert not loose, f"put these in a feature package of models/: {sorted(loose)}"
    packages = [path for path in (ROOT / "models").iterdir() if path.is_dir()]
    assert all(
        (package / "__init__.py").exists()
        for package in packages
        if package.name not in {"migrations", "__pycache__"}
    )
