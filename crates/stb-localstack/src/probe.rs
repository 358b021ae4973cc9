//! Readiness probes over loopback: a TCP connect and a minimal HTTP GET.
//!
//! Deliberately tiny: the stack manager must not depend on the ClickHouse client it exists
//! to test.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(2);

/// True if something accepts TCP connections on 127.0.0.1:`port`.
#[must_use]
pub fn port_open(port: u16) -> bool {
    TcpStream::connect_timeout(&loopback(port), TIMEOUT).is_ok()
}

/// A free port on 127.0.0.1, chosen by the kernel.
pub(crate) fn free_port() -> std::io::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?.port())
}

/// `GET path` on 127.0.0.1:`port`; returns (status, body) on any complete response.
pub fn http_get(port: u16, path_and_query: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&loopback(port), TIMEOUT)?;
    stream.set_read_timeout(Some(TIMEOUT))?;
    stream.set_write_timeout(Some(TIMEOUT))?;
    write!(
        stream,
        "GET {path_and_query} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )?;
    // Read until the body is complete rather than to EOF: a keep-alive server may not close.
    let mut raw = Vec::new();
    let mut buffer = [0_u8; 4096];
    loop {
        if let Some(response) = parse_response(&raw) {
            return Ok(response);
        }
        let read = stream.read(&mut buffer)?;
        if read == 0 {
            return parse_response(&raw)
                .or_else(|| parse_unframed(&raw))
                .ok_or_else(|| std::io::Error::other("malformed HTTP response"));
        }
        raw.extend_from_slice(&buffer[..read]);
    }
}

/// A complete response framed by Content-Length, if `raw` holds one.
fn parse_response(raw: &[u8]) -> Option<(u16, String)> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    let length: usize = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("content-length")
            .then(|| value.trim().parse().ok())?
    })?;
    (body.len() >= length).then(|| (status, body[..length].to_owned()))
}

/// A response whose body runs to the end of the connection.
fn parse_unframed(raw: &[u8]) -> Option<(u16, String)> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_owned()))
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_and_body() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nOk.\n";
        assert_eq!(parse_response(raw), Some((200, "Ok.\n".to_owned())));
        assert_eq!(
            parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nOk.\n"),
            None
        );
        assert_eq!(parse_response(b"garbage"), None);
        assert_eq!(
            parse_unframed(b"HTTP/1.0 404 Not Found\r\n\r\nnope"),
            Some((404, "nope".to_owned()))
        );
    }

    #[test]
    fn a_free_port_is_closed() {
        let port = free_port().expect("port");
        assert!(!port_open(port));
    }
}
