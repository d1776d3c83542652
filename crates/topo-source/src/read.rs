//! The one bounded reader every source uses for files on disk.
//!
//! A file named by a snapshot or `--from` may be anything: a FIFO (opening or reading it
//! blocks forever), `/dev/zero` behind a symlink (never ends), a sparse file of gigabytes.
//! So every file is opened with `O_NONBLOCK` (a FIFO open returns at once), its type is taken
//! from the opened descriptor (no race with a rename), anything but a regular file is refused,
//! and at most `cap + 1` bytes are read: each file may hold what its kind can legitimately
//! hold and no more. Limits are listed in docs/input-limits.md.

use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How many bytes one kind of file may hold, and what to call that kind in errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cap {
    pub bytes: u64,
    pub what: &'static str,
}

/// sysfs attributes are one page (4 KiB) at most; node cpumaps of very large machines are
/// binary attributes that can exceed a page, so leave room.
pub const SYSFS: Cap = Cap {
    bytes: 64 << 10,
    what: "a sysfs or procfs attribute",
};
/// About 2 KiB per logical CPU: 8 MiB is over 4000 CPUs.
pub const CPUINFO: Cap = Cap {
    bytes: 8 << 20,
    what: "/proc/cpuinfo",
};
/// 38 KiB for an 8-GPU HGX; NVML pairs grow with the square of the GPU count, so 8 MiB
/// is over 100 GPUs in one host.
pub const NVML_JSON: Cap = Cap {
    bytes: 8 << 20,
    what: "nvml.json",
};
pub const META_JSON: Cap = Cap {
    bytes: 1 << 20,
    what: "meta.json",
};
/// An NCCL_DEBUG=INFO log or a matrix paste, read whole: a 512-rank INFO log is about
/// 100 MB, so 256 MiB leaves room without letting a file take the machine's memory.
pub const TEXT: Cap = Cap {
    bytes: 256 << 20,
    what: "a text source (NCCL log or nvidia-smi matrix)",
};
/// A PCI config space is 4 KiB (extended); a file claiming more is not one.
pub const PCI_CONFIG: Cap = Cap {
    bytes: 4096,
    what: "a PCI config space",
};
/// A compressed snapshot: real ones are a few KiB to a few hundred KiB.
pub const ARCHIVE: Cap = Cap {
    bytes: 64 << 20,
    what: "a snapshot archive",
};

/// Why a file was not read.
#[derive(Debug)]
pub enum ReadError {
    Io(io::Error),
    /// A FIFO, device, socket: reading it could block or never end.
    NotRegular(&'static str),
    IsDir,
    TooLarge(Cap),
    /// A symlink on the way leads outside the tree being read.
    Escapes,
    /// More than the tree's hop limit of symlinks on the way, or a loop.
    TooManyLinks,
    /// The tree's whole budget for resolving links is spent.
    TooMuchResolving,
    /// A stream (standard input, a FIFO) did not reach its end within the deadline: a
    /// writer that holds it open and sends nothing.
    TimedOut(Duration),
}

impl ReadError {
    /// Absent, as opposed to present and refused.
    pub fn is_not_found(&self) -> bool {
        matches!(self, ReadError::Io(e) if e.kind() == io::ErrorKind::NotFound)
    }

    /// The input is hostile or damaged (not merely missing or unreadable): a snapshot
    /// replay stops on it instead of warning.
    pub fn is_refusal(&self) -> bool {
        !matches!(self, ReadError::Io(_) | ReadError::IsDir)
    }
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> Self {
        ReadError::Io(e)
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io(e) => f.write_str(&crate::error::io_reason(e)),
            ReadError::NotRegular(kind) => write!(f, "is a {kind}, not a regular file"),
            ReadError::IsDir => f.write_str("is a directory"),
            ReadError::TooLarge(cap) => write!(
                f,
                "larger than {}, more than {} can hold",
                human(cap.bytes),
                cap.what
            ),
            ReadError::Escapes => f.write_str("a symlink on the way leads outside the snapshot"),
            ReadError::TooManyLinks => {
                f.write_str("too many levels of symbolic links (a loop or a long chain)")
            }
            ReadError::TooMuchResolving => f.write_str("too many symlinks to resolve"),
            ReadError::TimedOut(d) => write!(
                f,
                "its writer did not finish within {} s (a pipe held open and silent); write it to a file and pass that",
                d.as_secs_f64()
            ),
        }
    }
}

impl std::error::Error for ReadError {}

/// `64 KiB`, `8 MiB`.
pub fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

fn kind_name(t: std::fs::FileType) -> &'static str {
    if t.is_fifo() {
        "fifo"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_socket() {
        "socket"
    } else {
        "special file"
    }
}

/// Opens `path` for reading without blocking and without following a final symlink when
/// `nofollow`; refuses anything but a regular file. Returns the file and its size.
pub fn open_regular(path: &Path, nofollow: bool) -> Result<(File, u64), ReadError> {
    let mut flags = libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
    if nofollow {
        flags |= libc::O_NOFOLLOW;
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            // O_NOFOLLOW on a symlink: the caller resolves links itself, so one here was
            // swapped in after it looked.
            Some(libc::ELOOP) => ReadError::TooManyLinks,
            _ => ReadError::Io(e),
        })?;
    let md = f.metadata()?;
    let t = md.file_type();
    if t.is_dir() {
        return Err(ReadError::IsDir);
    }
    if !t.is_file() {
        return Err(ReadError::NotRegular(kind_name(t)));
    }
    Ok((f, md.len()))
}

/// Reads at most `cap` bytes from `r`; more is an error, found after reading `cap + 1`.
pub fn read_capped(r: impl Read, cap: Cap) -> Result<Vec<u8>, ReadError> {
    let mut buf = Vec::new();
    r.take(cap.bytes + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > cap.bytes {
        return Err(ReadError::TooLarge(cap));
    }
    Ok(buf)
}

/// A whole regular file of at most `cap` bytes. sysfs and procfs report sizes of 4096 or
/// 0 whatever they hold, so the size only rejects early; the read itself is bounded.
pub fn file(path: &Path, cap: Cap) -> Result<Vec<u8>, ReadError> {
    file_opened(path, false, cap)
}

/// [`file`] without following a symlink at `path` itself: one there is
/// [`ReadError::TooManyLinks`] (a file of the user's own, such as a cache, that something
/// else may have replaced).
pub fn file_nofollow(path: &Path, cap: Cap) -> Result<Vec<u8>, ReadError> {
    file_opened(path, true, cap)
}

pub(crate) fn file_opened(path: &Path, nofollow: bool, cap: Cap) -> Result<Vec<u8>, ReadError> {
    let (f, len) = open_regular(path, nofollow)?;
    if len > cap.bytes {
        return Err(ReadError::TooLarge(cap));
    }
    read_capped(f, cap)
}

/// How long reading a stream (standard input, a FIFO) may take, in milliseconds: a writer
/// that holds a pipe open and sends nothing must not hold a command forever (issue 45). The
/// binary sets it from `TOPO_READ_TIMEOUT`; [`DEFAULT_STREAM_DEADLINE`] otherwise.
static STREAM_DEADLINE_MS: AtomicU64 = AtomicU64::new(DEFAULT_STREAM_DEADLINE.as_secs() * 1000);

/// Five minutes: `kubectl logs` of a large job streams in seconds.
pub const DEFAULT_STREAM_DEADLINE: Duration = Duration::from_secs(300);

/// Sets the deadline of every later [`stream`] read.
pub fn set_stream_deadline(d: Duration) {
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1);
    STREAM_DEADLINE_MS.store(ms, Ordering::Relaxed);
}

/// The deadline of a [`stream`] read.
pub fn stream_deadline() -> Duration {
    Duration::from_millis(STREAM_DEADLINE_MS.load(Ordering::Relaxed))
}

/// A text input that may be a pipe: `-` (standard input, refused when it is a terminal, which
/// would wait for typing) or a FIFO such as bash's `<(kubectl logs ...)`, else a regular file
/// as [`file`] reads it. The FIFO is opened non-blocking, so an open with no writer returns at
/// once and reads as empty; every read of a pipe waits in `poll` for what is left of
/// [`stream_deadline`], so a writer that holds it open and sends nothing is
/// [`ReadError::TimedOut`], never a hang; at most `cap` bytes either way.
pub fn stream(path: &Path, cap: Cap) -> Result<Vec<u8>, ReadError> {
    let limit = stream_deadline();
    let deadline = Instant::now() + limit;
    if is_stdin(path) {
        let stdin = io::stdin();
        if io::IsTerminal::is_terminal(&stdin) {
            return Err(ReadError::NotRegular("terminal (standard input)"));
        }
        let fd = stdin.as_fd().try_clone_to_owned()?;
        // Standard input's file description is shared with the caller's shell: its flags
        // stay as they are, and `poll` comes before each read instead.
        return read_until(File::from(fd), cap, (deadline, limit), false);
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)?;
    let t = f.metadata()?.file_type();
    if !t.is_fifo() {
        drop(f);
        return file(path, cap);
    }
    read_until(f, cap, (deadline, limit), true)
}

/// Reads `f` to its end, at most `cap` bytes, waiting for data only in `poll` and only until
/// `deadline` (`limit` after the start, for the error). `nonblocking`: `f` is `O_NONBLOCK`, so a read that would wait says so (a FIFO
/// whose writer never came reads as end of file at once, as a blocking read would).
fn read_until(
    mut f: File,
    cap: Cap,
    (deadline, limit): (Instant, Duration),
    nonblocking: bool,
) -> Result<Vec<u8>, ReadError> {
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    let mut ready = nonblocking;
    loop {
        if !ready {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ReadError::TimedOut(limit));
            }
            let ts = rustix::event::Timespec {
                tv_sec: left.as_secs() as i64,
                tv_nsec: i64::from(left.subsec_nanos()),
            };
            let mut fds = [rustix::event::PollFd::new(&f, rustix::event::PollFlags::IN)];
            match rustix::event::poll(&mut fds, Some(&ts)) {
                Ok(0) => return Err(ReadError::TimedOut(limit)),
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(io::Error::from(e).into()),
            }
        }
        match f.read(&mut chunk) {
            Ok(0) => return Ok(buf),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if buf.len() as u64 > cap.bytes {
                    return Err(ReadError::TooLarge(cap));
                }
                ready = nonblocking;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => ready = false,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// `-`: standard input.
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// `-`, or a path to the pipe standard input is (`/dev/stdin`, `/proc/self/fd/0`, the FIFO
/// itself): naming it twice would read it twice, the second time empty.
pub fn names_stdin(path: &Path) -> bool {
    if is_stdin(path) {
        return true;
    }
    let Ok(fd0) = rustix::fs::fstat(io::stdin().as_fd()) else {
        return false;
    };
    let kind = rustix::fs::FileType::from_raw_mode(fd0.st_mode);
    if !matches!(
        kind,
        rustix::fs::FileType::Fifo | rustix::fs::FileType::Socket
    ) {
        return false;
    }
    std::fs::metadata(path).is_ok_and(|m| m.dev() == fd0.st_dev && m.ino() == fd0.st_ino)
}

/// Standard input or a FIFO: read once, as a stream, never sniffed by reopening.
pub fn is_stream(path: &Path) -> bool {
    is_stdin(path) || std::fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_is_not_a_regular_file() {
        assert!(matches!(
            file(Path::new("/dev/zero"), SYSFS),
            Err(ReadError::NotRegular("character device"))
        ));
        assert!(matches!(file(Path::new("/"), SYSFS), Err(ReadError::IsDir)));
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = file(&fifo, SYSFS).unwrap_err();
        assert_eq!(e.to_string(), "is a fifo, not a regular file");
    }

    #[test]
    fn stops_at_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big");
        std::fs::write(&p, vec![b'x'; 70 << 10]).unwrap();
        let e = file(&p, SYSFS).unwrap_err();
        assert_eq!(
            e.to_string(),
            "larger than 64 KiB, more than a sysfs or procfs attribute can hold"
        );
        let e = read_capped(std::io::repeat(0), SYSFS).unwrap_err();
        assert!(matches!(e, ReadError::TooLarge(_)));
        std::fs::write(&p, b"ok\n").unwrap();
        assert_eq!(file(&p, SYSFS).unwrap(), b"ok\n");
    }
}
