"""`@record`: a light stand-in for `@dataclass` on the start-up path.

`dataclasses` generates and compiles source code for every class, which costs most of a
millisecond each; `sxctl inbox send` runs in shell loops and defines a dozen such classes. A
record gets a generic `__init__` (positional or keyword, class-level defaults, `Factory(...)` for
mutable defaults, `NoInit()` for fields set in `__post_init__`) and a `__repr__`, built without
compiling anything. Equality stays identity, which is all sxctl needs.
"""

from __future__ import annotations

from typing import Any, dataclass_transform


class Factory:
    """A default made fresh for each instance (like `field(default_factory=...)`)."""

    def __init__(self, make) -> None:
        self.make = make


class NoInit:
    """A field that `__init__` does not take; `__post_init__` sets it."""


@dataclass_transform()  # type checkers see the generated __init__, as for a dataclass
def record(cls):
    names: list[str] = []
    for klass in reversed(cls.__mro__):
        for name in klass.__dict__.get("__annotations__", {}):
            if name not in names:
                names.append(name)
    defaults: dict[str, Any] = {}
    for name in names:
        for klass in cls.__mro__:
            if name in klass.__dict__:
                defaults[name] = klass.__dict__[name]
                break
    init_names = [n for n in names if not isinstance(defaults.get(n), NoInit)]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if len(args) > len(init_names):
            raise TypeError(f"{cls.__name__}() takes {len(init_names)} arguments ({len(args)} given)")
        values = dict(zip(init_names, args, strict=False))
        for key, value in kwargs.items():
            if key not in init_names or key in values:
                raise TypeError(f"{cls.__name__}() got an unexpected or repeated argument {key!r}")
            values[key] = value
        for name in init_names:
            if name in values:
                value = values[name]
            elif name in defaults:
                default = defaults[name]
                value = default.make() if isinstance(default, Factory) else default
            else:
                raise TypeError(f"{cls.__name__}() missing argument {name!r}")
            object.__setattr__(self, name, value)
        post = getattr(self, "__post_init__", None)
        if post is not None:
            post()

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={getattr(self, n, None)!r}" for n in names)
        return f"{cls.__name__}({shown})"

    cls.__init__ = __init__
    cls.__repr__ = __repr__
    cls.__record_fields__ = tuple(names)
    return cls
