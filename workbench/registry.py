"""Registries keyed by name, so a variant (a task source, a proposer or solver reward, a method row)
is a config value, not a change to the loop (ARCHITECTURE.md, "Where the seeds' other systems plug
in"), and peer methods plug in without the core naming them.

The peers (``workbench/peers/``) register with the core's registries when imported, in two
levels: their method rows (light: the CLI lists them without loading torch) and their parts (task
sources, rewards, warm starts: the round's code). A registry loads the level it needs the first
time it is asked for a name it does not hold, or for all of its names (``plugins``: 'rows' for
the method rows, 'parts' for the rest): the core knows the plugins' package, never a plugin, and
a caller never has to remember to load them.

Example:
    >>> r = Registry("demo reward", plugins=None)
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

import importlib
from typing import Callable, Iterator

PLUGINS = "workbench.peers"  # the package whose ``load(parts)`` registers every peer method
_loaded: set[str] = set()  # the levels loaded: 'rows', 'parts'


def load_plugins(level: str = "parts") -> None:
    """Register the peers' ``level`` once (``workbench.peers.load``: 'rows' their method rows,
    'parts' those and every other part). Re-entrant: a registry read while the peers load finds
    what is registered so far."""
    if level not in _loaded:
        _loaded.add(level)
        importlib.import_module(PLUGINS).load(parts=level == "parts")


class Registry:
    """A name -> item map (callables, method rows) in registration order, whose lookup of an unknown
    name raises ValueError listing the names. ``plugins``: the peers' level an unknown name, and
    every listing, loads first (:func:`load_plugins`: 'parts', 'rows'; None: none)."""

    def __init__(self, kind: str, plugins: str | None = "parts"):
        self.kind = kind
        self.plugins = plugins
        self._items: dict[str, object] = {}

    def register(self, name: str) -> Callable:
        """Decorator adding an item under ``name``; a name already taken raises ValueError."""
        def add(item):
            return self.add(name, item)
        return add

    def add(self, name: str, item):
        """Add ``item`` under ``name`` (taken: ValueError) and return it."""
        if name in self._items:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._items[name] = item
        return item

    def _all(self) -> dict:
        if self.plugins:
            load_plugins(self.plugins)
        return self._items

    def __getitem__(self, name: str):
        if name not in self._items and name not in self._all():
            raise ValueError(f"unknown {self.kind} {name!r}; expected one of {sorted(self._items)}")
        return self._items[name]

    get = __getitem__

    def __contains__(self, name: object) -> bool:
        return name in self._items or name in self._all()

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._all()))

    def __len__(self) -> int:
        return len(self._all())

    def items(self):
        return list(self._all().items())

    def values(self):
        return list(self._all().values())

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._all())
