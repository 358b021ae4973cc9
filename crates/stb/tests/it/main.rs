//! `stb` end to end: one test binary (one link step), a module per command or concern.
//! Tests that need the warehouse or the broker use the shared local test stack
//! (`stb_test_support::stack()`), which they start when it is not running.

mod admin;
mod admission;
mod build;
mod build_kafka;
mod chunked_replay;
mod compile_validate;
mod conformance;
mod deployment_audit;
mod deployments;
mod deployments_kafka;
mod destruction;
mod dev_in_process;
mod dev_server;
mod discover;
mod dst;
mod failure_safety;
mod failure_safety_mixed;
mod fan_in;
mod init;
mod lineage;
mod local_stack;
mod plan;
mod quality;
mod reconcile;
mod runs;
mod sensors;
mod shrink;
mod status;
mod terminal;
mod unlock;
mod virtual_plan;
