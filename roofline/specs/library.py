"""The spec library: bundled YAML specs, user spec directories, strict loading.

Names are stable lowercase slugs with exact-match aliases; nothing is matched fuzzily
(suggestions appear only in error messages). User directories listed in the
``ROOFLINE_SPECS_PATH`` environment variable (``os.pathsep``-separated; each may hold
``hardware/`` and ``models/`` subfolders or YAML files directly) take precedence over
the bundled specs.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel

from roofline.errors import SpecError, UnknownNameError, suggest
from roofline.specs.hardware import HardwareSpec
from roofline.specs.model import ModelSpec
from roofline.specs.validation import validate_spec

Kind = Literal["hardware", "model"]
S = TypeVar("S", bound=BaseModel)
_DIRS = {"hardware": "hardware_specs", "model": "model_specs"}
_USER_SUBDIRS = {"hardware": "hardware", "model": "models"}
_FAST_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def bundled_dir(kind: Kind) -> Path:
    """Folder of the bundled specs: inside the installed wheel, else the source tree."""
    package = Path(__file__).resolve().parents[1]
    for cand in (package / "_bundled" / _DIRS[kind], package.parent / _DIRS[kind]):
        if cand.is_dir():
            return cand
    raise SpecError(f"the bundled {_DIRS[kind]}/ folder is missing from this installation; reinstall roofline")


def _search_dirs(kind: Kind) -> list[Path]:
    dirs: list[Path] = []
    for entry in filter(None, os.environ.get("ROOFLINE_SPECS_PATH", "").split(os.pathsep)):
        base = Path(entry).expanduser()
        sub = base / _USER_SUBDIRS[kind]
        dirs.append(sub if sub.is_dir() else base)
    dirs.append(bundled_dir(kind))
    return dirs


def read_yaml(path: Path) -> Any:
    """Read one YAML document with safe loading; errors name the file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"cannot read spec file {path}: {exc.strerror}; check the path") from None
    try:
        return yaml.load(text, Loader=_FAST_LOADER)  # libyaml when present: ~8x faster start-up
    except yaml.YAMLError:
        pass  # re-parse with the pure-Python loader so the error message is always the same
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        loc = f" at line {where.line + 1}, column {where.column + 1}" if where is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError(
            f"{path} is not valid YAML{loc}: {problem}. Fix the syntax (indentation, quotes, colons)."
        ) from None


def load_spec_file(cls: type[S], path: Path) -> S:
    """Load and validate one YAML spec file."""
    return validate_spec(cls, read_yaml(path), str(path))


@functools.lru_cache(maxsize=8)
def _index(kind: Kind, search_key: str) -> dict[str, Path]:
    """name or alias -> file, first directory wins. ``search_key`` keys the cache on the env var."""
    index: dict[str, Path] = {}
    for d in reversed(_search_dirs(kind)):
        for path in sorted(d.glob("*.yaml")) + sorted(d.glob("*.yml")):
            data = read_yaml(path)
            if not isinstance(data, dict) or "name" not in data:
                raise SpecError(f"{path} has no 'name' field; every spec needs a lowercase slug name")
            for key in [data["name"], *(data.get("aliases") or [])]:
                index[str(key).lower()] = path
    return index


def _lookup(kind: Kind, name: str) -> Path:
    idx = _index(kind, os.environ.get("ROOFLINE_SPECS_PATH", ""))
    key = name.strip().lower()
    if key in idx:
        return idx[key]
    names = sorted({p.stem for p in idx.values()} | set(idx))
    raise UnknownNameError(
        f"unknown {kind} '{name}'{suggest(key, names)} "
        f"Run `roofline {kind} list` for all names, or pass a path to a YAML spec."
    )


def _is_path(name: str) -> bool:
    return name.endswith((".yaml", ".yml", ".json")) or (("/" in name or os.sep in name) and Path(name).exists())


@functools.lru_cache(maxsize=256)
def _load_cached(kind: Kind, path: Path, mtime: float) -> HardwareSpec | ModelSpec:
    cls: type[HardwareSpec] | type[ModelSpec] = HardwareSpec if kind == "hardware" else ModelSpec
    if kind == "model" and path.suffix == ".json":
        from roofline.specs.hf_import import model_from_hf_config

        return model_from_hf_config(path)
    return load_spec_file(cls, path)


def _resolve(kind: Kind, name_or_path: str | Path) -> HardwareSpec | ModelSpec:
    text = str(name_or_path)
    path = Path(text).expanduser() if _is_path(text) else _lookup(kind, text)
    if not path.exists():
        raise SpecError(f"spec file {path} does not exist; check the path or use a bundled name")
    return _load_cached(kind, path.resolve(), path.stat().st_mtime)


def hardware(name_or_path: str | Path | HardwareSpec) -> HardwareSpec:
    """A hardware spec by slug, alias or YAML path (a spec passes through unchanged)."""
    if isinstance(name_or_path, HardwareSpec):
        return name_or_path
    spec = _resolve("hardware", name_or_path)
    assert isinstance(spec, HardwareSpec)
    return spec


def model(name_or_path: str | Path | ModelSpec) -> ModelSpec:
    """A model spec by slug, alias, YAML path or config.json path (a spec passes through)."""
    if isinstance(name_or_path, ModelSpec):
        return name_or_path
    spec = _resolve("model", name_or_path)
    assert isinstance(spec, ModelSpec)
    return spec


def _list(kind: Kind) -> list[str]:
    idx = _index(kind, os.environ.get("ROOFLINE_SPECS_PATH", ""))
    names = set()
    for path in set(idx.values()):
        data = read_yaml(path)
        names.add(str(data["name"]))
    return sorted(names)


def list_hardware() -> list[str]:
    """Slugs of every known hardware spec (bundled and user)."""
    return _list("hardware")


def list_models() -> list[str]:
    """Slugs of every known model spec (bundled and user)."""
    return _list("model")


def spec_path(kind: Kind, name: str) -> Path:
    """The file a name resolves to (for content hashes in reports)."""
    return _lookup(kind, name)


def json_schema(kind: Kind) -> dict[str, Any]:
    """JSON Schema of a spec kind, by YAML key (alias), for editor validation."""
    cls: type[HardwareSpec] | type[ModelSpec] = HardwareSpec if kind == "hardware" else ModelSpec
    return cls.model_json_schema(by_alias=True)
