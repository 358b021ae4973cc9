//! `stb local`: the Docker-free local stack.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use stb_localstack::clickhouse::ClickHouseOptions;
use stb_localstack::{Layout, StackOptions, StackStatus, stack};

use crate::output::{Failure, StderrProgress, fail, print_json};

#[derive(Debug, Subcommand)]
pub(crate) enum LocalCommand {
    /// Start the ClickHouse server and the Kafka broker (installs them on first use).
    Up(UpArgs),
    /// Stop the services this stack started.
    Down(CommonArgs),
    /// Show whether each service runs, with its port, PID and log file.
    Status(CommonArgs),
    /// Print the stack's addresses as shell variables: `eval "$(stb local env)"`.
    Env(CommonArgs),
    /// Send each line of stdin to a topic as one message (its value), on the stack's
    /// broker: `echo '{"id": 1}' | stb local produce --topic events`.
    Produce(ProduceArgs),
}

#[derive(Debug, Args)]
pub(crate) struct ProduceArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// The topic (created with one partition when missing).
    #[arg(long, value_name = "TOPIC")]
    topic: String,
    /// Brokers to send to instead of the running stack's (host:port[,host:port...]).
    #[arg(long, value_name = "LIST")]
    brokers: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct CommonArgs {
    /// State directory of the stack (data, logs, pid and port files).
    #[arg(long, env = "STB_LOCAL_HOME", value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct UpArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// HTTP port of the ClickHouse server on 127.0.0.1 (0 picks a free port).
    #[arg(long, default_value_t = 8123, value_name = "PORT")]
    clickhouse_port: u16,
    /// Port of the Kafka broker on 127.0.0.1 (0 picks a free port).
    #[arg(long, default_value_t = 9092, value_name = "PORT")]
    kafka_port: u16,
    /// The ClickHouse user clients authenticate as. Its password, if any, is read from
    /// STB_LOCAL_CLICKHOUSE_PASSWORD.
    #[arg(long, default_value = "default", value_name = "NAME")]
    user: String,
}

impl CommonArgs {
    fn layout(&self) -> Layout {
        self.state_dir
            .as_ref()
            .map_or_else(Layout::default_for_user, Layout::with_state_dir)
    }
}

pub(crate) fn run(command: LocalCommand) -> ExitCode {
    match command {
        LocalCommand::Up(args) => {
            let options = StackOptions {
                clickhouse: ClickHouseOptions {
                    port: args.clickhouse_port,
                    user: args.user.clone(),
                    // Read from the environment only, so it never shows in `ps` or history.
                    password: std::env::var(stb_localstack::clickhouse::PASSWORD_ENV).ok(),
                    ..ClickHouseOptions::default()
                },
                kafka_port: args.kafka_port,
            };
            let result = stack::up(&args.common.layout(), &options, &mut StderrProgress);
            report(result, args.common.json)
        }
        LocalCommand::Down(args) => {
            report(stack::down(&args.layout(), &mut StderrProgress), args.json)
        }
        LocalCommand::Status(args) => report(stack::status(&args.layout()), args.json),
        LocalCommand::Env(args) => match stack::status(&args.layout()) {
            Ok(status) => print_env(&status, args.json),
            Err(error) => fail(&Failure::from(error), args.json),
        },
        LocalCommand::Produce(args) => produce(&args),
    }
}

fn produce(args: &ProduceArgs) -> ExitCode {
    let json = args.common.json;
    let list = match &args.brokers {
        Some(list) => list.clone(),
        None => match stack::status(&args.common.layout()) {
            Ok(status) if status.kafka.running && status.kafka.port.is_some() => {
                format!("127.0.0.1:{}", status.kafka.port.unwrap_or_default())
            }
            Ok(_) => return fail(&not_running(), json),
            Err(error) => return fail(&Failure::from(error), json),
        },
    };
    let mut values = Vec::new();
    for line in std::io::stdin().lock().lines() {
        match line {
            Ok(line) if line.trim().is_empty() => {}
            Ok(line) => values.push(line),
            Err(error) => {
                return fail(
                    &Failure {
                        code: "STB-LOCAL-010",
                        message: format!("cannot read the messages from stdin: {error}"),
                        hint: "send one message per line of UTF-8 text".to_owned(),
                    },
                    json,
                );
            }
        }
    }
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let messages: Vec<stb_kafka::Message> = values
        .into_iter()
        .map(|value| stb_kafka::Message {
            // Unassigned: the client's partitioner picks one.
            partition: -1,
            key: String::new(),
            value,
            timestamp_ms: now_ms,
        })
        .collect();
    let brokers = stb_kafka::Brokers {
        list,
        settings: Vec::new(),
    };
    let sent = stb_kafka::create_topic(&brokers, &args.topic, 1, false)
        .and_then(|()| stb_kafka::produce(&brokers, &args.topic, &messages));
    if let Err(detail) = sent {
        return fail(
            &Failure {
                code: "STB-LOCAL-011",
                message: format!("could not send to topic '{}': {detail}", args.topic),
                hint: "check that the broker runs (`stb local status`) or pass --brokers"
                    .to_owned(),
            },
            json,
        );
    }
    if json {
        print_json(&serde_json::json!({ "topic": args.topic, "messages": messages.len() }));
    } else {
        let _ = writeln!(
            std::io::stdout().lock(),
            "sent {} message(s) to {}",
            messages.len(),
            args.topic
        );
    }
    ExitCode::SUCCESS
}

fn not_running() -> Failure {
    Failure {
        code: "STB-LOCAL-008",
        message: "the local stack is not running".to_owned(),
        hint: "start it with `stb local up`".to_owned(),
    }
}

fn report(result: Result<StackStatus, stb_localstack::LocalStackError>, json: bool) -> ExitCode {
    match result {
        Ok(status) if json => {
            print_json(&status);
            ExitCode::SUCCESS
        }
        Ok(status) => {
            let _ = std::io::stdout()
                .lock()
                .write_all(render_status(&status).as_bytes());
            ExitCode::SUCCESS
        }
        Err(error) => fail(&Failure::from(error), json),
    }
}

fn render_status(status: &StackStatus) -> String {
    let mut text = String::new();
    for service in [&status.clickhouse, &status.kafka] {
        let name = match service.component {
            stb_localstack::Component::ClickHouse => "clickhouse",
            stb_localstack::Component::Kafka => "kafka",
        };
        if service.running {
            text.push_str(&format!(
                "{name:<11} running  {}  pid {}  {}\n",
                service.address.as_deref().unwrap_or("-"),
                service
                    .pid
                    .map_or_else(|| "-".to_owned(), |pid| pid.to_string()),
                service.version.as_deref().unwrap_or(""),
            ));
        } else {
            text.push_str(&format!("{name:<11} stopped\n"));
        }
        text.push_str(&format!("{:<11} log: {}\n", "", service.log.display()));
    }
    text.push_str(&format!("state: {}\n", status.state_dir.display()));
    if status.clickhouse.running || status.kafka.running {
        text.push_str(&format!("env:   {}\n", status.env_file.display()));
    }
    text
}

fn print_env(status: &StackStatus, json: bool) -> ExitCode {
    let lines = stack::env_lines(status);
    if json {
        let map: serde_json::Map<String, serde_json::Value> = lines
            .into_iter()
            .map(|(key, value)| (key, serde_json::Value::String(value)))
            .collect();
        print_json(&map);
        return ExitCode::SUCCESS;
    }
    if lines.is_empty() {
        return fail(&not_running(), false);
    }
    let mut stdout = std::io::stdout().lock();
    for (key, value) in lines {
        let _ = writeln!(stdout, "export {key}={value}");
    }
    ExitCode::SUCCESS
}
