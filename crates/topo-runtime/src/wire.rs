//! The rendezvous wire format shared by the launchers and the TCP transport: length-prefixed
//! JSON frames, bounded in size and read against one deadline, and the log line for a
//! refused stranger.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Result, RuntimeError};

/// The largest frame a peer may send (a job with its plan rows fits many times over).
pub const MAX_FRAME: usize = 16 << 20;

/// Log a refused connection (stderr; the job goes on).
pub fn log_refusal(from: &str, why: &str) {
    eprintln!("topo-runtime: refused a connection from {from}: {why}");
}

/// Write one length-prefixed JSON frame.
pub fn write_frame<T: Serialize>(w: &mut impl Write, v: &T) -> Result<()> {
    let b = serde_json::to_vec(v)
        .map_err(|e| RuntimeError::Rendezvous(format!("encode a message: {e}")))?;
    w.write_all(&(b.len() as u32).to_le_bytes())
        .and_then(|_| w.write_all(&b))
        .map_err(|e| RuntimeError::io("send a rendezvous message", e))
}

/// Read one length-prefixed JSON frame (at most [`MAX_FRAME`] bytes) from a reader whose own
/// timeout bounds the wait.
pub fn read_frame<T: DeserializeOwned>(r: &mut impl Read) -> Result<T> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)
        .map_err(|e| RuntimeError::io("read a rendezvous message", e))?;
    let len = frame_len(len, MAX_FRAME)?;
    let mut b = vec![0u8; len];
    r.read_exact(&mut b)
        .map_err(|e| RuntimeError::io("read a rendezvous message", e))?;
    decode(&b)
}

fn frame_len(len: [u8; 4], max: usize) -> Result<usize> {
    let len = u32::from_le_bytes(len) as usize;
    if len > max {
        return Err(RuntimeError::Rendezvous(format!(
            "message of {len} bytes (the limit is {max}) is not from this job"
        )));
    }
    Ok(len)
}

fn decode<T: DeserializeOwned>(b: &[u8]) -> Result<T> {
    serde_json::from_slice(b)
        .map_err(|e| RuntimeError::Rendezvous(format!("malformed message: {e}")))
}

/// A socket whose reads can be bounded by a timeout.
pub trait Timed: Read {
    fn set_timeout(&self, t: Duration) -> std::io::Result<()>;
}

impl Timed for TcpStream {
    fn set_timeout(&self, t: Duration) -> std::io::Result<()> {
        self.set_read_timeout(Some(t))
    }
}

impl Timed for UnixStream {
    fn set_timeout(&self, t: Duration) -> std::io::Result<()> {
        self.set_read_timeout(Some(t))
    }
}

impl Timed for &UnixStream {
    fn set_timeout(&self, t: Duration) -> std::io::Result<()> {
        self.set_read_timeout(Some(t))
    }
}

/// Read exactly `buf` before `deadline`: each read waits only for the time left, so a peer
/// that sends a byte at a time cannot stretch the wait past the deadline.
fn read_exact_by(s: &mut impl Timed, buf: &mut [u8], deadline: Instant) -> Result<()> {
    let mut got = 0;
    while got < buf.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(RuntimeError::Rendezvous(
                "a rendezvous message did not arrive in time".into(),
            ));
        }
        s.set_timeout(left)
            .map_err(|e| RuntimeError::io("socket timeout", e))?;
        match s.read(&mut buf[got..]) {
            Ok(0) => {
                return Err(RuntimeError::Rendezvous(
                    "the peer closed the connection mid-message".into(),
                ));
            }
            Ok(k) => got += k,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::Interrupted
                        | std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(RuntimeError::io("read a rendezvous message", e)),
        }
    }
    Ok(())
}

/// Read one frame of at most `max` bytes before `deadline` (the length is checked before
/// anything is allocated).
pub fn read_frame_by<T: DeserializeOwned>(
    s: &mut impl Timed,
    deadline: Instant,
    max: usize,
) -> Result<T> {
    let mut len = [0u8; 4];
    read_exact_by(s, &mut len, deadline)?;
    let len = frame_len(len, max.min(MAX_FRAME))?;
    let mut b = vec![0u8; len];
    read_exact_by(s, &mut b, deadline)?;
    decode(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dripping_peer_cannot_stretch_the_deadline() {
        let (mut a, b) = UnixStream::pair().unwrap();
        let drip = std::thread::spawn(move || {
            let mut b = b;
            // A length of 100, then one byte every 100 ms.
            let _ = b.write_all(&100u32.to_le_bytes());
            for _ in 0..40 {
                std::thread::sleep(Duration::from_millis(100));
                if b.write_all(b" ").is_err() {
                    return;
                }
            }
        });
        let r: Result<serde_json::Value> = read_frame_by(
            &mut a,
            Instant::now() + Duration::from_millis(500),
            MAX_FRAME,
        );
        drop(a);
        // Past its deadline the read says so; a read that waited for the dripper would end
        // with the peer closing mid-message instead.
        assert!(r.unwrap_err().to_string().contains("in time"));
        drip.join().unwrap();
    }

    #[test]
    fn oversize_lengths_are_refused_before_allocating() {
        let (mut a, mut b) = UnixStream::pair().unwrap();
        b.write_all(&u32::MAX.to_le_bytes()).unwrap();
        let r: Result<serde_json::Value> =
            read_frame_by(&mut a, Instant::now() + Duration::from_secs(2), 4096);
        assert!(r.unwrap_err().to_string().contains("the limit is 4096"));
        b.write_all(&u32::MAX.to_le_bytes()).unwrap();
        let r: Result<serde_json::Value> = read_frame(&mut a);
        assert!(r.is_err());
    }
}
