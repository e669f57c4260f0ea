"""Reading untrusted files: bounded size, regular files only, UTF-8, strict YAML.

Every loader of user files (specs, profiles, config.json, calibration stores) reads through
:func:`read_text`; every YAML document goes through :func:`parse_yaml`. The guarantees
(SECURITY.md) are:

* only regular files are read (``/dev/zero``, FIFOs and folders are refused) and at most
  the file's limit of bytes (:mod:`roofline.boundary.limits`), so no read blocks or grows without bound;
* text must be UTF-8; an error names the file and the byte offset;
* YAML is loaded with the safe loader (no tags execute), nesting is at most
  ``MAX_YAML_DEPTH`` levels, anchors/aliases may expand to at most ``MAX_YAML_NODES`` nodes,
  and a mapping with the same key twice is an error naming both lines.

Every failure is a :class:`~roofline.errors.RooflineError` (the caller's subclass) naming the file.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from roofline.boundary.limits import MAX_SPEC_FILE_BYTES, MAX_YAML_DEPTH, MAX_YAML_NODES, human_bytes
from roofline.errors import RooflineError, SpecError


def expand_user(path: str | Path) -> Path:
    """``Path(path).expanduser()``, leaving the path as written when ``~user`` names no user."""
    try:
        return Path(path).expanduser()
    except RuntimeError:  # "Could not determine home directory" for ~nosuchuser
        return Path(path)


def read_bytes(
    path: str | Path,
    what: str = "spec file",
    max_bytes: int = MAX_SPEC_FILE_BYTES,
    error: type[RooflineError] = SpecError,
) -> bytes:
    """The bytes of the regular file ``path`` (at most ``max_bytes``); anything else is ``error``."""
    path = Path(path)
    try:
        st = os.stat(path)
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror}; check the path") from None
    except ValueError:  # an embedded NUL byte
        raise error(f"cannot read {what} {str(path)!r}: not a valid path; check it") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file (a device, FIFO or socket)"
        raise error(f"cannot read {what} {path}: it is {kind}; pass the path of a {what}")
    if st.st_size > max_bytes:
        raise error(
            f"{what} {path} is {st.st_size:,} bytes, more than the {human_bytes(max_bytes)} limit "
            f"(roofline.boundary.limits); check it is the right file"
        )
    try:
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror}; check the path and its permissions") from None
    if len(data) > max_bytes:  # grew while being read
        raise error(f"{what} {path} is larger than the {human_bytes(max_bytes)} limit (roofline.boundary.limits)")
    return data


def decode(data: bytes, path: str | Path, what: str = "spec file", error: type[RooflineError] = SpecError) -> str:
    """``data`` as UTF-8 text; an error names the file and the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise error(
            f"{what} {path} is not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start} (line {line}) "
            "cannot be decoded; save the file as UTF-8"
        ) from None


def read_text(
    path: str | Path,
    what: str = "spec file",
    max_bytes: int = MAX_SPEC_FILE_BYTES,
    error: type[RooflineError] = SpecError,
) -> str:
    """The UTF-8 text of the regular file ``path``, at most ``max_bytes`` long (see module doc)."""
    return decode(read_bytes(path, what, max_bytes, error), path, what, error)


def parse_yaml(text: str, origin: str, error: type[RooflineError] = SpecError) -> Any:
    """One YAML document with the safe loader and the limits of the module doc; ``origin`` names it."""
    import yaml

    loader_cls: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        _check_depth(yaml.parse(text, Loader=loader_cls), origin, error)
        loader = loader_cls(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _check_nodes(node, origin, error)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except RooflineError:
        raise  # our own checks (depth, size, duplicate keys): already say what is wrong
    except yaml.YAMLError:
        raise _yaml_error(text, origin, error) from None
    except RecursionError:  # pragma: no cover - the depth check comes first
        raise error(f"{origin} is nested too deeply (limit {MAX_YAML_DEPTH} levels)") from None
    except (ValueError, OverflowError) as exc:  # e.g. an integer of more than 4,300 digits
        raise error(f"{origin} holds a value that cannot be read ({exc}); check the numbers in it") from None


def _yaml_error(text: str, origin: str, error: type[RooflineError]) -> RooflineError:
    """The pure-Python parser's message (stable across libyaml versions) with line and column."""
    import yaml

    try:
        _check_depth(yaml.parse(text, Loader=yaml.SafeLoader), origin, error)
        yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        loc = f" at line {where.line + 1}, column {where.column + 1}" if where is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        return error(f"{origin} is not valid YAML{loc}: {problem}. Fix the syntax (indentation, quotes, colons).")
    return error(f"{origin} is not valid YAML; fix the syntax (indentation, quotes, colons)")


def _check_depth(events: Any, origin: str, error: type[RooflineError]) -> None:
    import yaml

    depth = 0
    for ev in events:
        if isinstance(ev, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                line = ev.start_mark.line + 1 if ev.start_mark is not None else "?"
                raise error(
                    f"{origin} nests more than {MAX_YAML_DEPTH} levels deep (line {line}); "
                    "specs need 3 to 4 levels: check the indentation"
                )
        elif isinstance(ev, yaml.CollectionEndEvent):
            depth -= 1


def _check_nodes(root: Any, origin: str, error: type[RooflineError]) -> None:
    """Expanded node count (aliases counted every time they are used) and duplicate mapping keys."""
    import yaml

    sizes: dict[int, int] = {}

    def size(node: Any) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        sizes[key] = 1  # a recursive alias counts once (the safe constructor builds a cycle)
        n = 1
        if isinstance(node, yaml.MappingNode):
            _check_keys(node, origin, error)
            for k, v in node.value:
                n += size(k) + size(v)
        elif isinstance(node, yaml.SequenceNode):
            n += sum(size(c) for c in node.value)
        n = min(n, MAX_YAML_NODES + 1)
        sizes[key] = n
        return n

    if size(root) > MAX_YAML_NODES:
        raise error(
            f"{origin} expands to more than {MAX_YAML_NODES:,} YAML nodes (anchors and aliases counted each time "
            "they are used); a spec has a few hundred: remove the repeated aliases"
        )


def _check_keys(node: Any, origin: str, error: type[RooflineError]) -> None:
    import yaml

    seen: dict[str, int] = {}
    for k, _ in node.value:
        if not isinstance(k, yaml.ScalarNode) or k.tag == "tag:yaml.org,2002:merge":
            continue
        line = k.start_mark.line + 1
        if k.value in seen:
            raise error(
                f"{origin}: key '{k.value}' appears twice in one mapping (lines {seen[k.value]} and {line}); "
                "YAML would silently keep the last value: delete one of them"
            )
        seen[k.value] = line
