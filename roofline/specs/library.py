"""The spec library: bundled YAML specs, user spec directories, strict loading.

Names are stable lowercase slugs with exact-match aliases; nothing is matched fuzzily
(suggestions appear only in error messages). User directories listed in the
``ROOFLINE_SPECS_PATH`` environment variable (``os.pathsep``-separated; each may hold
``hardware/`` and ``models/`` subfolders or YAML files directly) take precedence over
the bundled specs.

A name resolves by parsing only the file it names (issue #28): every file's ``name`` and
``aliases`` are read by a line scan (:mod:`roofline.specs.index`; a file it is unsure of is
parsed), the chosen file is parsed and its names checked against the scan, and anything else
(an unknown name, a broken file, a file the scan misread, a change on disk) is answered from
the index a full parse of every file gives, so lookups, errors and suggestions are exactly
those of a full parse. ``list_hardware()``/``list_models()`` parse every file.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar

from pydantic import BaseModel

from roofline.boundary.inputs import expand_user, parse_yaml, read_text
from roofline.errors import RooflineError, SpecError, UnknownNameError, suggest
from roofline.specs.hardware import HardwareSpec
from roofline.specs.index import scan_names
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
    """name or alias -> file (first directory wins), and the files that could not be indexed -> why.

    ``files`` holds what each indexed file was taken to declare and its (mtime_ns, size) then;
    ``dirs`` the folders listed, with their mtime_ns (a changed folder or file rebuilds the index).
    """

    names: dict[str, Path]
    broken: dict[Path, str]
    files: dict[Path, tuple[tuple[str, ...], tuple[int, int]]] = field(default_factory=dict)
    dirs: tuple[tuple[Path, int | None], ...] = ()

    def broken_note(self) -> str:
        """' (skipped unreadable spec files: a.yaml: why)' or ''."""
        if not self.broken:
            return ""
        items = "; ".join(f"{p}: {why}" for p, why in sorted(self.broken.items()))
        return f" Unreadable spec files were skipped (fix or remove them): {items}"

    def fresh(self) -> bool:
        """Whether every folder listed still has the mtime it had when the index was built."""
        return all(_mtime_ns(d) == t for d, t in self.dirs)


def _names_of(data: object, path: Path) -> list[str]:
    """The name and aliases a parsed spec declares; SpecError (naming the file) when it cannot say."""
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not data["name"].strip():
        raise SpecError(f"{path} has no 'name' field; every spec needs a lowercase slug name")
    aliases = data.get("aliases") or []
    if not isinstance(aliases, list | tuple) or not all(isinstance(a, str) for a in aliases):
        raise SpecError(f"{path}: field 'aliases' must be a list of names such as [h100], got {aliases!r}")
    return [data["name"], *aliases]


@functools.lru_cache(maxsize=512)
def _file_names_cached(path: Path, mtime_ns: int, size: int) -> tuple[tuple[str, ...], str | None]:
    """The names by a full parse (cached while the file keeps its mtime and size), or () and why not."""
    try:
        return tuple(_names_of(_parsed(path, mtime_ns, size), path)), None
    except RooflineError as exc:
        return (), str(exc)


@functools.lru_cache(maxsize=512)
def _scanned_names(path: Path, mtime_ns: int, size: int) -> tuple[str, ...] | None:
    """The names by a line scan (:mod:`roofline.specs.index`), or None when only a parse can tell."""
    try:
        return scan_names(read_text(path))
    except RooflineError:
        return None  # unreadable: the parse reports why


@functools.lru_cache(maxsize=8)
def _parsed(path: Path, mtime_ns: int, size: int) -> object:
    """The YAML document of ``path`` (cached while it keeps its mtime and size; callers never mutate it).

    Small: it only lets a lookup's check of a file and the load that follows share one parse."""
    return read_yaml(path)


def _mtime_ns(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except (OSError, ValueError):
        return None


def _build_index(kind: Kind, lazy: bool) -> _Index:
    """Index every spec file; one that cannot be read is recorded in ``broken`` and breaks only lookups of it.

    With ``lazy`` a file's names come from the line scan where it is sure (the file is parsed
    when it is loaded), else from a full parse, as every file's without ``lazy``. Each file is
    read within the limits of :mod:`roofline.boundary.inputs` (size, aliases, depth), so no file
    can make indexing slow.
    """
    names: dict[str, Path] = {}
    broken: dict[Path, str] = {}
    files: dict[Path, tuple[tuple[str, ...], tuple[int, int]]] = {}
    dirs = _search_dirs(kind)
    watched = [expand_user(e) for e in filter(None, os.environ.get("ROOFLINE_SPECS_PATH", "").split(os.pathsep))]
    for d in reversed(dirs):
        for path in sorted(d.glob("*.yaml")) + sorted(d.glob("*.yml")):
            try:
                st = path.stat()
            except OSError as exc:
                broken[path] = f"cannot read it: {exc.strerror}"
                continue
            stamp = (st.st_mtime_ns, st.st_size)
            found = _scanned_names(path, *stamp) if lazy else None
            if found is None:
                found, why = _file_names_cached(path, *stamp)
                if why is not None:
                    broken[path] = why
                    names.setdefault(path.stem.lower(), path)  # a lookup of its stem reports its error
                    continue
            files[path] = (found, stamp)
            for key in found:
                names[str(key).strip().lower()] = path
    stamps = tuple((d, _mtime_ns(d)) for d in dict.fromkeys([*watched, *dirs]))
    return _Index(names, broken, files, stamps)


def _eager_index(kind: Kind) -> _Index:
    """Every file's names by a full parse (each file's parse cached by mtime and size)."""
    return _build_index(kind, lazy=False)


_LAZY: dict[tuple[Kind, str], _Index] = {}


def _lazy_index(kind: Kind) -> _Index:
    """The scanned index for this ROOFLINE_SPECS_PATH, rebuilt when a folder listed has changed."""
    key = (kind, os.environ.get("ROOFLINE_SPECS_PATH", ""))
    idx = _LAZY.get(key)
    if idx is None or not idx.fresh():
        if len(_LAZY) >= 8:
            _LAZY.clear()
        idx = _LAZY[key] = _build_index(kind, lazy=True)
    return idx


def _lookup(kind: Kind, name: str) -> Path:
    """The file ``name`` resolves to: exactly what indexing every file by a full parse gives.

    The scanned index names a candidate; it is parsed and kept when it declares just the names
    the scan saw and has not changed since. Anything else (an unknown name, a broken file, a
    scan the parse contradicts) is answered from the full index, with its suggestions and notes.
    """
    key = name.strip().lower()
    idx = _lazy_index(kind)
    path = idx.names.get(key)
    if path is not None and path not in idx.broken:
        declared, stamp = idx.files[path]
        try:
            st = path.stat()
            now: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
        except OSError:
            now = None
        if now == stamp and _file_names_cached(path, *stamp) == (declared, None):
            return path
        _LAZY.pop((kind, os.environ.get("ROOFLINE_SPECS_PATH", "")), None)
    return _eager_lookup(kind, name)


def _eager_lookup(kind: Kind, name: str) -> Path:
    idx = _eager_index(kind)
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
def _load_cached(kind: Kind, path: Path, mtime_ns: int, size: int) -> HardwareSpec | ModelSpec:
    cls: type[HardwareSpec] | type[ModelSpec] = HardwareSpec if kind == "hardware" else ModelSpec
    if kind == "model" and path.suffix == ".json":
        from roofline.specs.hf_import import model_from_hf_config

        return model_from_hf_config(path)
    return validate_spec(cls, _parsed(path, mtime_ns, size), str(path))


def _resolve(kind: Kind, name_or_path: str | Path) -> HardwareSpec | ModelSpec:
    text = str(name_or_path)
    path = expand_user(text) if _is_path(text) else _lookup(kind, text)
    try:  # Path.exists is this stat answering without an error
        st = path.stat()
    except (OSError, ValueError):
        raise SpecError(f"spec file {path} does not exist; check the path or use a bundled name") from None
    try:
        return _load_cached(kind, _real_path(path, st), st.st_mtime_ns, st.st_size)
    except OSError as exc:
        raise SpecError(f"cannot read spec file {path}: {exc.strerror}; check the path") from None


_REAL: dict[tuple[str, int, int], Path] = {}


def _real_path(path: Path, st: os.stat_result) -> Path:
    """``path.resolve()``, kept for an absolute path while it still names the same file (device and inode of
    ``st``, its stat): a spec lookup resolves the same few paths on every call."""
    if not path.is_absolute():
        return path.resolve()
    key = (str(path), st.st_dev, st.st_ino)
    hit = _REAL.get(key)
    if hit is None:
        if len(_REAL) > 4096:
            _REAL.clear()
        hit = _REAL[key] = path.resolve()
    return hit


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
    idx = _eager_index(kind)
    return sorted({idx.files[path][0][0] for path in set(idx.names.values()) - set(idx.broken)})


def broken_specs(kind: Kind) -> dict[Path, str]:
    """Spec files of ``kind`` that could not be indexed, with the reason (``roofline … list`` reports them)."""
    return dict(_eager_index(kind).broken)


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
