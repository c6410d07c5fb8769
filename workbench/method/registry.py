"""Registries keyed by name, so a seed's variant (a proposer reward, a solver reward, a task
source) is a config value, not a change to the loop (ARCHITECTURE.md, "Where the seeds' other
systems plug in").

Example:
    >>> r = Registry("demo reward")
    >>> @r.register("one")
    ... def one():
    ...     return 1
    >>> r["one"]()
    1
    >>> r["two"]
    Traceback (most recent call last):
    ...
    ValueError: unknown demo reward 'two'; expected one of ['one']
"""

from __future__ import annotations

from typing import Callable, Iterator


class Registry:
    """A name -> callable map whose lookup of an unknown name raises ValueError listing the names."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, Callable] = {}

    def register(self, name: str) -> Callable[[Callable], Callable]:
        """Decorator adding a callable under ``name``; a name already taken raises ValueError."""
        def add(fn: Callable) -> Callable:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._items[name] = fn
            return fn
        return add

    def __getitem__(self, name: str) -> Callable:
        if name not in self._items:
            raise ValueError(f"unknown {self.kind} {name!r}; expected one of {sorted(self._items)}")
        return self._items[name]

    get = __getitem__

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._items))

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._items)
