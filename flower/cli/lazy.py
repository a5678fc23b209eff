"""A group's commands built on first use, so a command imports only its own module (issue 31).

typer builds every command of a group when the group is built, and to build one it must
import the module its function lives in: `flowerbox ps` paid for the box, the self-test and
Kubernetes. `LazyCommands` stands in for a group's `commands` dict: it knows every name (in
help order) and the loader of each, and calls a loader only when its command is looked up.
Listing the names, and `name in commands`, load nothing; `--help` looks each command up and
so loads them all, as before, and prints the same page.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, MutableMapping

from typer import _click  # typer >= 0.26 vendors click; a group's commands are these

Loader = Callable[[], Mapping[str, _click.Command]]
"""Builds the commands of one module (every one it holds: one import, all of its names)."""


class LazyCommands(MutableMapping[str, _click.Command]):
    """`built` commands first, then `pending` ones (name -> its module's loader), in order."""

    def __init__(self, built: Mapping[str, _click.Command], pending: Mapping[str, Loader]) -> None:
        self._built = dict(built)
        self._pending = {name: load for name, load in pending.items() if name not in built}
        self._order = [*self._built, *self._pending]

    def __getitem__(self, name: str) -> _click.Command:
        if name in self._pending:
            load = self._pending[name]
            loaded = load()
            claimed = [each for each, other in self._pending.items() if other is load]
            if set(loaded) != set(claimed):  # a command left out of the table, or one too many
                raise LookupError(f"the loader of {claimed} built {sorted(loaded)}")
            for each in claimed:
                del self._pending[each]
                self._built[each] = loaded[each]
        return self._built[name]

    def __setitem__(self, name: str, command: _click.Command) -> None:
        if name not in self:
            self._order.append(name)
        self._pending.pop(name, None)
        self._built[name] = command

    def loaded(self) -> list[_click.Command]:
        """The commands built so far (none loaded to list them)."""
        return list(self._built.values())

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        self._built.pop(name, None)
        self._pending.pop(name, None)
        self._order.remove(name)

    def __contains__(self, name: object) -> bool:
        return name in self._built or name in self._pending

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._order))

    def __len__(self) -> int:
        return len(self._order)
