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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar

from pydantic import BaseModel

from roofline.boundary.inputs import expand_user, parse_yaml, read_text
from roofline.errors import RooflineError, SpecError, UnknownNameError, suggest
from roofline.specs.hardware import HardwareSpec
from roofline.specs.model import ModelSpec
from roofline.specs.validation import validate_spec

if TYPE_CHECKING:
    from roofline.specs.jsontypes import JsonObject

Kind = Literal["hardware", "model"]
S = TypeVar("S", bound=BaseModel)
_DIRS = {"hardware": "hardware_specs", "model": "model_specs"}
_USER_SUBDIRS = {"hardware": "hardware", "model": "models"}


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
        base = expand_user(entry)
        sub = base / _USER_SUBDIRS[kind]
        dirs.append(sub if sub.is_dir() else base)
    dirs.append(bundled_dir(kind))
    return dirs


def read_yaml(path: Path, error: type[RooflineError] = SpecError, what: str = "spec file") -> object:
    """Read one YAML document with the limits of :mod:`roofline.boundary.inputs`; errors name the file and line.

    What the safe loader builds: mappings, lists and scalars (dates too), so callers check its type."""
    return parse_yaml(read_text(path, what, error=error), str(path), error)


def load_spec_file(cls: type[S], path: Path) -> S:
    """Load and validate one YAML spec file."""
    return validate_spec(cls, read_yaml(path), str(path))


@dataclass(frozen=True)
class _Index:
    """name or alias -> file (first directory wins), and the files that could not be indexed -> why."""

    names: dict[str, Path]
    broken: dict[Path, str]

    def broken_note(self) -> str:
        """' (skipped unreadable spec files: a.yaml: why)' or ''."""
        if not self.broken:
            return ""
        items = "; ".join(f"{p}: {why}" for p, why in sorted(self.broken.items()))
        return f" Unreadable spec files were skipped (fix or remove them): {items}"


def _file_names(path: Path) -> list[str]:
    """The name and aliases a spec file declares; SpecError (naming the file) when it cannot say."""
    data = read_yaml(path)
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not data["name"].strip():
        raise SpecError(f"{path} has no 'name' field; every spec needs a lowercase slug name")
    aliases = data.get("aliases") or []
    if not isinstance(aliases, list | tuple) or not all(isinstance(a, str) for a in aliases):
        raise SpecError(f"{path}: field 'aliases' must be a list of names such as [h100], got {aliases!r}")
    return [data["name"], *aliases]


@functools.lru_cache(maxsize=512)
def _file_names_cached(path: Path, mtime_ns: int, size: int) -> tuple[tuple[str, ...], str | None]:
    try:
        return tuple(_file_names(path)), None
    except RooflineError as exc:
        return (), str(exc)


@functools.lru_cache(maxsize=8)
def _index(kind: Kind, search_key: str) -> _Index:
    """Index every spec file; one that cannot be read is recorded in ``broken`` and breaks only lookups of it.

    ``search_key`` keys the cache on ROOFLINE_SPECS_PATH. Each file is read within the limits of
    :mod:`roofline.boundary.inputs` (size, aliases, depth), so no file can make indexing slow.
    """
    names: dict[str, Path] = {}
    broken: dict[Path, str] = {}
    for d in reversed(_search_dirs(kind)):
        for path in sorted(d.glob("*.yaml")) + sorted(d.glob("*.yml")):
            try:
                st = path.stat()
            except OSError as exc:
                broken[path] = f"cannot read it: {exc.strerror}"
                continue
            found, why = _file_names_cached(path, st.st_mtime_ns, st.st_size)
            if why is not None:
                broken[path] = why
                names.setdefault(path.stem.lower(), path)  # a lookup of its stem reports its error
                continue
            for key in found:
                names[str(key).strip().lower()] = path
    return _Index(names, broken)


def _lookup(kind: Kind, name: str) -> Path:
    idx = _index(kind, os.environ.get("ROOFLINE_SPECS_PATH", ""))
    key = name.strip().lower()
    if key in idx.names:
        path = idx.names[key]
        if path in idx.broken:
            raise SpecError(idx.broken[path])
        return path
    names = sorted({p.stem for p in idx.names.values()} | set(idx.names))
    raise UnknownNameError(
        f"unknown {kind} '{name}'{suggest(key, names)} "
        f"Run `roofline {kind} list` for all names, or pass a path to a YAML spec.{idx.broken_note()}"
    )


def _exists(path: Path) -> bool:
    """Path.exists that also answers False for names the OS cannot take (NUL bytes, too long)."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def _is_path(name: str) -> bool:
    return name.endswith((".yaml", ".yml", ".json")) or (("/" in name or os.sep in name) and _exists(Path(name)))


@functools.lru_cache(maxsize=256)
def _load_cached(kind: Kind, path: Path, mtime: float) -> HardwareSpec | ModelSpec:
    cls: type[HardwareSpec] | type[ModelSpec] = HardwareSpec if kind == "hardware" else ModelSpec
    if kind == "model" and path.suffix == ".json":
        from roofline.specs.hf_import import model_from_hf_config

        return model_from_hf_config(path)
    return load_spec_file(cls, path)


def _resolve(kind: Kind, name_or_path: str | Path) -> HardwareSpec | ModelSpec:
    text = str(name_or_path)
    path = expand_user(text) if _is_path(text) else _lookup(kind, text)
    if not _exists(path):
        raise SpecError(f"spec file {path} does not exist; check the path or use a bundled name")
    try:
        return _load_cached(kind, path.resolve(), path.stat().st_mtime)
    except OSError as exc:
        raise SpecError(f"cannot read spec file {path}: {exc.strerror}; check the path") from None


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
    for path in set(idx.names.values()) - set(idx.broken):
        names.add(_file_names(path)[0])
    return sorted(names)


def broken_specs(kind: Kind) -> dict[Path, str]:
    """Spec files of ``kind`` that could not be indexed, with the reason (``roofline … list`` reports them)."""
    return dict(_index(kind, os.environ.get("ROOFLINE_SPECS_PATH", "")).broken)


def list_hardware() -> list[str]:
    """Slugs of every known hardware spec (bundled and user)."""
    return _list("hardware")


def list_models() -> list[str]:
    """Slugs of every known model spec (bundled and user)."""
    return _list("model")


def spec_path(kind: Kind, name: str) -> Path:
    """The file a name resolves to (for content hashes in reports)."""
    return _lookup(kind, name)


def json_schema(kind: Kind) -> JsonObject:
    """JSON Schema of a spec kind, by YAML key (alias), for editor validation."""
    cls: type[HardwareSpec] | type[ModelSpec] = HardwareSpec if kind == "hardware" else ModelSpec
    return cls.model_json_schema(by_alias=True)
