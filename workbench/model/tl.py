"""TransformerLens' `HookPoint` and `HookedRootModule`, imported without TransformerLens' package `__init__`.

`import transformer_lens` (4.3) runs the package's `__init__`, which imports the model bridge, `transformers` and
`datasets`: 2.7 of the 4.5 CPU-s `import workbench.train` took (benchmarks/bench_import.py), paid by every command,
sweep worker, analysis process and notebook kernel that builds a model, which needs two classes of two small
modules. So those modules (and the four they import from TransformerLens' subpackages) are imported with a bare
stand-in for each package above them (its `__path__` and the names its modules define), and the stand-ins are taken
out of `sys.modules` at once: a later `import transformer_lens` runs its own `__init__`, which finds these modules
imported and uses them, so there is one `HookPoint` class, not two, and each package it imports gets these modules
as its attributes once its `__init__` has run, as a usual import gives them (`_GivesModules`; tests/test_model.py).
Where TransformerLens was imported already, or its modules are not where 4.3 has them, it is imported as usual: the
same classes, at the usual cost.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types

# TransformerLens 4.3's modules PEClassifier needs, each after the ones it imports from a TransformerLens package
_MODULES = ("conversion_utils.conversion_steps.base_tensor_conversion", "hook_points", "utilities.tensors",
            "utilities.slice", "utilities.devices", "HookedRootModule")


class _GivesModules(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when a package stood in for is imported for real, its loader is wrapped so that, after
    its `__init__`, each module imported under its stand-in is its attribute where the `__init__` set no other
    (`transformer_lens.HookedRootModule` stays the class), as a usual import makes them. Leaves `sys.meta_path` once
    every such package was imported."""

    def __init__(self, modules: dict[str, set[str]]):
        self.modules = modules  # package -> the names of its modules imported under its stand-in

    def find_spec(self, name, path=None, target=None):
        if name not in self.modules:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        children, exec_module = self.modules.pop(name), spec.loader.exec_module
        if not self.modules and self in sys.meta_path:
            sys.meta_path.remove(self)

        def exec_and_give(module):
            exec_module(module)
            for child in children:
                if not hasattr(module, child):
                    setattr(module, child, sys.modules[f"{name}.{child}"])
        spec.loader.exec_module = exec_and_give
        return spec


def _import_without_package_inits(package: str, modules: tuple[str, ...]) -> dict[str, set[str]]:
    """Import `package.m` for each m in `modules` with a stand-in for `package` and each package between, then drop
    the stand-ins (and, where anything failed, every module imported under them); returns each package -> the names
    of its modules imported under its stand-in (what `_GivesModules` sets)."""
    root = importlib.util.find_spec(package).submodule_search_locations[0]
    stand_ins, children, before = {}, {}, set(sys.modules)
    try:
        for name in modules:
            parts = name.split(".")
            for i in range(len(parts)):
                pkg = ".".join([package, *parts[:i]])
                children.setdefault(pkg, set()).add(parts[i])
                if pkg not in stand_ins:
                    stand_ins[pkg] = sys.modules[pkg] = types.ModuleType(pkg)
                    stand_ins[pkg].__path__ = [os.path.join(root, *parts[:i])]
            mod = importlib.import_module(f"{package}.{name}")
            if len(parts) > 1:  # what the subpackage's `from .module import ...` gives its importers
                stand_ins[".".join([package, *parts[:-1]])].__dict__.update(
                    {k: v for k, v in vars(mod).items() if not k.startswith("_")})
        return children
    except Exception:
        for name in set(sys.modules) - before:
            del sys.modules[name]
        raise
    finally:
        for name in stand_ins:
            sys.modules.pop(name, None)


if "transformer_lens" not in sys.modules:
    try:
        sys.meta_path.insert(0, _GivesModules(_import_without_package_inits("transformer_lens", _MODULES)))
    except Exception:  # another layout than 4.3's: the usual import below
        pass
try:
    HookPoint = sys.modules["transformer_lens.hook_points"].HookPoint
    HookedRootModule = sys.modules["transformer_lens.HookedRootModule"].HookedRootModule
except KeyError:
    from transformer_lens import HookedRootModule
    from transformer_lens.hook_points import HookPoint

__all__ = ["HookPoint", "HookedRootModule"]
