"""The fast path of manifest parsing: libyaml's events straight to plain Python objects.

The position-aware parse (``_yaml.parse_yaml``) keeps a line and column for every field
and runs PyYAML's pure-Python scanner; on a 25,000-family catalog that is most of the
load time and, for one 50,000-family file, most of its memory. A manifest that loads
cleanly needs no positions, so it is read here first: libyaml (``yaml.CSafeLoader``)
parses it, and each event is turned into its value at once, with no node tree and no
positions.

This path only accepts what it can show the position-aware parse accepts and builds the
same way: plain mappings (string keys, each once), sequences and untagged scalars, at
most ``MAX_DEPTH`` levels and ``MAX_VALUES`` values, one document. Anything else (a tag,
an anchor or alias, a merge key, a duplicate or non-string key, a character PyYAML's
reader refuses, a libyaml error) returns ``UNSURE``, and the caller re-parses with
positions, which reports the problem exactly as it always has.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Final

import yaml
from yaml.events import (
    AliasEvent,
    DocumentEndEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
    StreamStartEvent,
)

from ._yaml import MAX_DEPTH, MAX_VALUES


class _Unsure:
    def __repr__(self) -> str:
        return "UNSURE"


UNSURE: Final = _Unsure()  # "re-parse with positions": not a value any document holds

_STR = "tag:yaml.org,2002:str"
# Tags of plain scalars whose value the safe constructor builds the same way here.
_PLAIN_TAGS = frozenset(
    f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "timestamp")
)
_NON_PRINTABLE = yaml.reader.Reader.NON_PRINTABLE
_NOT_FOUND = object()


class _Scalars:
    """Plain scalars resolved and constructed as PyYAML's safe loader does, once per text."""

    def __init__(self) -> None:
        self._loader = yaml.SafeLoader("")
        self.cache: dict[str, Any] = {}  # text of a plain scalar -> its value (or UNSURE)

    def plain(self, value: str) -> Any:
        """The value of a plain (unquoted) scalar, or UNSURE; remembered in ``cache``."""
        out = self.cache[value] = self._construct(value)
        return out

    def _construct(self, value: str) -> Any:
        tag = self._loader.resolve(yaml.ScalarNode, value, (True, False))  # type: ignore[no-untyped-call]
        if tag not in _PLAIN_TAGS:
            return UNSURE
        if tag == _STR:
            return value
        node = yaml.ScalarNode(tag, value)
        try:
            out = self._loader.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, OverflowError):
            return UNSURE
        finally:
            self._loader.constructed_objects.clear()
        if isinstance(out, dt.date):  # kept as the text, as the position-aware parse does
            return value
        return out


def load_plain(text: str) -> Any:
    """The one document of ``text`` as plain objects, or UNSURE (see the module docstring)."""
    if _NON_PRINTABLE.search(text):
        return UNSURE
    parser = yaml.CSafeLoader(text)
    try:
        return _build(parser)
    except yaml.YAMLError:
        return UNSURE
    finally:
        parser.dispose()


def _build(parser: yaml.CSafeLoader) -> Any:
    """Fold the event stream into values; a stack holds the open collections.

    Each open mapping is a ``[dict, pending key]`` pair; an open sequence is a list.
    """
    scalars = _Scalars()
    cache = scalars.cache
    get_event = parser.get_event
    stack: list[Any] = []  # open collections: list (sequence) or [dict, key] (mapping)
    keys: list[bool] = []  # per open collection: True for a mapping
    count = 0
    root: Any = UNSURE
    documents = 0
    while True:
        event: Any = get_event()
        kind = type(event)
        if kind is ScalarEvent:
            if event.tag is not None or event.anchor is not None:
                return UNSURE
            value = event.value
            if event.implicit[0]:  # plain: resolved (null, a number, ...) once per text
                value = cache.get(value, _NOT_FOUND)
                if value is _NOT_FOUND:
                    value = scalars.plain(event.value)
                if value is UNSURE:
                    return UNSURE
        elif kind is MappingStartEvent or kind is SequenceStartEvent:
            if event.tag is not None or event.anchor is not None or len(stack) > MAX_DEPTH - 1:
                return UNSURE
            count += 1
            if count > MAX_VALUES:
                return UNSURE
            is_map = kind is MappingStartEvent
            if stack and keys[-1] and stack[-1][1] is _NOT_FOUND:
                return UNSURE  # a collection as a mapping key
            stack.append([{}, _NOT_FOUND] if is_map else [])
            keys.append(is_map)
            continue
        elif kind is MappingEndEvent:
            value = stack.pop()[0]
            keys.pop()
        elif kind is SequenceEndEvent:
            value = stack.pop()
            keys.pop()
        elif kind is DocumentStartEvent:
            documents += 1
            if documents > 1:
                return UNSURE  # more than one document
            continue
        elif kind is StreamStartEvent or kind is DocumentEndEvent:
            continue
        elif kind is StreamEndEvent:
            return root
        else:  # an alias
            assert kind is AliasEvent
            return UNSURE
        # A finished value (a scalar or a closed collection) goes to its parent.
        if not stack:
            if kind is ScalarEvent:
                count += 1
            root = value
        elif keys[-1]:
            frame = stack[-1]
            key = frame[1]
            if key is _NOT_FOUND:  # this value is a key
                if type(value) is not str or value == "<<" or value in frame[0]:
                    return UNSURE  # not a string, a merge, or a duplicate
                frame[1] = value
                continue
            frame[0][key] = value
            frame[1] = _NOT_FOUND
            if kind is ScalarEvent:
                count += 1
        else:
            stack[-1].append(value)
            if kind is ScalarEvent:
                count += 1
        if count > MAX_VALUES:
            return UNSURE
