//! `stb dev`'s sign-in flags (each with its `STREAMBUILD_AUTH_*` variable), turned into
//! the server's [`AuthConfig`]; the server judges whether they are safe.

use clap::{Args, ValueEnum};
use stb_server::{AuthConfig, AuthMode, UnknownUserPolicy};

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Mode {
    Disabled,
    Password,
    #[value(name = "trusted_proxy")]
    TrustedProxy,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Policy {
    #[value(name = "auto_provision")]
    AutoProvision,
    Deny,
}

#[derive(Debug, Args)]
pub(crate) struct AuthArgs {
    /// How users sign in.
    #[arg(
        long,
        value_enum,
        env = "STREAMBUILD_AUTH_MODE",
        default_value = "disabled"
    )]
    auth_mode: Mode,
    /// Trusted proxy: the header naming the user.
    #[arg(
        long,
        env = "STREAMBUILD_AUTH_USERNAME_HEADER",
        default_value = "X-StreamBuild-User",
        value_name = "NAME"
    )]
    auth_username_header: String,
    /// Trusted proxy: an optional header with the user's display name.
    #[arg(
        long,
        env = "STREAMBUILD_AUTH_DISPLAY_NAME_HEADER",
        value_name = "NAME"
    )]
    auth_display_name_header: Option<String>,
    /// Trusted proxy: an optional header with the user's email.
    #[arg(long, env = "STREAMBUILD_AUTH_EMAIL_HEADER", value_name = "NAME")]
    auth_email_header: Option<String>,
    /// Trusted proxy: what to do with a name the control store does not know.
    #[arg(
        long,
        value_enum,
        env = "STREAMBUILD_AUTH_UNKNOWN_USER_POLICY",
        default_value = "auto_provision"
    )]
    auth_unknown_user_policy: Policy,
    /// Trusted proxy: the role new users get (only viewer is accepted).
    #[arg(
        long,
        env = "STREAMBUILD_AUTH_DEFAULT_ROLE",
        default_value = "viewer",
        value_name = "ROLE"
    )]
    auth_default_role: String,
    /// Password mode: how long a session lasts, in seconds (absolute).
    #[arg(
        long,
        env = "STREAMBUILD_AUTH_SESSION_TTL_SECONDS",
        default_value_t = 43_200,
        value_name = "SECONDS"
    )]
    auth_session_ttl_seconds: u64,
    /// Password mode: cookies without `Secure`, for plain HTTP (loopback only).
    #[arg(long, env = "STREAMBUILD_AUTH_INSECURE_COOKIE", value_parser = truthy, default_value = "false")]
    auth_insecure_cookie: bool,
    /// Trusted proxy: the proxy's sign-out address, for the UI.
    #[arg(long, env = "STREAMBUILD_AUTH_PROXY_LOGOUT_URL", value_name = "URL")]
    auth_proxy_logout_url: Option<String>,
}

fn truthy(text: &str) -> Result<bool, String> {
    Ok(matches!(
        text.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes"
    ))
}

impl AuthArgs {
    /// The role auto-provisioned users get, as given.
    pub(crate) fn default_role(&self) -> &str {
        &self.auth_default_role
    }

    /// The server's settings (header names lower-cased).
    pub(crate) fn config(&self) -> AuthConfig {
        AuthConfig {
            mode: match self.auth_mode {
                Mode::Disabled => AuthMode::Disabled,
                Mode::Password => AuthMode::Password,
                Mode::TrustedProxy => AuthMode::TrustedProxy,
            },
            username_header: self.auth_username_header.to_ascii_lowercase(),
            display_name_header: self
                .auth_display_name_header
                .as_ref()
                .map(|h| h.to_ascii_lowercase()),
            email_header: self
                .auth_email_header
                .as_ref()
                .map(|h| h.to_ascii_lowercase()),
            unknown_user_policy: match self.auth_unknown_user_policy {
                Policy::AutoProvision => UnknownUserPolicy::AutoProvision,
                Policy::Deny => UnknownUserPolicy::Deny,
            },
            session_ttl_seconds: self.auth_session_ttl_seconds,
            insecure_cookie: self.auth_insecure_cookie,
            proxy_logout_url: self.auth_proxy_logout_url.clone(),
        }
    }
}
