"""Answers leave without waiting for the client's delayed ACK.

The handler writes headers and body separately; with Nagle's algorithm on, the body of every
answer waited about 40 ms for the ACK of the headers, which made a one-model build spend more
time in these pauses than in its statements.
"""

import socket

from chhttp.server import Handler


class _SetupOnly(Handler):
    def handle(self):  # only the connection set-up is under test
        pass

    def finish(self):
        pass


def test_the_handler_turns_nagle_off_on_its_connection():
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    accepted, address = listener.accept()
    try:
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0
        _SetupOnly(accepted, address, server=None)
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        accepted.close()
        client.close()
        listener.close()
