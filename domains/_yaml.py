"""YAML to plain Python objects, keeping where every value was written.

PyYAML's ``safe_load`` forgets positions and silently keeps the last of two duplicate keys.
So we compose the node tree with the safe loader (no tags that run code) and build the
objects ourselves, recording ``field path -> (line, column)`` and reporting duplicate keys.

This is the slow, exact path: a manifest is first read by ``_plain_yaml.load_plain``
(libyaml, no positions), and parsed here only when a problem must be placed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from ._errors import Problem
from ._files import line_col
from ._schema import show

FieldPath = tuple[str | int, ...]
Positions = dict[FieldPath, tuple[int, int]]

_MERGE_TAG = "tag:yaml.org,2002:merge"
_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
MAX_VALUES = 1_000_000  # values in a document, aliases expanded ("billion laughs")
MAX_DEPTH = 64  # nesting of mappings and lists; PyYAML's composer recurses per level


def format_path(path: FieldPath) -> str:
    """``("domains", 0, "quota", "min_share")`` -> ``domains[0].quota.min_share``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def position_of(positions: Mapping[FieldPath, tuple[int, int]], path: FieldPath) -> tuple[int, int]:
    """Where ``path`` was written, or where its closest recorded ancestor was."""
    for n in range(len(path), -1, -1):
        pos = positions.get(path[:n])
        if pos is not None:
            return pos
    return (0, 0)


@dataclass
class ParsedYaml:
    """A parsed document: its data, where each field path starts, and what went wrong."""

    data: Any
    positions: Positions = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)


def _pos(mark: yaml.Mark) -> tuple[int, int]:
    return (mark.line + 1, mark.column + 1)


class _Builder:
    def __init__(self, file: str) -> None:
        self.file = file
        self.result = ParsedYaml(data=None)
        self._scalars = yaml.SafeLoader("")
        self._active: set[int] = set()
        self._count = 0

    def problem(self, mark: yaml.Mark, path: FieldPath, message: str) -> None:
        line, col = _pos(mark)
        self.result.problems.append(Problem(self.file, line, col, format_path(path), message))

    def build(self, node: yaml.Node, path: FieldPath) -> Any:
        self._count += 1
        if self._count > MAX_VALUES:
            raise _TooLarge
        if len(path) > MAX_DEPTH and not isinstance(node, yaml.ScalarNode):
            self.problem(node.start_mark, path, f"nested more than {MAX_DEPTH} levels deep")
            return None
        if id(node) in self._active:
            self.problem(node.start_mark, path, "recursive alias; a value cannot contain itself")
            return None
        self._active.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                return self._mapping(node, path)
            if isinstance(node, yaml.SequenceNode):
                if node.tag != _SEQ_TAG:
                    self.problem(node.start_mark, path, f"unsupported YAML tag {node.tag}")
                return [self._item(child, (*path, i)) for i, child in enumerate(node.value)]
            return self._scalar(node, path)
        finally:
            self._active.discard(id(node))

    def _item(self, node: yaml.Node, path: FieldPath) -> Any:
        self.result.positions.setdefault(path, _pos(node.start_mark))
        return self.build(node, path)

    def _scalar(self, node: yaml.Node, path: FieldPath) -> Any:
        try:
            value = self._scalars.construct_object(node, deep=True)
        except yaml.constructor.ConstructorError as exc:
            self.problem(node.start_mark, path, f"unsupported YAML value: {exc.problem}")
            return None
        except ValueError as exc:  # e.g. an integer of more than 4300 digits
            self.problem(node.start_mark, path, f"unsupported YAML value: {exc}")
            return None
        if isinstance(value, dt.date | bytes):  # keep data JSON-like: the text as written
            return str(node.value)
        return value

    def _key(self, node: yaml.Node, path: FieldPath) -> str | None:
        """A mapping key; keys must be strings (YAML 1.1 reads a bare `on:` as true)."""
        if not isinstance(node, yaml.ScalarNode):
            self.problem(node.start_mark, path, "mapping keys must be strings, got a collection")
            return None
        key = self._scalar(node, path)
        if isinstance(key, str):
            return key
        # (plain style is None from PyYAML's composer and "" from libyaml's)
        shown = show(key) + (f" (quote it: '{node.value}')" if not node.style else "")
        self.problem(node.start_mark, path, f"mapping keys must be strings, got {shown}")
        return None

    def _mapping(self, node: yaml.MappingNode, path: FieldPath) -> dict[str, Any]:
        if node.tag != _MAP_TAG:
            self.problem(node.start_mark, path, f"unsupported YAML tag {node.tag}")
        out: dict[str, Any] = {}
        first_seen: dict[str, int] = {}
        merges: list[yaml.Node] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                merges.append(value_node)
                continue
            key = self._key(key_node, path)
            if key is None:
                continue
            child = (*path, key)
            if key in first_seen:
                self.problem(
                    key_node.start_mark,
                    child,
                    f"duplicate key {key!r} (first at line {first_seen[key]}); "
                    "YAML would silently keep only the last one",
                )
                continue
            first_seen[key] = key_node.start_mark.line + 1
            self.result.positions[child] = _pos(key_node.start_mark)
            out[key] = self.build(value_node, child)
        for merge in merges:  # `<<: *base` fills in keys the mapping does not set itself
            sources = merge.value if isinstance(merge, yaml.SequenceNode) else [merge]
            for source in sources:
                if not isinstance(source, yaml.MappingNode):
                    self.problem(source.start_mark, path, "`<<` must merge a mapping")
                    continue
                for key_node, value_node in source.value:
                    key = self._key(key_node, path)
                    if key is None or key in out:
                        continue
                    child = (*path, key)
                    self.result.positions[child] = _pos(key_node.start_mark)
                    out[key] = self.build(value_node, child)
        return out


class _TooLarge(Exception):
    pass


def _too_deep(text: str) -> Any:
    """Where the nesting first passes MAX_DEPTH, from the event stream (no recursion)."""
    depth = 0
    try:
        for ev in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(ev, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    return ev.start_mark
            elif isinstance(ev, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError:
        return None
    return None


def parse_yaml(text: str, file: str, *, libyaml: bool = False) -> ParsedYaml:
    """Parse one YAML document with safe semantics, keeping positions and every problem.

    ``libyaml`` composes the nodes with libyaml (same nodes and marks, several times
    faster). Only for a text ``load_plain`` read cleanly: libyaml's composer recurses in C
    with no depth guard, and its error messages are not PyYAML's.
    """
    builder = _Builder(file)
    try:
        root = yaml.compose(text, Loader=yaml.CSafeLoader if libyaml else yaml.SafeLoader)
    except RecursionError:
        mark = _too_deep(text)
        line, col = _pos(mark) if mark is not None else (0, 0)
        msg = f"YAML nested more than {MAX_DEPTH} levels deep"
        builder.result.problems.append(Problem(file, line, col, "", msg))
        return builder.result
    except yaml.reader.ReaderError as exc:  # a NUL byte or another forbidden character
        line, col = line_col(text, exc.position)
        char = exc.character
        code = ord(char) if isinstance(char, str) else char if isinstance(char, int) else 0
        msg = f"YAML error: unacceptable character #x{code:04x}"
        builder.result.problems.append(Problem(file, line, col, "", msg))
        return builder.result
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = _pos(mark) if mark is not None else (0, 0)
        what = " ".join(str(s) for s in (exc.context, exc.problem) if s)
        builder.result.problems.append(Problem(file, line, col, "", f"YAML syntax error: {what}"))
        return builder.result
    except yaml.YAMLError as exc:
        builder.result.problems.append(Problem(file, 0, 0, "", f"YAML error: {exc}"))
        return builder.result
    if root is None:
        builder.result.problems.append(
            Problem(file, 0, 0, "", "empty manifest; expected a mapping with a `domains:` list")
        )
        return builder.result
    builder.result.positions[()] = _pos(root.start_mark)
    try:
        builder.result.data = builder.build(root, ())
    except _TooLarge:
        line, col = _pos(root.start_mark)
        builder.result.problems.append(
            Problem(file, line, col, "", f"document expands to more than {MAX_VALUES} values")
        )
        builder.result.data = None
    return builder.result


class LazyPositions(Mapping[FieldPath, tuple[int, int]]):
    """The positions of a text that loaded cleanly, parsed only when first looked up.

    A manifest without problems never needs them; one that has a problem, or a note, pays
    for one position-aware parse (by libyaml) of its file.
    """

    def __init__(self, text: str, file: str) -> None:
        self._text: str | None = text
        self._file = file
        self._positions: Positions | None = None

    def _load(self) -> Positions:
        if self._positions is None:
            assert self._text is not None
            self._positions = parse_yaml(self._text, self._file, libyaml=True).positions
            self._text = None
        return self._positions

    def __getitem__(self, path: FieldPath) -> tuple[int, int]:
        return self._load()[path]

    def __iter__(self) -> Iterator[FieldPath]:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())
