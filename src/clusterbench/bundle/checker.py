"""Reading a bundle back, refusing what cannot be trusted, one line each: not UTF-8 or not JSON, not a
bundle, a newer bundle schema than this clusterbench reads, a document that does not follow
``schema.json`` (checked by :func:`validate`, a checker of the JSON Schema keywords that file uses:
``type``, ``const``, ``enum``, ``required``, ``properties``, ``additionalProperties``, ``items``,
``minItems``, ``minimum``, ``minLength``, ``pattern``; ``jsonschema`` is not a dependency), a run id
twice, and a checksum that does not match the content (a bundle changed after export)."""
from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources
from typing import Any

from clusterbench.bundle.document import BUNDLE_SCHEMA, KIND, checksum
from clusterbench.errors import UsageError

#: the largest bundle read (a tag of thousands of runs with their probes)
MAX_BYTES = 512 * 1024 * 1024
AGAIN = "export it again with 'clusterbench results export RUN --format bundle'"
_TYPES = {"object": dict, "array": list, "string": str, "null": type(None)}


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    """The bundle's JSON Schema (``schema.json`` beside this module)."""
    return json.loads(resources.files("clusterbench.bundle").joinpath("schema.json").read_text())


def _is(value: Any, t: str) -> bool:
    if t == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if t == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if t == "boolean":
        return isinstance(value, bool)
    return isinstance(value, _TYPES[t])


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 40 else text[:37] + "..."


def validate(value: Any, sch: dict[str, Any], path: str = "$") -> str | None:
    """The first place ``value`` breaks ``sch`` ("$.runs[0].run.id: ..."), or None."""
    types = sch.get("type")
    if types is not None:
        types = [types] if isinstance(types, str) else types
        if not any(_is(value, t) for t in types):
            return f"{path}: expected {' or '.join(types)}, found {_short(value)}"
    if "const" in sch and value != sch["const"]:
        return f"{path}: expected {_short(sch['const'])}, found {_short(value)}"
    if "enum" in sch and value not in sch["enum"]:
        return f"{path}: expected one of {', '.join(map(_short, sch['enum']))}, found {_short(value)}"
    if isinstance(value, str):
        if len(value) < sch.get("minLength", 0):
            return f"{path}: empty"
        if "pattern" in sch and not re.search(sch["pattern"], value):
            return f"{path}: {_short(value)} is not of the form {sch['pattern']}"
    if _is(value, "number") and "minimum" in sch and value < sch["minimum"]:
        return f"{path}: {value} is below {sch['minimum']}"
    if isinstance(value, dict):
        for key in sch.get("required", []):
            if key not in value:
                return f"{path}: '{key}' is missing"
        props = sch.get("properties", {})
        for key, v in value.items():
            if key in props:
                err = validate(v, props[key], f"{path}.{key}")
                if err:
                    return err
            elif sch.get("additionalProperties") is False:
                return f"{path}: unknown key {_short(key)}"
    if isinstance(value, list):
        if len(value) < sch.get("minItems", 0):
            return f"{path}: fewer than {sch['minItems']} items"
        if "items" in sch:
            for i, v in enumerate(value):
                err = validate(v, sch["items"], f"{path}[{i}]")
                if err:
                    return err
    return None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def loads(text: str, where: str = "the bundle") -> dict[str, Any]:
    """A checked bundle document from its text; a one-line :class:`UsageError` for anything refused."""
    try:
        doc = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{where} is not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})",
                         AGAIN) from None
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"{where} is not valid JSON ({str(exc).splitlines()[0][:80]})", AGAIN) from None
    if not isinstance(doc, dict) or doc.get("format") != KIND:
        raise UsageError(f"{where} is not a clusterbench bundle (no \"format\": \"{KIND}\")",
                         "give a file written by 'clusterbench results export RUN --format bundle'")
    version = doc.get("bundle_schema")
    if not _is(version, "integer"):
        raise UsageError(f"{where} has no bundle schema version", AGAIN)
    if version > BUNDLE_SCHEMA:
        raise UsageError(f"{where} has bundle schema {version}, newer than this clusterbench reads ({BUNDLE_SCHEMA})",
                         "upgrade clusterbench to the version that wrote it, or newer, to import it")
    err = validate(doc, schema())
    if err:
        raise UsageError(f"{where} does not follow bundle schema {BUNDLE_SCHEMA} ({err})", AGAIN)
    ids = [e["run"]["id"] for e in doc["runs"]]
    if len(set(ids)) != len(ids):
        raise UsageError(f"{where} holds a run twice", AGAIN)
    try:
        found = checksum(doc)
    except ValueError as exc:  # a NaN sneaked in through a nested value
        raise UsageError(f"{where} holds a value JSON cannot ({exc})", AGAIN) from None
    if found != doc["checksum"]:
        raise UsageError(f"{where}: its checksum does not match its content (changed after it was exported)",
                         "import the bundle as it was exported, or export it again from the original store")
    return doc


def read_file(path: str) -> dict[str, Any]:
    """:func:`loads` of the file at ``path``: a regular file of at most :data:`MAX_BYTES`, UTF-8 text
    (read through :func:`clusterbench.files.read_text`: a device, FIFO or directory is refused unread)."""
    from clusterbench import files

    fix = "give the path of a file 'results export RUN --format bundle' wrote"
    return loads(files.read_text(path, "result bundle", MAX_BYTES, fix), str(path))
