"""Python annotations from JSON Schema: what a generated wrapper's signature says.

Objects with properties become TypedDicts (declared in the wrapper module), enums ``Literal``,
arrays ``list[...]``, maps ``dict[str, ...]``, unions ``A | B``; local ``$ref``s
(``#/$defs/X``, ``#/definitions/X``) are followed, recursive ones by name. Anything the mapping
cannot express is ``Any``: the schema itself still checks the arguments in the sandbox.
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass, field
from typing import Any

from ..sandbox.agent import resolve_ref
from . import pysource

_SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None"}
_LITERAL_TYPES = (str, int, bool, type(None))


@dataclass
class Field:
    key: str
    annotation: str
    required: bool
    description: str = ""


@dataclass
class TypedDictDef:
    name: str
    description: str
    fields: list[Field] = field(default_factory=list)

    @property
    def class_syntax(self) -> bool:
        """Keys that are identifiers can use class syntax; others need ``TypedDict("X", {...})``."""
        return all(f.key.isidentifier() and not keyword.iskeyword(f.key) for f in self.fields)


class TypeBuilder:
    """Turns the schemas of one module into annotations, collecting the TypedDicts they need."""

    def __init__(self, taken: set[str]) -> None:
        self.taken = taken
        self.defs: list[TypedDictDef] = []
        self._refs: dict[tuple[int, str], str] = {}
        self.uses_literal = False

    def annotation(self, schema: Any, hint: str, root: Any = None) -> str:
        root = schema if root is None else root
        return self._annotation(schema, hint, root, 0)

    def _annotation(self, schema: Any, hint: str, root: Any, depth: int) -> str:
        if not isinstance(schema, dict) or depth > 20:
            return "Any"
        ref = schema.get("$ref")
        if isinstance(ref, str):
            return self._ref(ref, root, depth)
        if "enum" in schema or "const" in schema:
            values = schema["enum"] if "enum" in schema else [schema["const"]]
            if (
                isinstance(values, list)
                and values
                and all(isinstance(v, _LITERAL_TYPES) for v in values)
            ):
                self.uses_literal = True
                unique = list(dict.fromkeys(pysource.flat(v) for v in values))
                return f"Literal[{', '.join(unique)}]"
        for key in ("anyOf", "oneOf"):
            options = schema.get(key)
            if isinstance(options, list) and options:
                return _union(self._annotation(o, hint, root, depth + 1) for o in options)
        parts = schema.get("allOf")
        if isinstance(parts, list) and len(parts) == 1:
            return self._annotation(parts[0], hint, root, depth + 1)
        types = schema.get("type")
        if isinstance(types, list):
            return _union(
                self._annotation({**schema, "type": t}, hint, root, depth + 1) for t in types
            )
        if types in _SCALARS:
            return _SCALARS[types]
        if types == "array":
            items = schema.get("items")
            if isinstance(items, dict):
                return f"list[{self._annotation(items, hint + 'Item', root, depth + 1)}]"
            return "list[Any]"
        if types == "object" or (types is None and "properties" in schema):
            return self._object(schema, hint, root, depth)
        return "Any"

    def _object(self, schema: dict[str, Any], hint: str, root: Any, depth: int) -> str:
        properties = schema.get("properties")
        if isinstance(properties, dict) and properties:
            name = pysource.class_name(str(schema.get("title") or hint), self.taken)
            self.taken.add(name)
            return self._typed_dict(name, schema, root, depth)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            return f"dict[str, {self._annotation(extra, hint + 'Value', root, depth + 1)}]"
        return "dict[str, Any]"

    def _typed_dict(self, name: str, schema: dict[str, Any], root: Any, depth: int) -> str:
        definition = TypedDictDef(name, str(schema.get("description") or ""))
        self.defs.append(definition)  # before its fields: a recursive reference finds it
        required = set(schema.get("required") or [])
        for key, sub in schema["properties"].items():
            definition.fields.append(
                Field(
                    key=str(key),
                    annotation=self._annotation(
                        sub, pysource.class_name(str(key), set()), root, depth + 1
                    ),
                    required=key in required,
                    description=str(sub.get("description") or "") if isinstance(sub, dict) else "",
                )
            )
        return name

    def _ref(self, ref: str, root: Any, depth: int) -> str:
        key = (id(root), ref)
        if key in self._refs:
            return self._refs[key]
        target = resolve_ref(root, ref)
        if not isinstance(target, dict):
            return "Any"
        hint = ref.rsplit("/", 1)[-1]
        properties = target.get("properties")
        if isinstance(properties, dict) and properties:
            name = pysource.class_name(str(target.get("title") or hint), self.taken)
            self.taken.add(name)
            self._refs[key] = name  # a self-reference inside resolves to the class by name
            return self._typed_dict(name, target, root, depth + 1)
        self._refs[key] = "Any"  # guards a cycle through non-object schemas
        annotation = self._annotation(target, hint, root, depth + 1)
        self._refs[key] = annotation
        return annotation


def _union(annotations: Any) -> str:
    parts: list[str] = []
    for annotation in annotations:
        if annotation == "Any":
            return "Any"
        for part in _top_level(annotation):
            if part not in parts:
                parts.append(part)
    if "None" in parts:  # Optional last, as people write it
        parts = [p for p in parts if p != "None"] + ["None"]
    return " | ".join(parts)


def _top_level(annotation: str) -> list[str]:
    """The members of a union, not splitting inside brackets."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(annotation):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth == 0 and annotation.startswith(" | ", i):
            parts.append(annotation[start:i])
            start = i + 3
    parts.append(annotation[start:])
    return parts


def with_none(annotation: str) -> str:
    """``annotation | None`` unless it already admits None."""
    if annotation == "Any" or "None" in _top_level(annotation):
        return annotation
    return f"{annotation} | None"
