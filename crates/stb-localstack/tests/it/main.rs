//! Integration tests of the local stack against the real chDB engine and tansu broker.
//! One test binary, one module per concern.

mod clickhouse_client;
mod http_interface;
mod kafka_landing;
mod native_block;
mod process_liveness;
mod restart;
