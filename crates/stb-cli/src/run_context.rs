//! Who runs this command and how long its runs may stay silent: read from the process's
//! environment here, at the edge, and handed to the engine as values.

use stb_engine::runs::Windows;

/// `user@host` of the local account, for records of who did something.
pub(crate) fn local_user() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "unknown".to_owned());
    // HOSTNAME is a shell variable, often not exported; the kernel knows it on Linux.
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned());
    format!("{user}@{host}")
}

/// The owner a build records in its `run_started` event: `STREAMBUILD_RUN_OWNER` (a caller
/// that starts `stb build` for someone names them), else `user@host (pid N)`.
pub(crate) fn run_owner() -> String {
    std::env::var("STREAMBUILD_RUN_OWNER")
        .ok()
        .filter(|o| !o.trim().is_empty())
        .unwrap_or_else(|| format!("{} (pid {})", local_user(), std::process::id()))
}

/// The project's run windows, with the environment's overrides.
pub(crate) fn windows(project: &stb_project::Project) -> Windows {
    Windows::of(
        project.defaults.run_presumed_failed_after_seconds,
        &|name| std::env::var(name).ok(),
    )
}

/// The pipelines the dev server authorised this build for
/// (`STREAMBUILD_EXPECTED_BUILD_PIPELINE_SCOPE`, a JSON array), when it started it.
pub(crate) fn authorised_pipelines() -> Option<Vec<String>> {
    let text = std::env::var("STREAMBUILD_EXPECTED_BUILD_PIPELINE_SCOPE").ok()?;
    // Unreadable means nothing is authorised: the build is refused, never widened.
    Some(serde_json::from_str(&text).unwrap_or_default())
}
