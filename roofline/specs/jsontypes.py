"""Type aliases for JSON-shaped data (config.json files, YAML specs, ``--json`` output, shipped residual files).

Annotations only: nothing here is checked at run time.
"""

from __future__ import annotations

from typing import TypeAlias

#: Any value ``json.loads`` (or ``yaml.safe_load`` of a JSON-compatible document) returns.
JsonValue: TypeAlias = str | int | float | bool | list["JsonValue"] | dict[str, "JsonValue"] | None
#: A JSON object: string keys, JSON values.
JsonObject: TypeAlias = dict[str, JsonValue]
