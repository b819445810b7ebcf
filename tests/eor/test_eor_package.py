import ast
from pathlib import Path

import eor


def test_eor_imports_neither_rerag_nor_erag():
    for path in Path(eor.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(n.split(".")[0] in ("rerag", "erag") for n in names), f"{path} imports {names}"


def test_public_api_resolves():
    assert all(hasattr(eor, name) for name in eor.__all__)
    assert callable(eor.rwr_matrix) and callable(eor.mrwr) and callable(eor.mrlr) and callable(eor.error_decomposition)
