"""ClickHouse native compressed blocks."""

import struct

import pytest

from chhttp import compression


def test_round_trip_of_several_blocks():
    data = bytes(range(256)) * 10_000  # 2.5 MB: three blocks
    packed = compression.compress(data)
    assert compression.decompress(packed) == data


def test_empty_data_is_one_empty_block():
    assert compression.decompress(compression.compress(b"")) == b""


def test_known_checksum_layout():
    # The header follows the 16-byte checksum: method, sizes.
    packed = compression.compress(b"hello hello hello")
    method, size, raw_size = struct.unpack_from("<BII", packed, 16)
    assert method == compression.METHOD_LZ4
    assert size == len(packed) - 16
    assert raw_size == len(b"hello hello hello")


def test_corruption_is_detected():
    packed = bytearray(compression.compress(b"some data"))
    packed[-1] ^= 0xFF
    with pytest.raises(compression.CompressionError, match="checksum"):
        compression.decompress(bytes(packed))


def test_truncation_is_detected():
    with pytest.raises(compression.CompressionError):
        compression.decompress(compression.compress(b"abc")[:20])
