//! Connecting to the target's ClickHouse: flags shared by every command that does.

use stb_project::Project;
use stb_warehouse::{Client, ConnectionConfig, ConnectionOverrides, Secret};

use crate::args::ConnectionArgs;
use crate::output::Failure;

/// `--host --port --username --password --database`; each falls back to its
/// `STREAMBUILD_CLICKHOUSE_*` variable, then to the project's `[connection]`.
impl ConnectionArgs {
    /// A client without a default database (statements are qualified), and the database.
    pub(crate) fn connect(&self, project: &Project) -> Result<(Client, String), Failure> {
        self.connect_for(project, stb_engine::cluster::Work::Change)
    }

    /// [`Self::connect`] for `work`: a plan that is only shown may read an `on_cluster` or
    /// `sharded` target, which nothing else may touch yet.
    fn connect_for(
        &self,
        project: &Project,
        work: stb_engine::cluster::Work,
    ) -> Result<(Client, String), Failure> {
        // Nothing is asked of a cluster the commands cannot yet work on safely.
        stb_engine::cluster::supported(project, work)?;
        let client = Client::new(self.config(project)?).map_err(|e| Failure::from(&e))?;
        let database = self
            .database
            .clone()
            .or_else(|| project.database.clone())
            .unwrap_or_else(|| "default".to_owned());
        Ok((client, database))
    }

    /// Where the commands connect, as a user reads it (`http://user@host:port`; never the
    /// password), or why that cannot be told.
    pub(crate) fn shown_address(&self, project: &Project) -> String {
        match self.config(project) {
            // As requests address it (an IPv6 host in brackets), with the user.
            Ok(config) => {
                let url = config.url();
                let server = url.trim_start_matches("http://").trim_end_matches('/');
                format!("http://{}@{server}", config.username)
            }
            Err(failure) => format!("(unresolved: {})", failure.message),
        }
    }

    /// The connection the flags, the `STREAMBUILD_CLICKHOUSE_*` variables and the
    /// project's `[connection]` resolve to, in that order.
    fn config(&self, project: &Project) -> Result<ConnectionConfig, Failure> {
        let env = |name: &str| std::env::var(name).ok();
        let resolved = project.connection.resolve(&env).map_err(|d| Failure {
            code: d.code,
            message: match &d.location {
                Some(location) => format!("{} ({location})", d.message),
                None => d.message.clone(),
            },
            hint: d.hint.clone(),
        })?;
        let flags = ConnectionOverrides {
            host: self.host.clone(),
            port: self.port,
            username: self.username.clone(),
            password: self.password.clone().map(Secret::new),
            database: None,
        };
        let from_project = ConnectionOverrides {
            host: resolved.host,
            port: resolved.port,
            username: resolved.username,
            password: resolved.password.map(Secret::new),
            database: None,
        };
        ConnectionConfig::resolve(&flags, &from_project, resolved.settings, env).map_err(
            |message| Failure {
                code: stb_project::codes::CONFIG_VALUE,
                message,
                hint: "set a port number between 1 and 65535".to_owned(),
            },
        )
    }

    /// Connects and begins reading the catalog a plan for `purpose` reads, while the
    /// caller compiles ([`stb_engine::plan::read_ahead`]); `None` when the connection
    /// cannot be made yet (the plan then says why, after the compile, as without it).
    pub(crate) fn read_ahead(
        &self,
        project: &Project,
        purpose: stb_engine::plan::Purpose,
    ) -> Option<Connected> {
        let (client, database) = self.connect_for(project, work(purpose)).ok()?;
        let client = std::sync::Arc::new(client);
        let ahead = stb_engine::plan::read_ahead(project, &client, &database, purpose);
        Some(Connected {
            client,
            database,
            ahead,
        })
    }

    /// Plans `scope` (routed by the engine: direct, virtual or mixed) through the
    /// connection `connected` opened, or a new one: what `stb plan` shows.
    pub(crate) fn plan(
        &self,
        project: &Project,
        compiled: &stb_compile::Compiled,
        scope: &stb_engine::scope::Scope,
        purpose: stb_engine::plan::Purpose,
        connected: Option<Connected>,
    ) -> Result<stb_engine::plan::Plan, Failure> {
        let (client, database, ahead) = match connected {
            Some(connected) => (connected.client, connected.database, Some(connected.ahead)),
            None => {
                let (client, database) = self.connect_for(project, work(purpose))?;
                (std::sync::Arc::new(client), database, None)
            }
        };
        Ok(stb_engine::plan::plan(
            project, compiled, &client, &database, scope, purpose, ahead,
        )?)
    }
}

/// A connection a plan opened before its compile, and the catalog read begun on it.
pub(crate) struct Connected {
    client: std::sync::Arc<Client>,
    database: String,
    ahead: stb_engine::plan::ReadAhead,
}

/// What a plan for `purpose` may do on a cluster target.
fn work(purpose: stb_engine::plan::Purpose) -> stb_engine::cluster::Work {
    match purpose {
        stb_engine::plan::Purpose::Show => stb_engine::cluster::Work::ShowPlan,
        stb_engine::plan::Purpose::Build => stb_engine::cluster::Work::Change,
    }
}

impl ConnectionArgs {
    /// Opens a connection on each call (the dev server's reads each take their own).
    pub(crate) fn connector(&self, project: &Project) -> stb_server::Connect {
        let (connection, project) = (self.clone(), project.clone());
        std::sync::Arc::new(move || {
            connection
                .connect(&project)
                .map(|(client, _)| client)
                .map_err(|failure| failure.message)
        })
    }
}

impl From<&stb_warehouse::WarehouseError> for Failure {
    fn from(error: &stb_warehouse::WarehouseError) -> Self {
        Self {
            code: error.kind.code(),
            message: error.message.clone(),
            hint: error.kind.hint().to_owned(),
        }
    }
}

impl From<&stb_warehouse::LockError> for Failure {
    fn from(error: &stb_warehouse::LockError) -> Self {
        Self {
            code: error.code(),
            message: error.to_string(),
            hint: error.hint().to_owned(),
        }
    }
}
