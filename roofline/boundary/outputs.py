"""Writing output files safely: the one place every command writes a file through.

Rules (SECURITY.md):

* ``check_output`` runs *before* any work: it refuses an empty path, a folder, a symbolic link,
  a device, FIFO or socket, an existing file without ``force`` (``--force`` on the command
  line) and a folder that cannot be written, so nothing is computed for a file that cannot
  be written and nothing but a regular file is ever replaced.
* ``-``, ``/dev/stdout``, ``/dev/stderr`` and ``/dev/null`` are written *through* (opened and
  written, never replaced): naming them is the explicit choice of a stream.
* A regular file is written to a temporary file in the same folder, flushed to disk and
  renamed over the target, so a reader never sees half a file. The temporary file is removed
  on every failure path. A replaced file keeps its permission bits; a new one gets 0666 & ~umask.

Errors are :class:`~roofline.errors.RooflineError` naming the path and the fix (exit code 2).
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from roofline.boundary.inputs import expand_user
from roofline.errors import RooflineError

#: Targets written through rather than replaced (see the module doc).
STREAM_TARGETS = ("-", "/dev/stdout", "/dev/stderr", "/dev/null")


class OutputError(RooflineError):
    """An output path that cannot or must not be written (exit code 2)."""


@dataclass(frozen=True)
class OutputTarget:
    """A checked output path: ``stream`` when it is written through (see STREAM_TARGETS)."""

    path: Path
    stream: bool
    force: bool
    what: str

    def __str__(self) -> str:
        return "stdout" if str(self.path) == "-" else str(self.path)


def check_output(
    path: str | Path, *, force: bool = False, what: str = "output file", option: str = "-o"
) -> OutputTarget:
    """Validate ``path`` as a destination before any work is done (rules in the module doc)."""
    text = str(path)
    if not text.strip():
        raise OutputError(f"{option}: the output path is empty; give a file name such as out.{_ext(what)}")
    if text in STREAM_TARGETS:
        return OutputTarget(Path(text), True, force, what)
    p = expand_user(text)
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise OutputError(f"{option} {p}: cannot use this path ({exc.strerror}); choose another {what}") from None
    except ValueError:  # embedded NUL byte
        raise OutputError(f"{option}: {text!r} is not a valid path; choose another {what}") from None
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise OutputError(
                f"{option} {p} is a symbolic link; roofline replaces only regular files. "
                f"Write to the file it points at ({os.path.realpath(p)}) or choose another path"
            )
        if stat.S_ISDIR(st.st_mode):
            raise OutputError(f"{option} {p} is a folder; give a file name inside it, e.g. {p / ('out.' + _ext(what))}")
        if not stat.S_ISREG(st.st_mode):
            raise OutputError(
                f"{option} {p} is not a regular file (a device, FIFO or socket) and is never replaced; "
                f"choose a file path, or - for stdout"
            )
        if not force:
            raise OutputError(f"{p} exists; pass --force to overwrite it or choose another {option} path")
    folder = _existing_ancestor(p.parent)
    if not folder.is_dir():
        raise OutputError(f"{option} {p}: {folder} is not a folder; choose another path")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"{option} {p}: the folder {folder} is not writable; choose another path")
    return OutputTarget(p, False, force, what)


def write_output(target: OutputTarget | str | Path, data: str | bytes, *, force: bool = False) -> Path:
    """Write ``data`` (text as UTF-8) to a target from :func:`check_output` (checked again here)."""
    if not isinstance(target, OutputTarget):
        target = check_output(target, force=force)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if target.stream:
        _write_stream(target, raw)
        return target.path
    target = check_output(target.path, force=target.force, what=target.what)  # the path may have changed since
    path = target.path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create the folder {path.parent}: {exc.strerror}; choose another path") from None
    mode = _mode_for(path)
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise OutputError(
            f"cannot write {path}: {exc.strerror or exc}; check the folder is writable and has space"
        ) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return path


def _write_stream(target: OutputTarget, raw: bytes) -> None:
    if str(target.path) == "-":
        sys.stdout.flush()
        if hasattr(sys.stdout, "buffer"):
            sys.stdout.buffer.write(raw)
        else:  # a text-only stream (some test runners)
            sys.stdout.write(raw.decode("utf-8"))
        sys.stdout.flush()
        return
    try:
        with open(target.path, "ab") as fh:  # append mode: never truncates or replaces the stream
            fh.write(raw)
    except OSError as exc:
        raise OutputError(f"cannot write to {target.path}: {exc.strerror}") from None


def _mode_for(path: Path) -> int:
    """Permission bits of the file being replaced, else 0666 & ~umask (what open() would give)."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _existing_ancestor(folder: Path) -> Path:
    p = folder if str(folder) else Path(".")
    while not os.path.lexists(p) and p != p.parent:
        p = p.parent
    return p


def _ext(what: str) -> str:
    for word, ext in (("HTML", "html"), ("profile", "yaml"), ("YAML", "yaml"), ("CSV", "csv"), ("JSON", "json")):
        if word.lower() in what.lower():
            return ext
    return "txt"
