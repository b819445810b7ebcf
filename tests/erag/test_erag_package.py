"""erag stands alone: no module of it imports rerag or eor."""
import ast
from pathlib import Path

import erag


def test_erag_does_not_import_rerag_or_eor():
    imported = set()
    for path in Path(erag.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                imported.add(node.module.split(".")[0])
    assert imported.isdisjoint({"rerag", "eor"}), imported
