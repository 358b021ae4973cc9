"""ClickHouse's native compressed block framing, as used by `compress=1` / `decompress=1`.

Each block: 16-byte CityHash128 (v1.0.2) of the rest of the block, then a 9-byte header
(method byte, compressed size including the header, uncompressed size, both UInt32 LE),
then the payload.
"""

from __future__ import annotations

import struct

import lz4.block
from clickhouse_cityhash.cityhash import CityHash128

METHOD_NONE = 0x02
METHOD_LZ4 = 0x82
METHOD_ZSTD = 0x90
HEADER_SIZE = 9
CHECKSUM_SIZE = 16
# ClickHouse writes blocks of at most 1 MiB of uncompressed data by default.
BLOCK_SIZE = 1 << 20


class CompressionError(ValueError):
    """The body is not a valid ClickHouse compressed stream."""


def _checksum(block: bytes) -> bytes:
    # The library returns CityHash's (first, second) pair as first << 64 | second; ClickHouse
    # writes first, then second, each little-endian.
    value = CityHash128(block)
    return struct.pack("<QQ", value >> 64, value & 0xFFFFFFFFFFFFFFFF)


def compress(data: bytes) -> bytes:
    out = bytearray()
    for start in range(0, max(len(data), 1), BLOCK_SIZE):
        chunk = data[start : start + BLOCK_SIZE]
        if not chunk and out:
            break
        payload = lz4.block.compress(chunk, store_size=False)
        header = struct.pack("<BII", METHOD_LZ4, HEADER_SIZE + len(payload), len(chunk))
        block = header + payload
        out += _checksum(block) + block
    return bytes(out)


def decompress(data: bytes) -> bytes:
    out = bytearray()
    position = 0
    while position < len(data):
        if len(data) - position < CHECKSUM_SIZE + HEADER_SIZE:
            raise CompressionError("truncated compressed block header")
        checksum = data[position : position + CHECKSUM_SIZE]
        header_at = position + CHECKSUM_SIZE
        method, compressed_size, uncompressed_size = struct.unpack_from("<BII", data, header_at)
        if compressed_size < HEADER_SIZE or header_at + compressed_size > len(data):
            raise CompressionError("compressed block size out of range")
        block = data[header_at : header_at + compressed_size]
        if _checksum(block) != checksum:
            raise CompressionError("checksum doesn't match: corrupted data")
        payload = block[HEADER_SIZE:]
        if method == METHOD_LZ4:
            try:
                out += lz4.block.decompress(payload, uncompressed_size=uncompressed_size)
            except lz4.block.LZ4BlockError as error:
                raise CompressionError(f"cannot decompress LZ4 block: {error}") from error
        elif method == METHOD_NONE:
            out += payload
        else:
            raise CompressionError(f"unsupported compression method 0x{method:02x}")
        position = header_at + compressed_size
    return bytes(out)
