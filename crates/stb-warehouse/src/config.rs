//! Where to connect and as whom: command-line flags, with `STREAMBUILD_CLICKHOUSE_*` as
//! their fallbacks, override the project's values key by key; defaults fill the rest.

use std::collections::BTreeMap;
use std::fmt;

/// A password: never printed, compared in constant time.
#[derive(Clone, Default)]
pub struct Secret(String);

impl Secret {
    #[must_use]
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value, for the one place that must send it.
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl PartialEq for Secret {
    fn eq(&self, other: &Self) -> bool {
        use subtle::ConstantTimeEq;
        self.0.as_bytes().ct_eq(other.0.as_bytes()).into()
    }
}

impl Eq for Secret {}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// A resolved connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionConfig {
    pub host: String,
    pub port: u16,
    pub username: String,
    pub password: Secret,
    /// The default database; `None` when every statement is fully qualified (`stb build`).
    pub database: Option<String>,
    /// Project `settings`, sent with every request; booleans already rendered `1`/`0`.
    pub settings: BTreeMap<String, String>,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        Self {
            host: "127.0.0.1".to_owned(),
            port: 8123,
            username: "default".to_owned(),
            password: Secret::default(),
            database: None,
            settings: BTreeMap::new(),
        }
    }
}

/// Values that may each be missing: command-line flags, or the project's `connection`.
#[derive(Debug, Clone, Default)]
pub struct ConnectionOverrides {
    pub host: Option<String>,
    pub port: Option<u16>,
    pub username: Option<String>,
    pub password: Option<Secret>,
    pub database: Option<String>,
}

/// The environment variables read for values neither the flags nor the project set.
pub const ENV_HOST: &str = "STREAMBUILD_CLICKHOUSE_HOST";
pub const ENV_PORT: &str = "STREAMBUILD_CLICKHOUSE_PORT";
pub const ENV_USERNAME: &str = "STREAMBUILD_CLICKHOUSE_USERNAME";
pub const ENV_PASSWORD: &str = "STREAMBUILD_CLICKHOUSE_PASSWORD";

impl ConnectionConfig {
    /// Flags, then the environment (the flags' fallbacks, read through `env` so tests need
    /// not touch the process environment), then project values, then defaults.
    ///
    /// # Errors
    /// A `STREAMBUILD_CLICKHOUSE_PORT` that is not a port number.
    pub fn resolve(
        flags: &ConnectionOverrides,
        project: &ConnectionOverrides,
        settings: BTreeMap<String, String>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, String> {
        let defaults = Self::default();
        // Read only when no flag gives the port: a stale variable must not break `--port`.
        let env_port = match flags.port.is_none().then(|| env(ENV_PORT)).flatten() {
            Some(text) => Some(
                text.trim()
                    .parse::<u16>()
                    .map_err(|_| format!("{ENV_PORT} must be a port number, not '{text}'"))?,
            ),
            None => None,
        };
        Ok(Self {
            host: flags
                .host
                .clone()
                .or_else(|| env(ENV_HOST))
                .or_else(|| project.host.clone())
                .unwrap_or(defaults.host),
            port: flags
                .port
                .or(env_port)
                .or(project.port)
                .unwrap_or(defaults.port),
            username: flags
                .username
                .clone()
                .or_else(|| env(ENV_USERNAME))
                .or_else(|| project.username.clone())
                .unwrap_or(defaults.username),
            password: flags
                .password
                .clone()
                .or_else(|| env(ENV_PASSWORD).map(Secret::new))
                .or_else(|| project.password.clone())
                .unwrap_or_default(),
            database: flags.database.clone().or_else(|| project.database.clone()),
            settings,
        })
    }

    /// `http://host:port/`
    #[must_use]
    pub fn url(&self) -> String {
        let host = if self.host.contains(':') && !self.host.starts_with('[') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        format!("http://{host}:{}/", self.port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let owned: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |key| owned.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
    }

    #[test]
    fn flags_then_environment_then_project_values() {
        let flags = ConnectionOverrides {
            port: Some(9000),
            ..Default::default()
        };
        let project = ConnectionOverrides {
            host: Some("ch.internal".into()),
            port: Some(8124),
            database: Some("analytics".into()),
            ..Default::default()
        };
        let env = env_of(&[
            (ENV_PORT, "7000"),
            (ENV_USERNAME, "svc"),
            (ENV_PASSWORD, "s3cret"),
        ]);
        let config =
            ConnectionConfig::resolve(&flags, &project, BTreeMap::new(), env).expect("resolves");
        assert_eq!(config.host, "ch.internal", "only the project sets it");
        assert_eq!(
            config.port, 9000,
            "the flag beats the environment and the project"
        );
        assert_eq!(config.username, "svc");
        assert_eq!(config.password, Secret::new("s3cret"));
        assert_eq!(config.database.as_deref(), Some("analytics"));
        assert_eq!(config.url(), "http://ch.internal:9000/");
        // Without the flag the environment beats the project's port, as it does every
        // other key (the reference's orders_demo sets `port = 18123` in `[connection]`).
        let config = ConnectionConfig::resolve(
            &ConnectionOverrides::default(),
            &project,
            BTreeMap::new(),
            env_of(&[(ENV_PORT, "7000")]),
        )
        .expect("resolves");
        assert_eq!(config.port, 7000);
    }

    #[test]
    fn defaults_and_a_bad_port() {
        let none = ConnectionOverrides::default();
        let config =
            ConnectionConfig::resolve(&none, &none, BTreeMap::new(), env_of(&[])).expect("ok");
        assert_eq!(config.url(), "http://127.0.0.1:8123/");
        assert_eq!(config.username, "default");
        assert!(config.password.is_empty());
        let error =
            ConnectionConfig::resolve(&none, &none, BTreeMap::new(), env_of(&[(ENV_PORT, "http")]))
                .expect_err("not a port");
        assert!(error.contains(ENV_PORT));
        let flagged = ConnectionOverrides {
            port: Some(9000),
            ..Default::default()
        };
        let config = ConnectionConfig::resolve(
            &flagged,
            &none,
            BTreeMap::new(),
            env_of(&[(ENV_PORT, "http")]),
        )
        .expect("the flag wins; the variable is not read");
        assert_eq!(config.port, 9000);
    }

    #[test]
    fn secrets_never_print() {
        let config = ConnectionConfig {
            password: Secret::new("hunter2"),
            ..Default::default()
        };
        assert!(!format!("{config:?}").contains("hunter2"));
        assert_ne!(Secret::new("a"), Secret::new("b"));
    }
}
