//! The web UI, embedded at build time (see `build.rs`): every path outside `/api` is a
//! file of `web/dist`, or the app's `index.html` for the app's own routes (`/runs/…`). Files
//! come from a fixed table, never from the disk, so no path can reach outside it. Hashed
//! assets are cached for a year; `index.html` is revalidated every time.

use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

include!(concat!(env!("OUT_DIR"), "/ui_assets.rs"));

/// Whether this binary carries the UI.
#[must_use]
pub fn embedded() -> bool {
    !ASSETS.is_empty()
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next().unwrap_or_default() {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "json" => "application/json",
        "woff2" => "font/woff2",
        "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

fn asset(path: &str) -> Option<&'static [u8]> {
    ASSETS
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, bytes)| *bytes)
}

fn file(path: &str, bytes: &'static [u8]) -> Response {
    let mut response = (StatusCode::OK, bytes).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(path)),
    );
    let cache = if path.starts_with("/assets/") {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    };
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    response
}

const NOT_BUILT: &str = "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>StreamBuild</title></head>\
<body><h1>This stb was built without its web UI</h1><p>The API is served under <a href=\"/api/openapi.json\">/api</a>.</p>\
<p>To get the pages, install the wheel, which carries them (<code>pip install streambuild-rs</code>, or \
<code>uv tool install streambuild-rs</code>; see docs/install.md), or, in a checkout, run <code>scripts/build-ui.sh</code> \
(Node.js 20.19 or newer) and then <code>cargo install --path crates/stb</code> again.</p></body></html>";

/// Every request outside `/api`: an asset, the app for its routes, or 404 for a missing
/// file. Unknown `/api` paths answer JSON 404.
pub(crate) async fn serve(request: Request) -> Response {
    let path = request.uri().path();
    if path == "/api" || path.starts_with("/api/") {
        return crate::error::ApiError::not_found().into_response();
    }
    if !embedded() {
        let mut response = (StatusCode::SERVICE_UNAVAILABLE, NOT_BUILT).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        );
        return response;
    }
    if let Some(bytes) = asset(path) {
        return file(path, bytes);
    }
    // The app's own routes have no file extension; a missing file does.
    let last = path.rsplit('/').next().unwrap_or_default();
    if last.contains('.') || path.starts_with("/assets/") {
        return (StatusCode::NOT_FOUND, "Not Found").into_response();
    }
    match asset("/index.html") {
        Some(index) => file("/index.html", index),
        None => (StatusCode::NOT_FOUND, "Not Found").into_response(),
    }
}
