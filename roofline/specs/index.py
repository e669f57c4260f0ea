"""A spec file's ``name`` and ``aliases`` read by a line scan, without parsing the YAML.

The spec library (:mod:`roofline.specs.library`) indexes every file by these keys and parses
only the file a name resolves to. The scan answers only when the file has the plain shape
every bundled spec has; anything else (``None``) sends the file to the full parser:

* a column-0 line is blank, a comment, a simple key (``key:`` then a space or the line's end)
  or a ``- item`` of the key before it; ``---``, directives, quoted or complex keys, merge
  keys (``<<``), tabs and any other column-0 text give ``None``;
* ``name:`` appears once, as a plain or simply quoted token that YAML reads as a string
  (starting with a letter, not ``yes``/``no``/``on``/``off``/``true``/``false``/``null``);
* ``aliases:`` appears at most once: empty, a one-line flow list ``[a, b]`` of such tokens,
  or a block list of ``- token`` lines at one indentation;
* no indented text follows ``name:`` or a flow ``aliases:`` (a plain scalar can continue
  there), and a value that opens a quote or a flow collection on a column-0 line closes it
  on that line.

What the scan can get wrong is only to claim names the YAML does not hold (a column-0 line
inside a multi-line quoted scalar started on an indented line): it never misses a top-level
``name``/``aliases`` line, because YAML's top-level keys of a block mapping are column-0
lines. The library therefore checks the names of every file it loads against the scan and
falls back to parsing every file when they differ, so a lookup answers exactly as a full
parse would.
"""

from __future__ import annotations

import re

_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*):(?: +(.*))?\Z")
_ITEM = re.compile(r"( *)- +(.*)\Z")
_PLAIN = re.compile(r"[A-Za-z][A-Za-z0-9._/+-]*\Z")
_QUOTED = re.compile(r"\"([A-Za-z0-9._/+-]+)\"\Z|'([A-Za-z0-9._/+-]+)'\Z")
_COMMENT = re.compile(r"(?:\A| +)#.*\Z")  # YAML separates a comment by a space (tabs are refused)
#: plain words YAML 1.1's safe loader reads as booleans or null, not strings
_NOT_STRINGS = frozenset({"yes", "no", "true", "false", "on", "off", "null"})
_OPENERS = ("'", '"', "[", "{")
_ONE_LINE_QUOTED = re.compile(r"\"(?:[^\"\\]|\\.)*\"\Z|'(?:[^']|'')*'\Z")


def _token(text: str) -> str | None:
    """The string a plain or simply quoted scalar ``text`` holds, or None when unsure."""
    if _PLAIN.match(text):
        return None if text.lower() in _NOT_STRINGS else text
    m = _QUOTED.match(text)
    return (m.group(1) or m.group(2)) if m else None


def _value(raw: str | None) -> str:
    """A key's value with a trailing comment removed ('' for none)."""
    return _COMMENT.sub("", raw or "").strip(" ")


def _closed_on_line(value: str) -> bool:
    """False when ``value`` opens a quote or flow collection that might continue on a later line."""
    if not value.startswith(_OPENERS):
        return True
    if value[0] in "'\"":
        return _ONE_LINE_QUOTED.match(value) is not None
    depth = 0
    for ch in value:
        if ch in "'\"":
            return False  # quotes inside a flow collection: let the parser decide
        depth += ch in "[{"
        depth -= ch in "]}"
    return depth == 0


def scan_names(text: str) -> tuple[str, ...] | None:
    """``(name, *aliases)`` as the YAML would give them, or None when the line scan cannot be sure."""
    text = text.replace("\r\n", "\n")
    if any(c in text for c in "\r\t\x85\u2028\u2029\ufeff"):
        return None
    name: str | None = None
    aliases: list[str] | None = None
    key = ""  # the column-0 key whose value the following lines belong to
    state = ""  # "name" / "flow": only blank or comment lines may follow; "block": '- alias' items
    item_indent: int | None = None
    for line in text.split("\n"):
        stripped = line.strip(" ")  # YAML's white space here is the space alone (tabs are refused above)
        if not stripped or stripped.startswith("#"):
            continue
        if line[0] == " ":  # indented: part of the current key's value
            if state in ("name", "flow"):
                return None  # a plain scalar continues, or the parser would refuse the file
            if state == "block":
                m = _ITEM.match(line)
                if not m or (item_indent is not None and len(m.group(1)) != item_indent):
                    return None
                item_indent = len(m.group(1))
                alias = _token(_value(m.group(2)))
                if alias is None or aliases is None:
                    return None
                aliases.append(alias)
            continue
        if line.startswith("- "):  # a block sequence at the key's own indentation
            if state == "block" and item_indent in (None, 0):
                item_indent = 0
                alias = _token(_value(line[2:]))
                if alias is None or aliases is None:
                    return None
                aliases.append(alias)
                continue
            if state or not key:
                return None
            continue
        m = _KEY.match(line)
        if not m:
            return None
        key, value = m.group(1), _value(m.group(2))
        if not _closed_on_line(value):
            return None
        state, item_indent = "", None
        if key == "name":
            if name is not None:
                return None
            name = _token(value)
            if name is None or not name.strip():
                return None
            state = "name"
        elif key == "aliases":
            if aliases is not None:
                return None
            aliases = []
            if not value:
                state = "block"
            elif value.startswith("[") and value.endswith("]"):
                inner = value[1:-1].strip(" ")
                for part in inner.split(",") if inner else []:
                    alias = _token(part.strip(" "))
                    if alias is None:
                        return None
                    aliases.append(alias)
                state = "flow"
            else:
                return None
    if name is None:
        return None
    return (name, *(aliases or []))
