"""The layers of docs/ARCHITECTURE.md: no import runs back up (every import statement, lazy ones inside functions
included, read from the source with `ast`)."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# package -> the PE-Lab packages it may import (docs/ARCHITECTURE.md, "what it may import")
MAY_IMPORT = {
    "synthetic_tasks": set(),
    "workbench.model": set(),
    "workbench.store": {"workbench.model", "synthetic_tasks"},
    "workbench.train": {"workbench.store", "workbench.model", "synthetic_tasks"},
    "workbench.analysis": {"workbench.store", "workbench.model", "synthetic_tasks"},
    "workbench.figures": {"workbench.analysis"},
    "workbench.report": {"workbench.figures", "workbench.analysis", "workbench.train", "workbench.store",
                         "workbench.model", "synthetic_tasks"},
    "apps": {"workbench.report", "workbench.figures", "workbench.analysis", "workbench.train", "workbench.store",
             "workbench.model"},
}


def layer(module: str) -> str | None:
    """The package of MAY_IMPORT a dotted module name belongs to (None: outside them, e.g. the CLI)."""
    return next((p for p in MAY_IMPORT if module == p or module.startswith(p + ".")), None)


def imported(path: Path, source: str | None = None) -> set[str]:
    """Every module a source file imports, relative imports resolved; `from a import b` counts as a.b too (b may
    be a module: `from workbench import analysis`)."""
    here = list(path.relative_to(ROOT).with_suffix("").parts)
    package = here if path.name == "__init__.py" else here[:-1]
    package = package[:-1] if package and package[-1] == "__init__" else package
    out = set()
    for node in ast.walk(ast.parse(path.read_text() if source is None else source)):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - (node.level - 1)] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            out |= {module} | {f"{module}.{a.name}" for a in node.names}
    return out


def test_no_import_runs_back_up():
    wrong = []
    for package in MAY_IMPORT:
        for path in sorted((ROOT / Path(*package.split("."))).rglob("*.py")):
            for module in imported(path):
                target = layer(module)
                if target is not None and target != package and target not in MAY_IMPORT[package]:
                    wrong.append(f"{path.relative_to(ROOT)} imports {module} ({package} may import "
                                 f"{sorted(MAY_IMPORT[package]) or 'nothing of PE-Lab'})")
    assert not wrong, "\n".join(wrong)


def test_the_check_sees_relative_and_lazy_imports(tmp_path):
    """The reader resolves `from ..store import x` in a module of workbench/analysis and finds an import inside a
    function: a layer check that missed them would pass on any code."""
    path = ROOT / "workbench" / "analysis" / "claims" / "status.py"  # imports `from .registry import ...`
    assert "workbench.analysis.claims.registry" in imported(path)
    run = ROOT / "workbench" / "store" / "run.py"  # `from workbench.model import ...` inside load_model
    assert layer("workbench.model") in {layer(m) for m in imported(run)}
    assert "workbench.model" not in MAY_IMPORT["workbench.model"] and layer("workbench.cli.train") is None
    # a layer reached through its parent package, absolutely or relatively, is still that layer
    store = ROOT / "workbench" / "store" / "run.py"
    for line in ("from workbench import analysis", "from .. import analysis", "import workbench.analysis.deposit"):
        assert layer("workbench.analysis") in {layer(m) for m in imported(store, line)}, line


def test_every_module_is_in_a_layer_or_an_entry_point():
    """A module outside MAY_IMPORT is unchecked: only the entry points (the CLI, `make demo`, the package's own
    __init__ / __main__) and the folders docs/ARCHITECTURE.md lets import everything may be."""
    entry = {"workbench/__init__.py", "workbench/__main__.py", "workbench/demo.py"}
    free = ("workbench/cli/", "benchmarks/", "tests/", "notebooks/")
    loose = [str(p.relative_to(ROOT)) for p in sorted(ROOT.glob("*/**/*.py")) if ".venv" not in p.parts
             and layer(".".join(p.relative_to(ROOT).with_suffix("").parts)) is None
             and str(p.relative_to(ROOT)) not in entry and not str(p.relative_to(ROOT)).startswith(free)]
    assert not loose, f"modules in no layer of docs/ARCHITECTURE.md: {loose}"
