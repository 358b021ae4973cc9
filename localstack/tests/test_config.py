"""The engine configuration keeps the system logs asked for, and nothing else."""

from chhttp import config


def test_all_logs_by_default():
    rendered = config.render()
    for name in ("query_log", "part_log", "query_views_log"):
        assert f"<table>{name}</table>" in rendered


def test_part_log_only_drops_the_views_log():
    rendered = config.render("part_log")
    assert "<table>part_log</table>" in rendered
    assert "<table>query_log</table>" in rendered
    assert "query_views_log" not in rendered


def test_no_logs_keeps_the_kafka_settings():
    rendered = config.render("none")
    assert "<table>" not in rendered
    assert "<session_timeout_ms>6000</session_timeout_ms>" in rendered


def test_the_engine_is_a_cluster_of_one():
    rendered = config.render("none")
    assert "<remote_servers>\n    <stb_local>" in rendered
    assert "<host>127.0.0.1</host><port>9000</port>" in rendered
    assert "<tcp_port>9000</tcp_port>" in rendered
    assert "<cluster>stb_local</cluster>" in rendered
