"""Where the image is built from: a flowerbox checkout (its Dockerfile), and only one of the
flowerbox this host runs, so the version label the build puts on the image tells the truth
(box.engine.ensure_image runs no image built for another version).

An editable install runs from its checkout; an installed one (`pip install ./flowerbox`, as
the CI example does) does not, so `flowerbox build PATH` (or `flowerbox build` in the
checkout) says where it is. No docker here.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from flower import text
from flowerbox import __version__
from flowerbox.errors import ConfigError


def checkout_version(path: Path) -> str | None:
    """The flowerbox version of the checkout at `path`; None where it is not one (no
    Dockerfile, or a pyproject.toml that is not flowerbox's)."""
    if not (path / "Dockerfile").is_file():
        return None
    try:
        project = tomllib.loads((path / "pyproject.toml").read_text()).get("project", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    if not isinstance(project, dict) or project.get("name") != "flowerbox":
        return None
    version = project.get("version")
    return version if isinstance(version, str) else None


RUNNING_FROM = Path(__file__).resolve().parents[2]
RUNNING_CHECKOUT = RUNNING_FROM if checkout_version(RUNNING_FROM) else None
"""The checkout this flowerbox runs from (an editable install), else None."""


def build_context(given: Path | None, *, cwd: Path | None = None) -> Path:
    """The checkout `flowerbox build` builds: `given`, else the current folder when it is a
    checkout, else the one this flowerbox runs from.

    Raises:
        ConfigError: no checkout there, or one of another version (its image would carry
            this flowerbox's version label over other code); the message says what to do.
    """
    here = (cwd or Path.cwd()).resolve()
    path = given.expanduser().resolve() if given is not None else None
    if path is None:
        path = here if checkout_version(here) else RUNNING_CHECKOUT
    if path is None:
        raise ConfigError(text("source.installed", hint=no_checkout()))
    version = checkout_version(path)
    if version is None:
        raise ConfigError(text("source.not_checkout", path=path, hint=no_checkout()))
    if version != __version__:
        raise ConfigError(text("source.other_version", path=path, version=version, own=__version__))
    return path


def no_checkout() -> str:
    """What to pass where no checkout is found (in the errors above and the engine's)."""
    return text("source.clone_hint", version=__version__)
