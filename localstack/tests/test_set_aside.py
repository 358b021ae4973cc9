"""Kafka table metadata is moved aside before the engine opens and found again after."""

from chhttp.engine import EngineError, set_aside_kafka_tables

KAFKA = "ATTACH TABLE _ UUID 'x'\n(\n    `message` String\n)\nENGINE = Kafka\nSETTINGS kafka_topic_list = 't'\n"
MERGE_TREE = "ATTACH TABLE _ UUID 'y'\n(\n    `m` String\n)\nENGINE = MergeTree\nORDER BY m\n"
VIEW = "ATTACH MATERIALIZED VIEW _ UUID 'z' TO db.dst AS SELECT 'ENGINE = Kafka' FROM db.k\n"


def test_only_kafka_tables_are_set_aside(tmp_path):
    data = tmp_path / "data"
    database = data / "metadata" / "my%2Ddb"
    database.mkdir(parents=True)
    (database / "k.sql").write_text(KAFKA)
    (database / "m.sql").write_text(MERGE_TREE)
    (database / "v.sql").write_text(VIEW)
    aside = tmp_path / "aside"
    tables = set_aside_kafka_tables(data, aside)
    assert [(t.database, t.table) for t in tables] == [("my-db", "k")]
    assert not (database / "k.sql").exists()
    assert (database / "m.sql").exists() and (database / "v.sql").exists()
    assert tables[0].saved_at.read_text() == KAFKA


def test_tables_left_aside_by_an_interrupted_start_are_found_again(tmp_path):
    aside = tmp_path / "aside" / "db"
    aside.mkdir(parents=True)
    (aside / "k.sql").write_text(KAFKA)
    tables = set_aside_kafka_tables(tmp_path / "data", tmp_path / "aside")
    assert [(t.database, t.table) for t in tables] == [("db", "k")]


def test_engine_error_parsing():
    error = EngineError("Code: 60. DB::Exception: Table x.y does not exist. (UNKNOWN_TABLE)")
    assert (error.code, error.name) == (60, "UNKNOWN_TABLE")
