"""YAML specs read safely: ``yaml.safe_load`` bounded against alias and merge-key bombs
(a "billion laughs" document is a few hundred bytes but expands to billions of nodes)
and against documents nested deeper than Python's recursion limit."""
from __future__ import annotations

import re
from typing import Any

import yaml

#: Most nodes a YAML spec may expand to once aliases and merge keys are followed.
MAX_YAML_NODES = 1_000_000


class YAMLTooLarge(yaml.YAMLError):
    """A YAML document whose aliases / merge keys expand past :data:`MAX_YAML_NODES`
    nodes, or nest too deeply, or refer to themselves."""


def _expanded_size(root: yaml.Node, limit: int) -> int:
    """Nodes of the document under ``root`` with every alias and merge key followed
    (a node reached twice counts twice), computed once per node (memoised, so linear in
    the composed graph). Raises YAMLTooLarge past ``limit`` or on a cycle."""
    sizes: dict[int, int] = {}
    active: set[int] = set()
    # iterative post-order walk: (node, children done?)
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    for _ in range(50_000_000):  # bounded: each node is pushed at most twice per parent edge
        if not stack:
            break
        node, done = stack.pop()
        key = id(node)
        if key in sizes and not done:
            continue
        if isinstance(node, yaml.ScalarNode):
            sizes[key] = 1
            continue
        kids = [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else list(node.value)
        if not done:
            if key in active:
                raise YAMLTooLarge("the document refers to itself (a recursive alias)")
            active.add(key)
            stack.append((node, True))
            for k in kids:
                if id(k) in active:
                    raise YAMLTooLarge("the document refers to itself (a recursive alias)")
                if id(k) not in sizes:
                    stack.append((k, False))
            continue
        active.discard(key)
        total = 1 + sum(sizes[id(k)] for k in kids)
        if total > limit:
            raise YAMLTooLarge(f"the document expands to more than {limit:,} nodes once its aliases and merge "
                               "keys are followed")
        sizes[key] = total
    return sizes.get(id(root), 1)


def load_yaml(text: str, *, max_nodes: int = MAX_YAML_NODES) -> Any:
    """``yaml.safe_load`` bounded against alias and merge-key bombs: the document is
    composed (its anchors shared, nothing copied), its expanded size checked
    (:func:`_expanded_size`), and only then constructed.

    Raises:
        YAMLTooLarge: more than ``max_nodes`` nodes once expanded, nested too deeply, or
            recursive (a subclass of ``yaml.YAMLError``).
        yaml.YAMLError: not valid YAML.
    """
    loader = yaml.SafeLoader(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise YAMLTooLarge("the document nests too deeply") from None
        if node is None:
            return None
        _expanded_size(node, max_nodes)
        try:
            return loader.construct_document(node)
        except RecursionError:
            raise YAMLTooLarge("the document nests too deeply") from None
    finally:
        loader.dispose()


_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


def control_characters(data: Any, path: str = "", *, limit: int = 20) -> list[tuple[str, str]]:
    """``(field path, message)`` for every string (key or value) of ``data`` (nested
    dicts/lists as parsed from YAML, JSON or a form) holding a control character
    (U+0000-U+001F, U+007F): a spec names servers, versions, labels, paths and options, none
    of which has a use for one, and a NUL cannot even be stored in a PostgreSQL text column.
    At most ``limit`` findings; the message gives the character's code, never the raw byte."""
    found: list[tuple[str, str]] = []
    stack: list[tuple[str, Any]] = [(path, data)]
    for _ in range(MAX_YAML_NODES):  # bounded: load_yaml already capped the document's size
        if not stack or len(found) >= limit:
            break
        where, value = stack.pop()
        if isinstance(value, str):
            m = _CONTROL_RE.search(value)
            if m:
                found.append((where, f"control character U+{ord(m.group()):04X} at position {m.start()}: "
                                     "spec strings must be printable"))
        elif isinstance(value, dict):
            for k, v in reversed(list(value.items())):
                key = str(k)
                sub = f"{where}.{key}" if where else key
                if isinstance(k, str) and _CONTROL_RE.search(k):
                    found.append((where or "(top level)", f"key {k!r} holds a control character"))
                stack.append((sub, v))
        elif isinstance(value, (list, tuple)):
            stack.extend((f"{where}.{i}" if where else str(i), v) for i, v in reversed(list(enumerate(value))))
    return found
