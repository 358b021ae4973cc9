"""StreamBuild's local ClickHouse server: the ClickHouse HTTP interface over a chDB engine."""
