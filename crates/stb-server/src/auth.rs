//! Who a request is, in the server's one authentication mode, and whether an unsafe
//! request proves it came from our own pages (CSRF).
//!
//! - `disabled`: everyone is the same local administrator (the server says so loudly).
//! - `trusted_proxy`: an authenticating proxy names the user in a header it sets itself;
//!   unknown names are provisioned as viewers (or refused); unsafe methods carry the
//!   constant proof header a cross-site form cannot add.
//! - `password`: a server-side session from the `streambuild_session` cookie; unsafe
//!   methods carry the session's CSRF token, compared in constant time.

use axum::http::{HeaderMap, Method};
use serde::Serialize;
use stb_control::{ControlStore, ErrorKind, User};
use subtle::ConstantTimeEq as _;

use crate::error::ApiError;

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "streambuild_session";
/// The header unsafe requests carry.
pub const CSRF_HEADER: &str = "x-streambuild-csrf";
/// Its constant value in trusted-proxy mode.
pub const PROXY_PROOF: &str = "trusted-proxy";

/// How the server authenticates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthMode {
    Disabled,
    Password,
    TrustedProxy,
}

impl AuthMode {
    /// `disabled`, `password` or `trusted_proxy`.
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim() {
            "disabled" => Some(Self::Disabled),
            "password" => Some(Self::Password),
            "trusted_proxy" => Some(Self::TrustedProxy),
            _ => None,
        }
    }
}

/// What to do with a proxy identity the store does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnknownUserPolicy {
    AutoProvision,
    Deny,
}

/// The authentication settings of one server.
#[derive(Debug, Clone)]
pub struct AuthConfig {
    pub mode: AuthMode,
    /// Lower-case header names.
    pub username_header: String,
    pub display_name_header: Option<String>,
    pub email_header: Option<String>,
    pub unknown_user_policy: UnknownUserPolicy,
    pub session_ttl_seconds: u64,
    /// Cookies without `Secure` (plain HTTP on loopback only).
    pub insecure_cookie: bool,
    pub proxy_logout_url: Option<String>,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self {
            mode: AuthMode::Disabled,
            username_header: "x-streambuild-user".to_owned(),
            display_name_header: None,
            email_header: None,
            unknown_user_policy: UnknownUserPolicy::AutoProvision,
            session_ttl_seconds: 12 * 3600,
            insecure_cookie: false,
            proxy_logout_url: None,
        }
    }
}

/// The one identity every request has once authenticated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Principal {
    pub id: String,
    pub username: String,
    pub display_name: Option<String>,
    pub email: Option<String>,
    /// `local`, `password` or `trusted_proxy`.
    pub authentication_source: &'static str,
    #[serde(skip)]
    pub roles: Vec<String>,
    #[serde(skip)]
    pub csrf_token: Option<String>,
    /// The session token this request came with (password mode).
    #[serde(skip)]
    pub session_token: Option<String>,
}

impl Principal {
    #[must_use]
    pub fn is_admin(&self) -> bool {
        self.roles.iter().any(|r| r == stb_control::ADMIN)
    }

    fn of(user: User, source: &'static str) -> Self {
        Self {
            id: user.id,
            username: user.username,
            display_name: user.display_name,
            email: user.email,
            authentication_source: source,
            roles: user.roles,
            csrf_token: None,
            session_token: None,
        }
    }
}

/// The local administrator of `disabled` mode: the same id on every machine.
#[must_use]
pub fn local_principal() -> Principal {
    Principal {
        id: uuid::Uuid::new_v5(
            &uuid::Uuid::NAMESPACE_URL,
            b"https://streambuild.dev/principals/local",
        )
        .to_string(),
        username: "local".to_owned(),
        display_name: Some("Local developer".to_owned()),
        email: None,
        authentication_source: "local",
        roles: vec![stb_control::ADMIN.to_owned()],
        csrf_token: None,
        session_token: None,
    }
}

/// The value of cookie `name` in the request's `Cookie` headers.
#[must_use]
pub fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.to_owned())
}

fn header_text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

fn store_error(error: stb_control::StoreError) -> ApiError {
    ApiError::service_unavailable(format!("control store: {}", error.message))
}

/// Who sends `headers`, in `config`'s mode.
///
/// # Errors
/// 401 when no identity is presented (or it is unknown or expired), 403 when it is one the
/// store refuses (disabled, unprovisioned under `deny`, a name taken by an unlinked
/// account), 503 when the store is unavailable.
pub async fn authenticate(
    config: &AuthConfig,
    store: &ControlStore,
    headers: &HeaderMap,
) -> Result<Principal, ApiError> {
    match config.mode {
        AuthMode::Disabled => Ok(local_principal()),
        AuthMode::TrustedProxy => proxy_principal(config, store, headers).await,
        AuthMode::Password => {
            let token = cookie(headers, SESSION_COOKIE)
                .ok_or_else(|| ApiError::unauthenticated("Not authenticated"))?;
            let session = store
                .resolve_session(&token)
                .await
                .map_err(store_error)?
                .ok_or_else(|| ApiError::unauthenticated("Session expired or revoked"))?;
            Ok(Principal {
                csrf_token: Some(session.csrf_token),
                session_token: Some(token),
                ..Principal::of(session.user, "password")
            })
        }
    }
}

async fn proxy_principal(
    config: &AuthConfig,
    store: &ControlStore,
    headers: &HeaderMap,
) -> Result<Principal, ApiError> {
    let Some(raw) = header_text(headers, &config.username_header) else {
        return Err(ApiError::unauthenticated(format!(
            "Trusted proxy did not provide required header '{}'",
            config.username_header
        )));
    };
    let Some(subject) = stb_control::canonical_username(&raw) else {
        return Err(ApiError::unauthenticated(
            "Trusted proxy identity is not a valid username",
        ));
    };
    let found = store
        .find_external("trusted_proxy", &subject)
        .await
        .map_err(store_error)?;
    let user = match (found, config.unknown_user_policy) {
        (Some(user), _) => user,
        (None, UnknownUserPolicy::Deny) => {
            return Err(ApiError::forbidden(format!(
                "Authenticated proxy user '{subject}' is not provisioned in StreamBuild"
            )));
        }
        (None, UnknownUserPolicy::AutoProvision) => {
            let display = config
                .display_name_header
                .as_deref()
                .and_then(|h| header_text(headers, h));
            let email = config
                .email_header
                .as_deref()
                .and_then(|h| header_text(headers, h));
            store
                .provision_proxy_user(&subject, display.as_deref(), email.as_deref())
                .await
                .map_err(|error| match error.kind {
                    ErrorKind::Conflict => ApiError::forbidden(error.message),
                    _ => store_error(error),
                })?
        }
    };
    if !user.is_active {
        return Err(ApiError::forbidden("Account is disabled"));
    }
    Ok(Principal::of(user, "trusted_proxy"))
}

/// Whether `method` changes something (and so needs the CSRF proof).
#[must_use]
pub fn is_unsafe(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Checks an unsafe request's CSRF proof for `principal`.
///
/// # Errors
/// 403 when the proof is missing or wrong.
pub fn check_csrf(
    mode: AuthMode,
    principal: &Principal,
    headers: &HeaderMap,
) -> Result<(), ApiError> {
    let sent = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok());
    match mode {
        AuthMode::Disabled => Ok(()),
        AuthMode::TrustedProxy if sent == Some(PROXY_PROOF) => Ok(()),
        AuthMode::TrustedProxy => Err(ApiError::forbidden("Missing trusted-proxy request proof")),
        AuthMode::Password => {
            let expected = principal.csrf_token.as_deref().unwrap_or_default();
            let matches = sent.is_some_and(|sent| {
                !expected.is_empty() && bool::from(sent.as_bytes().ct_eq(expected.as_bytes()))
            });
            if matches {
                Ok(())
            } else {
                Err(ApiError::forbidden("Missing or invalid CSRF token"))
            }
        }
    }
}

/// The `Set-Cookie` value of a new session.
#[must_use]
pub fn session_cookie(token: &str, config: &AuthConfig) -> String {
    let secure = if config.insecure_cookie {
        ""
    } else {
        "; Secure"
    };
    format!(
        "{SESSION_COOKIE}={token}; HttpOnly{secure}; SameSite=Lax; Path=/; Max-Age={}",
        config.session_ttl_seconds
    )
}

/// The `Set-Cookie` value that deletes the session cookie.
#[must_use]
pub fn cleared_cookie(config: &AuthConfig) -> String {
    let secure = if config.insecure_cookie {
        ""
    } else {
        "; Secure"
    };
    format!("{SESSION_COOKIE}=; HttpOnly{secure}; SameSite=Lax; Path=/; Max-Age=0")
}
