"""The domain stays free of transports: api/ -> models/ <- bot/."""

import ast
from pathlib import Path

import pytest

MODELS = Path(__file__).resolve().parents[2] / "models"
FORBIDDEN = ("fastapi", "starlette", "slack_bolt", "slack_sdk", "api", "bot")


@pytest.mark.parametrize("path", sorted(MODELS.rglob("*.py")), ids=lambda p: p.name)
def test_models_import_no_transport(path):
    tree = ast.parse(path.read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module.split(".")[0])

    assert not imported & set(FORBIDDEN)
