"""A real headless browser for the report's tests: Debian's Chromium (.ci/run installs it),
its DOM dump, its screenshots, and a PNG's pixels read back without an imaging library."""

from __future__ import annotations

import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

import pytest

from flower.cli.browser import chromium_args, find_chromium

NO_BROWSER = (
    "no headless Chromium here: `apt-get install chromium fonts-wqy-zenhei` (.ci/run does), "
    "or set FLOWER_CHROMIUM"
)


def chromium() -> str:
    """The browser, or a skip that says how to get one."""
    browser = find_chromium()
    if browser is None:
        pytest.skip(NO_BROWSER)
    return browser


def dump_dom(page: Path) -> str:
    """The DOM the browser built from `page`, serialized (`--dump-dom`)."""
    with tempfile.TemporaryDirectory() as profile:
        args = [*chromium_args(chromium(), Path(profile)), "--dump-dom", page.as_uri()]
        done = subprocess.run(args, capture_output=True, text=True, timeout=120, check=True)
    return done.stdout


def screenshot(page: Path, png: Path, *, width: int, height: int) -> None:
    with tempfile.TemporaryDirectory() as profile:
        args = [*chromium_args(chromium(), Path(profile)), f"--window-size={width},{height}"]
        args += [f"--screenshot={png}", page.as_uri()]
        subprocess.run(args, capture_output=True, timeout=120, check=True)


def pixels(png: Path) -> tuple[int, int, list[list[tuple[int, int, int]]]]:
    """Width, height and RGB rows of an 8-bit, non-interlaced RGB or RGBA PNG."""
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        header = body if kind == b"IHDR" else header
        idat += body if kind == b"IDAT" else b""
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and not interlace, (depth, colour, interlace)
    size = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * size
    rows: list[list[tuple[int, int, int]]] = []
    previous = bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - size] if i >= size else 0
            up = previous[i]
            corner = previous[i - size] if i >= size else 0
            line[i] = (line[i] + _predict(kind, left, up, corner)) & 0xFF
        rows.append([tuple(line[i : i + 3]) for i in range(0, stride, size)])  # type: ignore[misc]
        previous = line
    return width, height, rows


def _predict(kind: int, left: int, up: int, corner: int) -> int:
    if kind == 0:
        return 0
    if kind == 1:
        return left
    if kind == 2:
        return up
    if kind == 3:
        return (left + up) // 2
    guess = left + up - corner
    near = min(
        (abs(guess - left), 0, left), (abs(guess - up), 1, up), (abs(guess - corner), 2, corner)
    )
    return near[2]


def hex_rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def count(rows: list[list[tuple[int, int, int]]], colour: str) -> int:
    """Pixels of exactly `colour` (#rrggbb)."""
    rgb = hex_rgb(colour)
    return sum(row.count(rgb) for row in rows)
