"""Start-up: typer's help and error renderer without the rich modules this CLI's help never uses.

``typer.rich_utils`` (imported when help or a usage error is printed) imports at its top ``rich.markdown``, and
with it markdown-it and mdurl (about 40 ms of the ~170 ms of ``roofline --help``), which it needs only for help under
``rich_markup_mode="markdown"`` (this CLI uses ``"rich"``), and ``rich.traceback``, with rich.syntax and pygments
(about 10 ms), which it needs only for pretty exceptions (disabled here). :func:`install` adds an import hook
that, while (and only while) ``typer.rich_utils`` itself executes, stands a placeholder module in for each of
them: its one class (``Markdown``, ``Traceback``) builds, and forwards every attribute to, the real class on
first use, so a markdown help text or a pretty traceback still renders exactly as before. Any other import of
those modules, before or after, gets the real module; one already imported is not stood in for. The help text
and every command's output are unchanged (tests/test_cli_lazy_help.py).
"""

from __future__ import annotations

import sys
import types
from typing import Any

#: The module whose import is hooked.
TARGET = "typer.rich_utils"
#: The modules stood in for while it executes, and the one name it imports from each.
DEFERRED = {"rich.markdown": "Markdown", "rich.traceback": "Traceback"}


def real_module(name: str) -> types.ModuleType:
    """The real module ``name`` (imported on first call, replacing its placeholder in ``sys.modules``)."""
    import importlib

    if isinstance(sys.modules.get(name), Placeholder):
        del sys.modules[name]
    return importlib.import_module(name)


class Forwarding(type):
    """Metaclass of a stand-in class: class attributes (``Traceback.from_exception``) come from the real class."""

    def __getattr__(cls, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return getattr(cls.real(), attr)

    def real(cls) -> Any:
        """The real class the stand-in stands for."""
        mod, name = cls.__dict__["deferred"]
        return getattr(real_module(mod), name)


class StandIn(metaclass=Forwarding):
    """Base of the stand-in classes: constructing one returns an instance of the real class."""

    deferred = ("", "")

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        return type(cls).real(cls)(*args, **kwargs)


class Placeholder(types.ModuleType):
    """The stand-in module for ``name``: its stand-in class, and any other public attribute from the real module."""

    def __init__(self, name: str) -> None:
        super().__init__(name, f"Stand-in for {name} while {TARGET} imports (roofline.cli.lazy_help).")
        cls = DEFERRED[name]
        setattr(self, cls, Forwarding(cls, (StandIn,), {"deferred": (name, cls), "__module__": __name__}))

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):  # the import system probing (__path__, …)
            raise AttributeError(attr)
        return getattr(real_module(self.__name__), attr)


class StandInLoader:
    """Runs ``typer.rich_utils``'s own loader with the placeholders in ``sys.modules`` for the duration."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, …: the file loader's own
        return getattr(self.inner, name)

    def create_module(self, spec: Any) -> types.ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        stood_in = {name: Placeholder(name) for name in DEFERRED if name not in sys.modules}
        sys.modules.update(stood_in)
        try:
            self.inner.exec_module(module)
        finally:
            for name, stand_in in stood_in.items():
                if sys.modules.get(name) is stand_in:
                    del sys.modules[name]


class StandInFinder:
    """Meta-path finder for ``typer.rich_utils`` only: the usual spec, its loader wrapped in :class:`StandInLoader`."""

    def find_spec(self, fullname: str, path: Any, target: types.ModuleType | None = None) -> Any:
        if fullname != TARGET:
            return None
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = StandInLoader(spec.loader)  # type: ignore[assignment]  # a Loader by its methods
        return spec


def install() -> None:
    """Put :class:`StandInFinder` first on ``sys.meta_path`` (once; nothing when typer.rich_utils is imported)."""
    if TARGET in sys.modules or any(isinstance(f, StandInFinder) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, StandInFinder())
