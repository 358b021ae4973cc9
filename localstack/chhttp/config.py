"""The engine configuration file the server writes next to its data directory."""

from __future__ import annotations

from pathlib import Path

# How often the system logs are flushed. Each flush writes a new part of every log table
# and parts are merged in the background: at twice a second the logs cost the local engine
# about a tenth of its CPU under the test suite. Every 2.5 s is still sooner than a
# ClickHouse server's 7.5 s default; a test that reads a log runs SYSTEM FLUSH LOGS first.
LOG_FLUSH_MS = 2500

# librdkafka settings that make the Kafka engine join groups and notice topics quickly on a
# single-node local broker. With librdkafka defaults rows land about 24 s after produce.
KAFKA_SETTINGS = {
    "session_timeout_ms": 6000,
    "heartbeat_interval_ms": 1000,
    "topic_metadata_refresh_interval_ms": 2000,
}


# A cluster of one shard whose one replica is the engine itself, so that `Distributed`
# tables, `cluster()` and the `{cluster}`/`{shard}`/`{replica}` macros of cluster DDL run
# here (docs/clusters.md). The engine never listens on a TCP port: `tcp_port` only tells it
# that the replica at that port is itself, which it then reads and writes without a network.
LOCAL_CLUSTER = "stb_local"
LOCAL_CLUSTER_PORT = 9000


# Which system logs the engine keeps, by `--system-logs` choice. `all` is the default;
# the others exist so tests can see how StreamBuild does on a server that keeps less.
SYSTEM_LOGS = {
    "all": ("query_log", "part_log", "query_views_log"),
    "part_log": ("query_log", "part_log"),
    "none": (),
}


def render(system_logs: str = "all") -> str:
    logs = "\n".join(
        f"  <{name}>\n    <database>system</database>\n    <table>{name}</table>\n"
        f"    <flush_interval_milliseconds>{LOG_FLUSH_MS}</flush_interval_milliseconds>\n  </{name}>"
        for name in SYSTEM_LOGS[system_logs]
    )
    kafka = "\n".join(f"    <{key}>{value}</{key}>" for key, value in KAFKA_SETTINGS.items())
    return f"""<clickhouse>
  <!-- Written by the StreamBuild local ClickHouse server; rewritten at every start. -->
{logs}
  <kafka>
{kafka}
  </kafka>
  <tcp_port>{LOCAL_CLUSTER_PORT}</tcp_port>
  <macros>
    <cluster>{LOCAL_CLUSTER}</cluster>
    <shard>01</shard>
    <replica>local</replica>
  </macros>
  <remote_servers>
    <{LOCAL_CLUSTER}>
      <shard>
        <internal_replication>true</internal_replication>
        <replica><host>127.0.0.1</host><port>{LOCAL_CLUSTER_PORT}</port></replica>
      </shard>
    </{LOCAL_CLUSTER}>
  </remote_servers>
</clickhouse>
"""


def write(path: Path, system_logs: str = "all") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(system_logs))
    return path
