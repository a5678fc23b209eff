"""is_ephemeral: is a Bash command a read-only glance whose answer goes stale?

One function serves two masters (seeds, "is_ephemeral()"): ``delegate_guard(allow_glance=
True)`` lets the coordinator run exactly these commands itself, and the trim layer expires
exactly their old results. Adding a command here says both things at once.

The decision, in the seeds' order:

1. empty or blank -> False;
2. command or process substitution (``$(``, backticks, ``<(``, ``>(``) -> False;
3. after removing the safe redirections (``2>&1``, ``>/dev/null``, ``&>/dev/null`` ...) any
   remaining ``>`` or ``<`` -> False;
4. after the separators ``&&`` ``||`` ``;`` ``|`` (and newlines), any other operator, a lone
   ``&`` (background) included -> False;
5. every segment between separators must be a whitelisted read: its verb is in the
   whitelist and its arguments pass that verb's check (the writes a read-only verb can
   still do: ``find -delete``, ``sed -i``, ``sort -o``, awk's ``system(``, ``git branch -D``,
   ``git ... --force`` ...). xargs, exec, eval, source and tee are not in the whitelist at
   all. Environment assignments (``GIT_EXTERNAL_DIFF=x git diff``) and path-qualified verbs
   (``./ls``) are refused: both can run something else under a harmless name.

Quotes are honoured (``grep -E 'a|b'`` is one segment). When in doubt the answer is False:
a command wrongly called ephemeral could write while unguarded; one wrongly refused only
costs a delegation.
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Callable, Sequence

__all__ = ["is_ephemeral"]

Check = Callable[[Sequence[str]], bool]

_SUBSTITUTIONS = ("$(", "`", "<(", ">(")
_SAFE_REDIRECTION = re.compile(
    r"(?:\d?>>?|&>>?)\s*/dev/null(?=$|[\s;&|)])|\d?>&\d(?=$|[\s;&|)])|<\s*/dev/null(?=$|[\s;&|)])"
)
_OPERATOR_CHARS = "();<>|&\n"
_SEPARATORS = frozenset({"", "&&", "||", ";", "|"})


def _tokens(cmd: str) -> list[str] | None:
    lexer = shlex.shlex(cmd, posix=True, punctuation_chars=_OPERATOR_CHARS)
    lexer.whitespace = " \t\r"  # newlines separate commands: they become operator tokens
    lexer.commenters = ""  # shlex would cut "a#b"; bash would not
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes
        return None


def _is_operator(token: str) -> bool:
    return bool(token) and all(c in _OPERATOR_CHARS for c in token)


def _segments(tokens: Sequence[str]) -> list[list[str]] | None:
    """Words between separators; None if any other operator (redirect, &, subshell) is left."""
    segments: list[list[str]] = [[]]
    for token in tokens:
        if not _is_operator(token):
            segments[-1].append(token)
        elif token.replace("\n", "") in _SEPARATORS:
            segments.append([])
        else:
            return None
    return [s for s in segments if s]


# -- argument checks --------------------------------------------------------------------


def _has_flag(args: Sequence[str], *, long: Sequence[str] = (), short: str = "") -> bool:
    """An arg is one of the ``long`` flags (``--x`` or ``--x=v``) or a short-flag cluster
    (``-abc``) containing a letter of ``short``."""
    for arg in args:
        if arg.startswith("--"):
            if arg.split("=", 1)[0] in long:
                return True
        elif arg.startswith("-") and any(c in short for c in arg[1:]):
            return True
    return False


def _without(*, long: Sequence[str] = (), short: str = "", words: Sequence[str] = ()) -> Check:
    def check(args: Sequence[str]) -> bool:
        return not _has_flag(args, long=long, short=short) and not set(words) & set(args)

    return check


def _no_args(args: Sequence[str]) -> bool:
    return not args


def _positionals(args: Sequence[str]) -> list[str]:
    return [a for a in args if not a.startswith("-")]


def _subcommands(allowed: dict[str, Check]) -> Check:
    """The first positional argument names a read-only subcommand, whose rest is checked."""

    def check(args: Sequence[str]) -> bool:
        words = _positionals(args)
        if not words or words[0] not in allowed:
            return False
        return allowed[words[0]](args[args.index(words[0]) + 1 :])

    return check


def _anything(args: Sequence[str]) -> bool:
    return True


def _only(*first: str) -> Check:
    """No arguments, or a first positional among ``first``."""
    return lambda args: not _positionals(args) or _positionals(args)[0] in first


def _at_most_one_file(args: Sequence[str]) -> bool:
    return len(_positionals(args)) <= 1  # uniq IN OUT writes OUT


_SED_COMMAND = re.compile(
    r"(?:^|[;{}\n])\s*(?:(?:\d+|\$|/(?:[^/\\]|\\.)*/)(?:\s*,\s*(?:\d+|\$|/(?:[^/\\]|\\.)*/))?)?"
    r"\s*!?\s*[wWe]"
)
_SED_SUBST_FLAGS = re.compile(r"s(.)(?:(?!\1)[^\\]|\\.)*\1(?:(?!\1)[^\\]|\\.)*\1[gpIimM0-9]*[we]")


def _sed(args: Sequence[str]) -> bool:
    if _has_flag(args, long=("--in-place", "--file"), short="if"):
        return False
    scripts = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-e", "--expression")]
    scripts = scripts or _positionals(args)[:1]
    return not any(_SED_COMMAND.search(s) or _SED_SUBST_FLAGS.search(s) for s in scripts)


_AWK_WRITES = re.compile(r"system\s*\(|(?<!\|)\|(?!\|)|\bprintf?\b[^;}]*>")


def _awk(args: Sequence[str]) -> bool:
    if _has_flag(args, long=("--file", "--include", "--exec", "--source", "--load"), short="fiEl"):
        return False
    rest = iter(args)
    for arg in rest:
        if arg in ("-F", "-v"):
            next(rest, None)
        elif arg == "--" or not arg.startswith("-"):
            program = next(rest, "") if arg == "--" else arg
            return _AWK_WRITES.search(program) is None
    return True


_GIT_LISTING: tuple[str, ...] = (
    "-l",
    "--list",
    "-a",
    "--all",
    "-r",
    "--remotes",
    "--contains",
    "--no-contains",
)
_GIT_LISTING += ("--merged", "--no-merged", "--points-at", "--show-current", "-v", "-vv")


def _git_listing(*, writes_short: str, writes_long: Sequence[str]) -> Check:
    """git branch / git tag: list only; a bare name would create one."""

    def check(args: Sequence[str]) -> bool:
        if _has_flag(args, long=writes_long, short=writes_short):
            return False
        listing = any(a.split("=", 1)[0] in _GIT_LISTING for a in args)
        return listing or not _positionals(args)

    return check


_GIT_OUTPUT = _without(long=("--output", "--ext-diff"))
_GIT: dict[str, Check] = {
    **dict.fromkeys(
        ("status", "rev-parse", "rev-list", "describe", "blame", "ls-files"), _anything
    ),
    **dict.fromkeys(
        ("ls-tree", "shortlog", "grep", "cat-file", "show-ref", "for-each-ref"), _anything
    ),
    **dict.fromkeys(
        ("merge-base", "name-rev", "count-objects", "cherry", "show-branch"), _anything
    ),
    **dict.fromkeys(("diff", "log", "show", "whatchanged"), _GIT_OUTPUT),
    "branch": _git_listing(
        writes_short="dDmMcCfu",
        writes_long=("--delete", "--move", "--copy", "--set-upstream-to", "--unset-upstream")
        + ("--edit-description", "--track", "--no-track"),
    ),
    "tag": _git_listing(writes_short="dasfmuF", writes_long=("--delete", "--annotate", "--sign")),
    "reflog": _only("show"),
    "remote": _only("show", "get-url"),
    "stash": lambda args: _positionals(args)[:1] in (["list"], ["show"]),
    "worktree": lambda args: _positionals(args)[:1] == ["list"],
    "submodule": lambda args: _positionals(args)[:1] == ["status"],
    "config": lambda args: (
        _has_flag(args, long=("--get", "--get-all", "--get-regexp", "--list")) or "-l" in args
    ),
}
_GIT_GLOBAL_FLAGS = frozenset({"--no-pager", "-P", "--no-optional-locks"})


def _git(args: Sequence[str]) -> bool:
    """Global flags limited to harmless ones (``-c`` can set a pager or fsmonitor command)."""
    if _has_flag(args, long=("--force", "--hard", "--prune")):
        return False
    i = 0
    while i < len(args) and args[i].startswith("-"):
        if args[i] == "-C":
            i += 1
        elif args[i] not in _GIT_GLOBAL_FLAGS:
            return False
        i += 1
    return i < len(args) and args[i] in _GIT and _GIT[args[i]](args[i + 1 :])


_DOCKER: dict[str, Check] = {
    **dict.fromkeys(("ps", "images", "logs", "inspect", "version", "info"), _anything),
    **dict.fromkeys(("stats", "top", "port", "history"), _anything),
    "compose": _subcommands(
        dict.fromkeys(("ps", "logs", "config", "ls", "images", "top"), _anything)
    ),
    "container": _subcommands(
        dict.fromkeys(("ls", "ps", "inspect", "logs", "top", "port"), _anything)
    ),
    "image": _subcommands(dict.fromkeys(("ls", "inspect", "history"), _anything)),
    "network": _subcommands(dict.fromkeys(("ls", "inspect"), _anything)),
    "volume": _subcommands(dict.fromkeys(("ls", "inspect"), _anything)),
    "system": _subcommands(dict.fromkeys(("df", "info"), _anything)),
    "context": _subcommands(dict.fromkeys(("ls", "show"), _anything)),
}
_KUBECTL: dict[str, Check] = {
    **dict.fromkeys(("get", "describe", "logs", "top", "version", "cluster-info"), _anything),
    **dict.fromkeys(("explain", "api-resources", "api-versions"), _anything),
    "config": _subcommands(dict.fromkeys(("view", "get-contexts", "current-context"), _anything)),
    "auth": _subcommands({"can-i": _anything}),
}
_SYSTEMCTL: tuple[str, ...] = (
    "status",
    "is-active",
    "is-enabled",
    "is-failed",
    "list-units",
    "list-unit-files",
)
_SYSTEMCTL += ("list-timers", "show", "cat")

_WHITELIST: dict[str, Check] = {
    # directory and system information
    **dict.fromkeys(
        ("ls", "pwd", "df", "du", "whoami", "id", "uname", "uptime", "nproc"), _anything
    ),
    **dict.fromkeys(("groups", "printenv", "locale", "arch", "free", "echo"), _anything),
    "date": _without(long=("--set",), short="s"),
    "env": _no_args,  # `env CMD` runs CMD
    "hostname": _no_args,  # `hostname NAME` renames the machine
    # processes and containers
    **dict.fromkeys(("ps", "top", "lsof", "pgrep", "pstree", "vmstat", "iostat"), _anything),
    **dict.fromkeys(("ss", "netstat"), _anything),
    "docker": _subcommands(_DOCKER),
    "kubectl": _subcommands(_KUBECTL),
    "systemctl": _subcommands(dict.fromkeys(_SYSTEMCTL, _anything)),
    "journalctl": _without(long=("--vacuum-size", "--vacuum-time", "--vacuum-files", "--rotate")),
    # viewing files
    **dict.fromkeys(("cat", "head", "tail", "wc", "stat", "nl", "strings", "tac"), _anything),
    **dict.fromkeys(("md5sum", "sha1sum", "sha256sum", "sha512sum", "cksum"), _anything),
    **dict.fromkeys(("realpath", "readlink", "basename", "dirname"), _anything),
    "find": _without(
        words=("-delete", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls")
        + ("-exec", "-execdir")  # run any command: not a glance
    ),
    "tree": _without(short="o"),
    # path lookup
    **dict.fromkeys(("which", "whereis", "type"), _anything),
    "command": lambda args: bool(args) and args[0] in ("-v", "-V"),  # `command X` runs X
    # text processing
    **dict.fromkeys(("grep", "egrep", "fgrep", "jq", "diff", "cmp", "comm", "cut"), _anything),
    **dict.fromkeys(("tr", "column", "paste", "fold", "expand", "rev", "fmt"), _anything),
    "rg": _without(long=("--pre",)),
    "sort": _without(long=("--output", "--compress-program"), short="o"),
    "uniq": _at_most_one_file,
    "sed": _sed,
    **dict.fromkeys(("awk", "gawk", "mawk"), _awk),
    "yq": _without(long=("--inplace",), short="i"),
    "git": _git,
}


def _allowed(words: Sequence[str]) -> bool:
    verb, args = words[0], words[1:]
    check = _WHITELIST.get(verb)  # "./ls" and "A=1 ls" miss on purpose
    return check is not None and check(args)


@functools.lru_cache(maxsize=4096)  # every load() asks again about the same few commands
def is_ephemeral(cmd: str) -> bool:
    """True if ``cmd`` only reads state that may change (a "glance"), by the rules above."""
    if not cmd.strip():
        return False
    if any(s in cmd for s in _SUBSTITUTIONS):
        return False
    tokens = _tokens(_SAFE_REDIRECTION.sub(" ", cmd))
    if tokens is None:
        return False
    segments = _segments(tokens)
    if not segments:
        return False
    return all(_allowed(words) for words in segments)
