"""A small kit for strict JSON formats: exact key sets in schema order, value ranges, variants.

`Obj`, `Union`, `Str`, `Int`, … describe a document as data; `check` raises `SchemaError(path,
rule)` at the first violation and `canonical` re-orders keys into schema order for encoding.
Nothing is ever repaired. comis's store and ledger rows (cron/store/schema.py, cron/run/ledger_rows.py),
sxctl's policy file and the pass heartbeat are all written in it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_SAFE_INT = 2**53 - 1  # JavaScript's largest exact integer: comis reads these files


class SchemaError(Exception):
    """A value breaks a rule of the schema; `path` is the JSON path spelled for the message."""

    def __init__(self, path: Any, rule: str) -> None:
        spelled = spell(path)
        super().__init__(f"{spelled}: {rule}")
        self.path = spelled
        self.rule = rule


def spell(path: Any) -> str:
    """A JSON path as text. Checks pass a path on as `(parent, ".key")` or `(parent, index)` and
    spell it only for an error: formatting a path for every value of a 10,000-job store is most
    of the cost of checking it."""
    parts: list[str] = []
    while isinstance(path, tuple):
        path, step = path
        parts.append(f"[{step}]" if isinstance(step, int) else step)
    return str(path) + "".join(reversed(parts))


def with_job(text: str, job: str | None) -> str:
    """A message about a value of a file, then the job it is in by name where the record has a
    readable one (`$.jobs[0].schedule.everyMs: must be … (job 'nightly')`): the JSON path locates
    the value in the file, the name says which job a person knows it as."""
    return f"{text} (job {job!r})" if job is not None else text


def readable_name(name: Any) -> str | None:
    """`name` when a message may show it: a printable string of at most 200 characters (a name
    that is itself what is wrong, too long or full of controls, is left to the path)."""
    return name if isinstance(name, str) and 0 < len(name) <= 200 and name.isprintable() else None


class Node:
    """Any JSON value (items of an array that is checked element by element elsewhere)."""

    def check(self, value: Any, path: Any) -> None:
        return None

    def canonical(self, value: Any) -> Any:
        return value


@dataclass
class Str(Node):
    """A string bounded in UTF-8 bytes (and optionally UTF-16 code units, as JavaScript counts)."""

    min_bytes: int = 1
    max_bytes: int = 256
    max_utf16: int | None = None

    def check(self, value: Any, path: Any) -> None:
        if not isinstance(value, str):
            raise SchemaError(path, "must be a string")
        ascii_only = value.isascii()  # the common case: bytes = code units = characters
        size = len(value) if ascii_only else len(value.encode("utf-8", "surrogatepass"))
        if not self.min_bytes <= size <= self.max_bytes:
            raise SchemaError(path, f"must be {self.min_bytes}-{self.max_bytes} UTF-8 bytes (is {size})")
        if self.max_utf16 is not None:
            units = size if ascii_only else len(value.encode("utf-16-le", "surrogatepass")) // 2
            if units > self.max_utf16:
                raise SchemaError(path, f"must be at most {self.max_utf16} UTF-16 code units")


@dataclass
class Int(Node):
    """An integer (never a bool) between `lo` and `hi`."""

    lo: int = 0
    hi: int = MAX_SAFE_INT

    def check(self, value: Any, path: Any) -> None:
        if not isinstance(value, int) or isinstance(value, bool):
            raise SchemaError(path, "must be an integer")
        if not self.lo <= value <= self.hi:
            raise SchemaError(path, f"must be between {self.lo} and {self.hi}")


@dataclass
class Enum(Node):
    """One of a fixed set of values."""

    values: tuple[Any, ...]

    def check(self, value: Any, path: Any) -> None:  # 1.0 is no 1 (a format version, a count): refused
        if isinstance(value, (bool, float)) or value not in self.values:
            shown = ", ".join(json.dumps(v) for v in self.values)
            raise SchemaError(path, f"must be one of {shown}")


def Const(value: Any) -> Enum:  # noqa: N802 - reads like a type in schema tables
    return Enum((value,))


@dataclass
class Nullable(Node):
    """`null` or a value of `inner`."""

    inner: Node

    def check(self, value: Any, path: Any) -> None:
        if value is not None:
            self.inner.check(value, path)

    def canonical(self, value: Any) -> Any:
        return None if value is None else self.inner.canonical(value)


@dataclass
class Arr(Node):
    """An array of at most `max_items` values of `item`."""

    item: Node
    max_items: int = MAX_SAFE_INT

    def check(self, value: Any, path: Any) -> None:
        if not isinstance(value, list):
            raise SchemaError(path, "must be an array")
        if len(value) > self.max_items:
            raise SchemaError(path, f"must have at most {self.max_items} items")
        for index, item in enumerate(value):
            self.item.check(item, (path, index))

    def canonical(self, value: Any) -> Any:
        return [self.item.canonical(item) for item in value]


@dataclass
class Field:
    """One key of an object node: its name, its node and whether it must be there."""

    name: str
    node: Node
    required: bool = True

    def __post_init__(self) -> None:
        self.step = "." + self.name  # this field's step in a JSON path


def req(name: str, node: Node) -> Field:
    return Field(name, node, True)


def opt(name: str, node: Node) -> Field:
    return Field(name, node, False)


@dataclass
class Obj(Node):
    """An object with exactly these keys (optional ones may be absent), in this order."""

    fields: Sequence[Field]

    def __post_init__(self) -> None:
        self.known = frozenset(f.name for f in self.fields)
        self._fast: Callable[[Any], bool] | None = None

    def check(self, value: Any, path: Any) -> None:
        fast = self._fast or self._compiled()
        if fast(value):  # valid for sure; anything else is checked step by step, for its message
            return
        if not isinstance(value, dict):
            raise SchemaError(path, "must be an object")
        if not self.known.issuperset(value):
            unknown = next(key for key in value if key not in self.known)
            raise SchemaError((path, f".{unknown}"), "unknown key")
        for field in self.fields:
            if field.name in value:
                field.node.check(value[field.name], (path, field.step))
            elif field.required:
                raise SchemaError((path, field.step), "missing")

    def canonical(self, value: Any) -> Any:
        return {f.name: f.node.canonical(value[f.name]) for f in self.fields if f.name in value}

    def _compiled(self) -> Callable[[Any], bool]:
        self._fast = fast_check(self)
        return self._fast


@dataclass
class Union(Node):
    """Objects discriminated by one key (`kind`, `status`, `strategy`, `recordType`, …)."""

    key: str
    variants: dict[str, Node]

    def pick(self, value: Any, path: Any) -> Node:
        if not isinstance(value, dict):
            raise SchemaError(path, "must be an object")
        tag = value.get(self.key)
        if not isinstance(tag, str) or tag not in self.variants:
            raise SchemaError((path, f".{self.key}"), f"must be one of {', '.join(self.variants)}")
        return self.variants[tag]

    def check(self, value: Any, path: Any) -> None:
        self.pick(value, path).check(value, path)

    def canonical(self, value: Any) -> Any:
        return self.pick(value, "$").canonical(value)


@dataclass
class Check(Node):
    """A node plus an extra rule on the value (the rule returns a message, or None when fine)."""

    inner: Node
    rule: Callable[[Any], str | None]

    def check(self, value: Any, path: Any) -> None:
        self.inner.check(value, path)
        problem = self.rule(value)
        if problem:
            raise SchemaError(path, problem)

    def canonical(self, value: Any) -> Any:
        return self.inner.canonical(value)


class Bool(Node):
    """`true` or `false`."""

    def check(self, value: Any, path: Any) -> None:
        if not isinstance(value, bool):
            raise SchemaError(path, "must be true or false")


def read_checked_file(path: Path, cap: int, what: str, root: Node,
                      job_at: Callable[[str], str | None] | None = None) -> Any | None:
    """One of sxctl's own strict JSON files (`what`: `sxctl policy file`), checked against `root`:
    None when it is absent; exit 5 naming the file and the rule when it is larger than `cap`,
    not JSON (a key twice included: which one was meant is unknown) or off the schema. `job_at`:
    the name of the job a JSON path of the file is in (None: none readable), for the message."""
    from ...errors import InvalidDataError
    from ...fsio import read_data_file, written_here
    from ...jsondata import strict_loads

    trusted = written_here(str(path))  # this process wrote it in its scratch copy (sxctl/scratch.py)
    raw = read_data_file(path, cap)
    if raw is None:
        return None
    if trusted:
        return json.loads(raw)
    if len(raw) > cap:
        raise InvalidDataError(str(path), f"{what} is larger than {cap} bytes")
    try:
        doc = strict_loads(raw)
        root.check(doc, "$")
    except ValueError as error:
        raise InvalidDataError(str(path), f"{what} contains invalid JSON ({error})") from None
    except SchemaError as error:
        job = job_at(error.path) if job_at is not None else None
        raise InvalidDataError(str(path), f"{what}: {with_job(str(error), job)}", json_path=error.path,
                               rule=error.rule, job=job) from None
    except RecursionError:
        raise InvalidDataError(str(path), f"{what} is nested too deeply") from None
    return doc


# --- the fast path ---------------------------------------------------------------------------------

_MISSING = object()


def fast_check(node: Node) -> Callable[[Any], bool]:
    """A predicate that is True only for a value `node.check` accepts, built once per node as one
    generated function whose leaves (strings, integers, enums) are inline expressions: checking
    a 10,000-job store value by value cost a method call and a path per leaf. False says only
    "not sure" — `check` then walks the value for the exact error (or accepts it: a non-ASCII
    string, a subclass of dict)."""
    env: dict[str, Any] = {"MISSING": _MISSING}
    counter = [0]

    def bind(value: Any) -> str:
        counter[0] += 1
        name = f"_{counter[0]}"
        env[name] = value
        return name

    def expr(node: Any, v: str) -> str:
        """A Python expression that is True only if the value named `v` satisfies `node`."""
        kind = type(node)
        if kind is Str:
            test = f"type({v}) is str and {v}.isascii() and {node.min_bytes} <= len({v}) <= {node.max_bytes}"
            return f"({test}{f' and len({v}) <= {node.max_utf16}' if node.max_utf16 is not None else ''})"
        if kind is Int:
            return f"(type({v}) is int and {node.lo} <= {v} <= {node.hi})"
        if kind is Enum:
            return f"(type({v}) is not bool and type({v}) is not float and {v} in {bind(node.values)})"
        if kind is Bool:
            return f"(type({v}) is bool)"
        if kind is Nullable:
            return f"({v} is None or {expr(node.inner, v)})"
        if kind is Check:
            return f"({expr(node.inner, v)} and not {bind(node.rule)}({v}))"
        if kind is Node:
            return "True"
        return f"{bind(predicate(node))}({v})"

    def define(body: str) -> Callable[[Any], bool]:
        """`lambda value: <body>` as a compiled function over `env` (built from the schema only)."""
        scope: dict[str, Any] = {}
        exec(compile(f"def f(value):\n    return {body}\n", "<schema fast path>", "exec"), env, scope)  # noqa: S102
        return scope["f"]

    def predicate(node: Any) -> Callable[[Any], bool]:
        kind = type(node)
        if kind is Obj:
            tests = []
            for index, field in enumerate(node.fields):
                v = f"v{index}"
                got = f"({v} := value.get({field.name!r}, MISSING))"
                tests.append(f"({got} is not MISSING and {expr(field.node, v)})" if field.required
                             else f"({got} is MISSING or {expr(field.node, v)})")
            return define(" and ".join([f"type(value) is dict and {bind(node.known)}.issuperset(value)", *tests]))
        if kind is Union:
            variants = {tag: predicate(variant) for tag, variant in node.variants.items()}
            key = node.key

            def union(value: Any) -> bool:
                tag = value.get(key) if type(value) is dict else None
                return type(tag) is str and tag in variants and variants[tag](value)
            return union
        if kind is Arr:
            item = predicate(node.item) if type(node.item) is not Node else None
            limit = node.max_items
            return lambda value: type(value) is list and len(value) <= limit and (
                item is None or all(item(entry) for entry in value))
        if kind in (Str, Int, Enum, Bool, Nullable, Check, Node):
            return define(expr(node, "value"))

        def checked(value: Any) -> bool:  # a node with its own rules (a job, a map): its own check
            try:
                node.check(value, "$")
            except SchemaError:
                return False
            return True
        return checked

    return predicate(node)
