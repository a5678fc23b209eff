"""The mutation registry of docs/conformance.md (issue 35): per statement row, one small
break of THAT statement in the code, and the tests that must fail under it.

`python -m tests.conformance.mutate` runs it (a scratch copy; the checkout is never
edited); `tests/conformance/test_mutations.py` checks, without running anything, that every
row of the table has a mutation or a recorded reason why none can be made, and that every
original snippet occurs exactly once in its file.

A `Mutation`'s `tests` are relative to tests/, as in the table. `hand=True` marks the 94
mutations first run by hand (docs/conformance.md, "Mutations"); `--only-new` skips them.
An `Unmutable` says why a row's statement has no small, meaningful mutation.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutation:
    row: str  # "000:305", the table's id
    file: str  # relative to the repository
    old: str  # occurs exactly once in `file`
    new: str
    tests: tuple[str, ...]
    hand: bool = False


@dataclass(frozen=True)
class Unmutable:
    row: str
    test: str  # the row's test, as the table names it
    reason: str


SIG = (
    "conformance/test_signatures.py::"
    "test_every_signature_the_seeds_show_is_the_seeds_or_a_recorded_deviation"
)
ST = "conformance/test_statements.py::"
API = "conformance/test_api.py::"


def m(row: str, file: str, old: str, new: str, *tests: str, hand: bool = False) -> Mutation:
    return Mutation(row, file, old, new, tests, hand)


MUTATIONS: list[Mutation] = [
    m("000:335", "flower/core/roles.py", 'WEB_TOOLS = ["WebFetch", "WebSearch"]',
      'WEB_TOOLS = ["WebFetch", "WebSearch", "Bash"]',
      ST + "test_the_tool_groups_are_the_seeds_less_what_this_cli_lacks", hand=True),
]

UNMUTABLE: list[Unmutable] = []
