//! The rendezvous wire format shared by the launchers and the TCP transport: length-prefixed
//! JSON frames, bounded, and the log line for a refused stranger.

use std::io::{Read, Write};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Result, RuntimeError};

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

/// Read one length-prefixed JSON frame (at most 16 MiB).
pub fn read_frame<T: DeserializeOwned>(r: &mut impl Read) -> Result<T> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)
        .map_err(|e| RuntimeError::io("read a rendezvous message", e))?;
    let len = u32::from_le_bytes(len) as usize;
    if len > 16 << 20 {
        return Err(RuntimeError::Rendezvous(format!(
            "message of {len} bytes is not from this job"
        )));
    }
    let mut b = vec![0u8; len];
    r.read_exact(&mut b)
        .map_err(|e| RuntimeError::io("read a rendezvous message", e))?;
    serde_json::from_slice(&b)
        .map_err(|e| RuntimeError::Rendezvous(format!("malformed message: {e}")))
}
