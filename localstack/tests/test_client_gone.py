"""A request notices a client that went away, whatever its socket's descriptor number."""

import os
import resource
import socket

import pytest

from chhttp.server import client_gone


def _high_numbered(sock: socket.socket, number: int) -> socket.socket:
    os.dup2(sock.fileno(), number)
    return socket.socket(fileno=number)


def test_an_open_and_a_closed_client_are_told_apart():
    server, client = socket.socketpair()
    assert not client_gone(server)
    client.close()
    assert client_gone(server)
    server.close()


def test_a_descriptor_beyond_select_s_limit_works():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2048:
        pytest.fail(f"the test needs descriptors above 1024; the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2048), hard))
    try:
        server, client = socket.socketpair()
        high = _high_numbered(server, 1500)
        server.close()
        assert not client_gone(high), "an open client is not gone"
        client.close()
        assert client_gone(high)
        high.close()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
