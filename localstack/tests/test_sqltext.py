"""The lexer-level analyses the HTTP front end makes before the engine sees a query."""

import pytest

from chhttp import sqltext


def analyse(text):
    return sqltext.analyse(text)


def test_single_select_has_no_trailing_statement():
    statement = analyse("SELECT 1")
    assert statement.kind == "SELECT"
    assert statement.trailing_statement_at is None
    assert statement.sql == "SELECT 1"


@pytest.mark.parametrize(
    "text",
    [
        "SELECT 'a;b'",
        "SELECT 1 -- ; SELECT 2",
        "SELECT 1 /* ; SELECT 2 */",
        'SELECT "weird;name" FROM t',
        "SELECT `x;y` FROM t",
        "SELECT 1;",
        "SELECT 1 ; ; ",
        "SELECT 'it''s;' ",
        "SELECT 'back\\';slash'",
    ],
)
def test_semicolons_inside_text_or_at_the_end_are_one_statement(text):
    assert analyse(text).trailing_statement_at is None


def test_a_second_statement_is_found():
    statement = analyse("SELECT 1; SELECT 2")
    assert statement.trailing_statement_at == len("SELECT 1; ")
    assert statement.sql == "SELECT 1"


def test_nested_block_comments():
    assert analyse("SELECT 1 /* a /* b */ ; */").trailing_statement_at is None


def test_insert_format_data_is_not_lexed():
    text = "INSERT INTO t (a, b) FORMAT TabSeparated\n1\t';x\n"
    statement = analyse(text)
    assert statement.kind == "INSERT"
    assert statement.insert_format == "TabSeparated"
    assert statement.sql == "INSERT INTO t (a, b)"
    assert text[statement.data_offset :] == "1\t';x\n"


def test_insert_values_data_starts_after_the_keyword():
    text = "INSERT INTO t VALUES (1, 'a;b'), (2, 'c')"
    statement = analyse(text)
    assert statement.insert_format == "Values"
    assert statement.sql == "INSERT INTO t"
    assert text[statement.data_offset :] == " (1, 'a;b'), (2, 'c')"


def test_insert_select_is_an_ordinary_statement():
    statement = analyse("INSERT INTO t SELECT 1 FORMAT Values")
    assert statement.insert_format is None
    assert statement.kind == "INSERT"


def test_columns_named_values_do_not_start_data():
    statement = analyse("INSERT INTO t (id, values) FORMAT CSV\n1,2")
    assert statement.insert_format == "CSV"


def test_binary_data_after_format_is_untouched():
    text = "INSERT INTO t FORMAT RowBinary\n" + bytes(range(256)).decode("latin-1")
    statement = analyse(text)
    assert text[statement.data_offset :].encode("latin-1") == bytes(range(256))


def test_output_format_is_the_top_level_format_clause():
    assert analyse("SELECT 1 FORMAT JSONEachRow").output_format == "JSONEachRow"
    assert analyse("SELECT * FROM (SELECT 1 FORMAT CSV)").output_format is None
    assert analyse("SELECT 'FORMAT CSV'").output_format is None


def test_unterminated_string_raises():
    with pytest.raises(sqltext.UnterminatedError):
        analyse("SELECT 'abc")


def test_system_processes_and_query_log_are_correlated():
    rewritten = sqltext.correlate_query_ids("SELECT query_id FROM system.processes WHERE 1")
    assert "system.processes)" in rewritten
    assert rewritten.startswith("SELECT query_id FROM (SELECT * REPLACE (")
    assert "FROM system.query_log)" in sqltext.correlate_query_ids("SELECT * FROM `system`.`query_log`")


def test_correlation_leaves_strings_and_other_tables_alone():
    text = "SELECT 'system.processes' FROM system.tables"
    assert sqltext.correlate_query_ids(text) == text


def test_kill_query_condition_is_translated():
    statement = analyse("KILL QUERY WHERE query_id = 'abc' SYNC")
    kill = sqltext.kill_query(statement)
    assert kill.sql == f"KILL QUERY WHERE {sqltext.PROCESSES_QUERY_ID} = 'abc' SYNC"
    assert sqltext.kill_query(analyse("SELECT query_id")) is None


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("CREATE TABLE db.k (m String) ENGINE = Kafka SETTINGS kafka_topic_list = 't'", "db.k"),
        ("CREATE TABLE IF NOT EXISTS `d b`.k (m String) ENGINE = Kafka()", "d b.k"),
        ("create or replace table k (m String) engine = Kafka", "k"),
        ("CREATE TABLE k (m String) ENGINE = MergeTree ORDER BY m", None),
        ("CREATE VIEW v AS SELECT 'ENGINE = Kafka'", None),
    ],
)
def test_kafka_table_creation_is_recognised(text, name):
    assert sqltext.creates_kafka_table(analyse(text)) == name


def test_set_statement_names():
    assert sqltext.set_statement_names(analyse("SET max_threads = 2, `log_comment` = 'x=y'")) == {"max_threads", "log_comment"}
    assert sqltext.set_statement_names(analyse("SELECT a = 1")) == set()
