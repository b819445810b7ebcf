"""The architecture, enforced (README, "Architecture"): imports run one way, and each shared idea
is defined once.

Packages, bottom to top: `kernels` (a leaf) and `erag`; `eor` on `erag`; `rerag` on all three.
Rooms inside `rerag`, bottom to top: the vocabulary (`rerag.inputs`, `rerag.prompts`, `rerag.defaults`); `data` and `models`, which
never import each other; the method (`module`, `losses`, `decoding`, `metrics`, `callbacks`, the fit
config parser, the teacher cache); `infer`; `demo` and `integrations`; `reproduce`, which drives the
functions the other subcommands call; the CLI (`cli`), which only parses and which nothing imports
but the entry point (`rerag.__main__`). Nothing imports the demo except `reproduce` and the CLI. No product module imports or
reads `benchmarks/`: experiments stand on the product, never the other way. Only the CLI imports
`argparse` or `subprocess`: one CLI style, and no harness inside the packages.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("kernels", "erag", "eor", "rerag")

# What each unit may import from the project; a unit is a package or a room of rerag.
ALLOWED = {
    "kernels": set(),
    "erag": set(),
    "eor": {"erag"},
    "rerag.inputs": set(),
    "rerag.data": {"erag", "eor", "rerag.inputs"},
    "rerag.models": {"kernels", "erag", "rerag.inputs"},
    "rerag.method": {"kernels", "erag", "rerag.inputs", "rerag.data", "rerag.models"},
    "rerag.infer": {"kernels", "erag", "rerag.inputs", "rerag.data", "rerag.models", "rerag.method"},
    "rerag.demo": {"erag", "eor", "rerag.inputs", "rerag.data", "rerag.models", "rerag.method"},
    "rerag.integrations": {"erag", "eor", "rerag.inputs", "rerag.data", "rerag.models", "rerag.method", "rerag.infer"},
    "rerag.reproduce": {
        "erag",
        "eor",
        "rerag.inputs",
        "rerag.data",
        "rerag.models",
        "rerag.method",
        "rerag.infer",
        "rerag.demo",
        "rerag.integrations",
    },
    "rerag.cli": {
        "erag",
        "rerag.inputs",
        "eor",
        "rerag.data",
        "rerag.models",
        "rerag.method",
        "rerag.infer",
        "rerag.demo",
        "rerag.integrations",
        "rerag.reproduce",
    },
    "rerag.main": {"rerag.cli"},
    "rerag.package": {"rerag.inputs", "rerag.data", "rerag.models", "rerag.method"},
}
METHOD = {
    "module",
    "stages",
    "assembly",
    "evaluation",
    "optimization",
    "settings",
    "losses",
    "decoding",
    "metrics",
    "callbacks",
    "fit_config",
    "teacher_cache",
}


def unit(module: str) -> str:
    """`rerag.data.dataset` -> `rerag.data`; `rerag.losses` -> `rerag.method`; `eor.voter` -> `eor`."""
    parts = module.split(".")
    if parts[0] != "rerag":
        return parts[0]
    if len(parts) == 1 or parts[1] == "__init__":
        return "rerag.package"
    if parts[1] in ("prompts", "defaults"):  # the prompts and the stages' defaults are vocabulary
        return "rerag.inputs"
    if parts[1] in ("data", "models", "infer", "demo", "integrations", "inputs", "cli", "reproduce"):
        return f"rerag.{parts[1]}"
    if parts[1] == "__main__":
        return "rerag.main"
    assert parts[1] in METHOD, f"{module} is in no room: add it to a room or to METHOD"
    return "rerag.method"


def project_modules():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield ".".join(path.relative_to(ROOT).with_suffix("").parts), path


def imports(path: Path, module: str) -> set[str]:
    """The project modules that `path` imports (absolute and relative)."""
    found = set()
    package = module.split(".")[:-1]  # a module's package; for `pkg.__init__` that is `pkg` itself
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                found.add(".".join(base + ([node.module] if node.module else [])))
            else:
                found.add(node.module)
    return {name for name in found if name.split(".")[0] in PACKAGES}


@pytest.mark.parametrize("module, path", list(project_modules()), ids=lambda x: str(x))
def test_imports_run_one_way(module, path):
    own = unit(module)
    for name in imports(path, module):
        other = unit(name)
        if other == own:
            continue
        assert other in ALLOWED[own], f"{module} ({own}) imports {name} ({other}): not allowed"


def test_nothing_but_the_entry_point_imports_the_cli():
    importers = [m for m, path in project_modules() if "rerag.cli" in imports(path, m) and m != "rerag.__main__"]
    assert not importers, f"{importers} import rerag.cli: call the function the subcommand calls instead"


@pytest.mark.parametrize("module, path", list(project_modules()), ids=lambda x: str(x))
def test_the_product_never_reaches_into_benchmarks(module, path):
    source = path.read_text()
    assert "benchmarks" not in {name.split(".")[0] for name in imports_any(path)}, f"{module} imports benchmarks"
    assert '"benchmarks"' not in source and "'benchmarks'" not in source, f"{module} names the benchmarks folder"
    assert "parents[2]" not in source, f"{module} climbs out of its package to find files"


#: Standard-library modules for a command line of its own or a child process: the CLI's alone.
CLI_ONLY = {"argparse", "subprocess"}


@pytest.mark.parametrize("module, path", list(project_modules()), ids=lambda x: str(x))
def test_only_the_cli_parses_arguments_or_starts_processes(module, path):
    """One CLI style: every subcommand is a function that `rerag.cli` parses from its signature; no
    other module builds an argparse parser or runs a child process (a benchmark harness belongs in
    `benchmarks/`)."""
    if module == "rerag.cli":
        return
    found = {name.split(".")[0] for name in imports_any(path)}
    assert not found & CLI_ONLY, f"{module} imports {sorted(found & CLI_ONLY)}: only rerag.cli may"


def imports_any(path: Path) -> set[str]:
    """Every module name `path` imports, the project's or not."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return found


def test_no_circle_between_units():
    edges = {u: set() for u in ALLOWED}
    for module, path in project_modules():
        for name in imports(path, module):
            if unit(name) != unit(module):
                edges[unit(module)].add(unit(name))
    seen, done = set(), set()

    def visit(u, trail):
        assert u not in seen - done, f"import circle: {' -> '.join(trail + [u])}"
        if u in done:
            return
        seen.add(u)
        for v in edges.get(u, ()):
            visit(v, trail + [u])
        done.add(u)

    for u in edges:
        visit(u, [])


@pytest.mark.parametrize(
    "name",
    [
        "normalize_answer",
        "exact_match",
        "token_f1",
        "has_answer",
        "Reader",
        "Reranker",
        "resolve",
        "load_tokenizer",
        "passage_text",
        "fill",
    ],
)
def test_each_shared_idea_is_defined_once(name):
    places = []
    for module, path in project_modules():
        for node in ast.parse(path.read_text()).body:
            defined = {node.name} if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else set()
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                defined = {t.id for t in targets if isinstance(t, ast.Name)}
            if name in defined:
                places.append(module)
    assert len(places) == 1, f"{name} is defined in {places}"


PLACEHOLDERS = ("{question}", "{query}", "{context}", "{document}")


@pytest.mark.parametrize("module, path", list(project_modules()), ids=lambda x: str(x))
def test_prompts_live_in_their_packages_prompts_module(module, path):
    """A module-level prompt (a string constant with a placeholder) is defined in `<package>.prompts`."""
    if module.endswith(".prompts") and module.count(".") == 1:
        return
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            strings = [
                n.value for n in ast.walk(node.value) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            ]
            assert not any(p in s for s in strings for p in PLACEHOLDERS), (
                f"{module}:{node.lineno} defines a prompt: move it to {module.split('.')[0]}.prompts"
            )


CONTEXT_COUNTS = {"top_k", "val_top_k", "test_top_k", "train_k", "eval_k", "n_train_contexts", "n_eval_contexts"}


@pytest.mark.parametrize("module, path", [m for m in project_modules() if m[0].startswith("rerag")], ids=str)
def test_context_counts_default_to_rerag_defaults(module, path):
    """A stage's context count defaults to its constant in `rerag.defaults`, never to a number of its own."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args.args + node.args.kwonlyargs
            defaults = [None] * (len(node.args.args) - len(node.args.defaults)) + node.args.defaults
            defaults += node.args.kw_defaults
        elif isinstance(node, ast.ClassDef):  # dataclass fields
            fields = [n for n in node.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]
            args, defaults = [f.target for f in fields], [f.value for f in fields]
        else:
            continue
        for arg, default in zip(args, defaults):
            name = arg.arg if isinstance(arg, ast.arg) else arg.id
            if name in CONTEXT_COUNTS and isinstance(default, ast.Constant) and isinstance(default.value, int):
                pytest.fail(f"{module}:{default.lineno} {name}={default.value}: use rerag.defaults")
