"""A headless Chromium turning a page of ours into a PNG (`flower report --png`).

The browser is the user's (Debian's `chromium`, or Chrome), found on PATH or named by
$FLOWER_CHROMIUM; flower ships none and needs none for the HTML and SVG. It opens only the file
we wrote (a page whose Content-Security-Policy forbids every script and load), with a
throwaway profile, no extensions and no background fetches; its sandbox stays on unless we run
as root, where Chromium refuses to start with it. (Turning JavaScript off in blink's settings
would be one more wall, but headless Chromium then takes no screenshot.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from flower.core.lang import text
from flower.errors import UsageError

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
TIMEOUT_S = 120.0


def find_chromium() -> str | None:
    """The browser to use: $FLOWER_CHROMIUM, else the first of NAMES on PATH."""
    named = os.environ.get("FLOWER_CHROMIUM")
    if named:
        return shutil.which(named)
    return next((found for name in NAMES if (found := shutil.which(name))), None)


def chromium_args(browser: str, profile: Path) -> list[str]:
    """The command line every use of the browser starts with (tests add --dump-dom)."""
    args = [
        browser,
        "--headless",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        f"--user-data-dir={profile}",
    ]
    if os.geteuid() == 0:
        args.append("--no-sandbox")
    return args


def screenshot(page: Path, png: Path, *, width: int, height: int) -> None:
    """`page` (an HTML or SVG file) drawn at width x height into `png`.

    Raises:
        UsageError: no browser, or it failed; the message says what to install or pass.
    """
    browser = find_chromium()
    if browser is None:
        raise UsageError(text("cli.png_no_chromium"))
    with tempfile.TemporaryDirectory(prefix="flower-chromium-") as profile:
        args = chromium_args(browser, Path(profile))
        args += [
            f"--window-size={width},{height}",
            f"--screenshot={png.resolve()}",
            page.resolve().as_uri(),
        ]
        try:
            done = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise UsageError(text("cli.png_did_not_run", browser=browser, problem=exc)) from exc
    if done.returncode != 0 or not png.is_file():
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise UsageError(text("cli.png_drew_nothing", browser=browser, tail=" / ".join(tail)))
