"""A session request applies its URL settings in one SET and puts back only what the
previous request applied and this one does not send, from state it keeps, not reads."""

from chhttp.engine import Session
from chhttp.server import prepare_session


class _Result:
    def __init__(self, text: str):
        self._text = text

    def bytes(self) -> bytes:
        return self._text.encode()


class _Connection:
    def __init__(self):
        self.statements: list[str] = []

    def query(self, sql, output_format="TabSeparated", params=None):
        self.statements.append(sql)
        return _Result("default\n" if sql == "SELECT currentDatabase()" else "")


def test_a_request_costs_one_set_and_restores_only_what_it_does_not_resend():
    connection = _Connection()
    session = Session("s", connection, 60)
    prepare_session(connection, session, {"log_comment": "q1", "max_threads": "2"}, None)
    assert connection.statements == [
        "SET log_comment = 'q1', max_threads = '2'",
        "SELECT currentDatabase()",
    ]
    connection.statements.clear()
    # The same setting again is not sent; the one left out goes back to its default.
    prepare_session(connection, session, {"log_comment": "q2"}, None)
    assert connection.statements == ["SET max_threads = DEFAULT, log_comment = 'q2'"]
    connection.statements.clear()
    # A value of the session's own SET is what a left-out setting goes back to.
    session.own_settings["max_threads"] = "5"
    prepare_session(connection, session, {"log_comment": "q3", "max_threads": "1"}, None)
    prepare_session(connection, session, {"log_comment": "q4"}, None)
    assert connection.statements[-1] == "SET max_threads = '5', log_comment = 'q4'"


def test_a_database_parameter_is_scoped_to_its_request():
    connection = _Connection()
    session = Session("s", connection, 60)
    prepare_session(connection, session, {}, "analytics")
    assert connection.statements == ["SELECT currentDatabase()", "USE `analytics`"]
    connection.statements.clear()
    prepare_session(connection, session, {}, "analytics")
    assert connection.statements == []
    prepare_session(connection, session, {}, None)
    assert connection.statements == ["USE `default`"]
    connection.statements.clear()
    prepare_session(connection, session, {}, None)
    assert connection.statements == []
