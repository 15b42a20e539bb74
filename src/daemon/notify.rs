//! systemd's readiness protocol (`sd_notify(3)`), by hand.
//!
//! A `Type=notify` unit passes `$NOTIFY_SOCKET`, a Unix datagram socket, and
//! waits for `READY=1` before it counts the service as started. We also send
//! `STATUS=…` (shown by `systemctl status`), `RELOADING=1`/`READY=1` around a
//! SIGHUP reload, `STOPPING=1` on shutdown and `WATCHDOG=1` keep-alives when the
//! unit sets `WatchdogSec=` (systemd passes `$WATCHDOG_USEC`, and `$WATCHDOG_PID`
//! naming the process it expects the pings from).
//!
//! The protocol is a few newline-separated `KEY=VALUE` assignments per
//! datagram, so a dependency would buy nothing. A socket path starting with
//! `@` is in Linux's abstract namespace. Without `$NOTIFY_SOCKET` (run by hand,
//! in tests) every call is a no-op. Failures to notify are logged, never fatal:
//! a daemon that cannot talk to systemd still serves its users.

use std::os::unix::net::UnixDatagram;
use std::time::Duration;

/// Where notifications go, if anywhere.
pub struct Notifier {
    /// The socket and its address; `None` when not started by systemd.
    target: Option<(UnixDatagram, Target)>,
    /// Half the watchdog interval, when systemd asked for keep-alives.
    watchdog_every: Option<Duration>,
}

enum Target {
    Path(std::path::PathBuf),
    #[cfg(target_os = "linux")]
    Abstract(Vec<u8>),
}

impl Notifier {
    /// Reads `$NOTIFY_SOCKET`, `$WATCHDOG_USEC` and `$WATCHDOG_PID`.
    pub fn from_env() -> Self {
        let socket = std::env::var_os("NOTIFY_SOCKET");
        let usec = std::env::var("WATCHDOG_USEC").ok();
        let pid = std::env::var("WATCHDOG_PID").ok();
        Notifier::from_values(socket.as_deref(), usec.as_deref(), pid.as_deref(), std::process::id())
    }

    /// As [`Notifier::from_env`], with the values passed in (for tests).
    pub fn from_values(
        socket: Option<&std::ffi::OsStr>,
        watchdog_usec: Option<&str>,
        watchdog_pid: Option<&str>,
        my_pid: u32,
    ) -> Self {
        let target = socket.and_then(|s| {
            use std::os::unix::ffi::OsStrExt;
            let bytes = s.as_bytes();
            let target = match bytes.first() {
                #[cfg(target_os = "linux")]
                Some(b'@') => Target::Abstract(bytes[1..].to_vec()),
                Some(b'/') => Target::Path(std::path::PathBuf::from(s)),
                _ => {
                    tracing::warn!("ignoring NOTIFY_SOCKET={s:?}: neither an absolute path nor @abstract");
                    return None;
                }
            };
            match UnixDatagram::unbound() {
                Ok(sock) => Some((sock, target)),
                Err(e) => {
                    tracing::warn!("cannot create a socket to notify systemd: {e}");
                    None
                }
            }
        });
        // The pings are for us only if systemd named our pid (or none).
        let for_us = match watchdog_pid {
            None => true,
            Some(p) => p.trim().parse::<u32>().ok() == Some(my_pid),
        };
        let watchdog_every = watchdog_usec
            .and_then(|u| u.trim().parse::<u64>().ok())
            .filter(|&u| u > 0 && for_us)
            .map(|u| Duration::from_micros(u / 2));
        Notifier { target, watchdog_every }
    }

    /// How often to send `WATCHDOG=1`, if systemd asked for it.
    pub fn watchdog_interval(&self) -> Option<Duration> {
        self.watchdog_every
    }

    pub fn ready(&self, status: &str) {
        self.send(&format!("READY=1\nSTATUS={}", one_line(status)));
    }

    pub fn status(&self, status: &str) {
        self.send(&format!("STATUS={}", one_line(status)));
    }

    /// A reload begins; `ready` must follow when it is done. systemd (≥ 253)
    /// wants a monotonic timestamp with it for `Type=notify-reload`; plain
    /// `Type=notify` ignores the extra field.
    pub fn reloading(&self) {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes into the timespec we own.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        let usec = ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1000;
        self.send(&format!("RELOADING=1\nMONOTONIC_USEC={usec}"));
    }

    pub fn stopping(&self, status: &str) {
        self.send(&format!("STOPPING=1\nSTATUS={}", one_line(status)));
    }

    pub fn watchdog(&self) {
        if self.watchdog_every.is_some() {
            self.send("WATCHDOG=1");
        }
    }

    fn send(&self, message: &str) {
        let Some((sock, target)) = &self.target else { return };
        let sent = match target {
            Target::Path(p) => sock.send_to(message.as_bytes(), p),
            #[cfg(target_os = "linux")]
            Target::Abstract(name) => {
                use std::os::linux::net::SocketAddrExt;
                std::os::unix::net::SocketAddr::from_abstract_name(name)
                    .and_then(|addr| sock.send_to_addr(message.as_bytes(), &addr))
            }
        };
        if let Err(e) = sent {
            tracing::warn!("notifying systemd failed: {e}");
        }
    }
}

/// STATUS= is one line; a newline would start a new assignment.
fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn received(sock: &UnixDatagram) -> String {
        let mut buf = [0u8; 512];
        let n = sock.recv(&mut buf).expect("a datagram");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    #[test]
    fn sends_ready_status_and_watchdog_to_a_path_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let listener = UnixDatagram::bind(&path).unwrap();
        let n = Notifier::from_values(Some(path.as_os_str()), Some("4000000"), None, 1);
        assert_eq!(n.watchdog_interval(), Some(Duration::from_secs(2)));
        n.ready("2 runs\nactive");
        assert_eq!(received(&listener), "READY=1\nSTATUS=2 runs active");
        n.watchdog();
        assert_eq!(received(&listener), "WATCHDOG=1");
        n.stopping("bye");
        assert_eq!(received(&listener), "STOPPING=1\nSTATUS=bye");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn sends_to_an_abstract_socket() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("cosched-notify-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let listener = UnixDatagram::bind_addr(&addr).unwrap();
        let socket = format!("@{name}");
        let n = Notifier::from_values(Some(std::ffi::OsStr::new(&socket)), None, None, 1);
        n.status("hello");
        assert_eq!(received(&listener), "STATUS=hello");
    }

    #[test]
    fn watchdog_is_off_without_usec_or_for_another_pid() {
        assert_eq!(Notifier::from_values(None, None, None, 7).watchdog_interval(), None);
        assert_eq!(Notifier::from_values(None, Some("1000"), Some("8"), 7).watchdog_interval(), None);
        assert_eq!(
            Notifier::from_values(None, Some("1000"), Some("7"), 7).watchdog_interval(),
            Some(Duration::from_micros(500))
        );
        // Without a socket nothing is sent and nothing fails.
        Notifier::from_values(None, None, None, 7).ready("x");
    }
}
