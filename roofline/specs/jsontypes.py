"""Type aliases for JSON-shaped data (config.json files, spec dicts, ``--json`` output, shipped residual files).

Annotations only: nothing here is checked at run time. Containers are read-only (``Sequence``, ``Mapping``)
so that a ``list[dict[str, int]]`` or a tuple is a JSON value too (``json.dumps`` writes tuples as arrays).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias

#: A JSON value: what ``json.loads`` returns (lists, dicts) or anything ``json.dumps`` writes as such.
JsonValue: TypeAlias = str | int | float | bool | Sequence["JsonValue"] | Mapping[str, "JsonValue"] | None
#: A JSON object: string keys, JSON values.
JsonObject: TypeAlias = dict[str, JsonValue]
