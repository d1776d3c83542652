//! Outputs written whole or not at all.
//!
//! `-o FILE` and `topo snapshot -o` write into a temporary file (or folder) created beside
//! the target with an unpredictable name and `O_EXCL` (tempfile), fsync it, then rename it
//! over the target. A failure at any point, or SIGINT/SIGTERM/SIGHUP, leaves the old target
//! untouched and removes the temporary; concurrent writers to one target each rename a
//! complete file, so the last one wins and nothing is interleaved. A symlink at the target is
//! replaced, never followed (types are read with `lstat`); a target that is a FIFO or device
//! (`/dev/null`, a terminal) owned by the caller or root is a stream, written in place, and
//! one owned by another user is refused. `/dev/stdout`, `/dev/stderr`, `/dev/fd/N` and
//! `/proc/self/fd/N` are the caller's own descriptors and are written through; `-` is stdout.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Temporary files and folders to remove if a signal ends the process.
static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Removes `p` on SIGINT/SIGTERM/SIGHUP until [`Guard`] drops.
struct Guard(PathBuf);

impl Guard {
    fn new(p: &Path) -> Guard {
        if let Ok(mut v) = PENDING.lock() {
            v.push(p.to_path_buf());
        }
        Guard(p.to_path_buf())
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Ok(mut v) = PENDING.lock() {
            v.retain(|p| p != &self.0);
        }
    }
}

fn remove_pending() {
    let paths = match PENDING.lock() {
        Ok(v) => v.clone(),
        Err(e) => e.into_inner().clone(),
    };
    remove_paths(&paths);
}

fn remove_paths(paths: &[PathBuf]) {
    for p in paths {
        // Twice: a writer may still be adding entries to a folder while it is removed.
        for _ in 0..2 {
            let _ = match std::fs::symlink_metadata(p) {
                Ok(m) if m.is_dir() => std::fs::remove_dir_all(p),
                Ok(_) => std::fs::remove_file(p),
                Err(_) => break,
            };
        }
    }
}

/// Routes SIGINT, SIGTERM and SIGHUP to a thread that removes pending temporaries, then dies
/// of the same signal (so the exit status still says which). A handler could not safely
/// remove a folder; a thread waiting in `sigwait` runs ordinary code. Call it first thing,
/// before any other thread exists, so every thread inherits the blocked mask.
pub fn install_signal_cleanup() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: sigset_t is plain data initialised by sigemptyset; the calls only change
        // this thread's signal mask.
        let set = unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                libc::sigaddset(&mut set, s);
            }
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            set
        };
        let spawned = std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || wait_and_die(set));
        if spawned.is_err() {
            // SAFETY: as above; without the waiter, signals must act as before.
            unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) };
        }
    });
}

fn wait_and_die(set: libc::sigset_t) {
    let mut sig: libc::c_int = 0;
    // SAFETY: `set` is a valid signal set and `sig` a valid out-pointer.
    if unsafe { libc::sigwait(&set, &mut sig) } != 0 {
        return;
    }
    remove_pending();
    // SAFETY: restores the default action, unblocks the signal in this thread only and
    // raises it here, which ends the process the way the signal would have.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
    }
}

/// Where the temporary goes: the target's own folder, so the rename is atomic.
fn parent_of(target: &Path) -> PathBuf {
    match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn temp_prefix(target: &Path) -> String {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!(".{name}.")
}

/// The process's own descriptors (`/dev/stdout`, `/dev/fd/3`, `/proc/self/fd/1`): links the
/// kernel makes to what the caller already holds, so following them is what `-o` means.
fn is_own_descriptor(target: &Path) -> bool {
    let s = target.as_os_str().as_encoded_bytes();
    let fd_number = |rest: &[u8]| !rest.is_empty() && rest.iter().all(u8::is_ascii_digit);
    matches!(s, b"/dev/stdout" | b"/dev/stderr")
        || s.strip_prefix(b"/dev/fd/").is_some_and(fd_number)
        || s.strip_prefix(b"/proc/self/fd/").is_some_and(fd_number)
}

/// What `-o` does with what is at the target, from `lstat`: a link is never followed (it is
/// replaced), except the caller's own descriptors. A FIFO or device (`/dev/null`, a terminal)
/// is written in place, but only if the caller or root owns it: in a shared sticky folder
/// another user's FIFO would hand them the output or block the writer forever.
fn is_stream(target: &Path) -> io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    if is_own_descriptor(target) {
        return Ok(true);
    }
    let Ok(m) = std::fs::symlink_metadata(target) else {
        return Ok(false);
    };
    let t = m.file_type();
    if !(t.is_fifo() || t.is_char_device() || t.is_block_device() || t.is_socket()) {
        return Ok(false);
    }
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if m.uid() != me && m.uid() != 0 {
        // Not PermissionDenied: callers print that kind as a bare "permission denied".
        return Err(io::Error::other(
            "a fifo or device owned by another user is there; pass a path of your own",
        ));
    }
    Ok(true)
}

/// Opens a stream target for appending: `-o /dev/stdout` with stdout redirected to a file
/// opens that file anew, at offset 0, and must not overwrite what the shell already wrote
/// there. Outside the own-descriptor links, `O_NOFOLLOW` keeps a link swapped in after the
/// check from being followed.
fn open_stream(target: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut o = std::fs::OpenOptions::new();
    o.append(true);
    if !is_own_descriptor(target) {
        o.custom_flags(libc::O_NOFOLLOW);
    }
    o.open(target)
}

/// Writes `target` whole or not at all; `fill` writes the content. `-` is stdout.
pub fn write_file(
    target: &Path,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    if target.as_os_str() == "-" {
        let mut out = io::stdout().lock();
        fill(&mut out)?;
        return out.flush();
    }
    if is_stream(target)? {
        let mut f = open_stream(target)?;
        fill(&mut f)?;
        return f.flush();
    }
    let existing = std::fs::symlink_metadata(target).ok();
    if existing.as_ref().is_some_and(|m| m.is_dir()) {
        return Err(io::Error::from_raw_os_error(libc::EISDIR));
    }
    // A file being replaced keeps its mode; a new one gets the usual 0644.
    let mode = existing
        .filter(|m| m.is_file())
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(0o644);
    let tmp = tempfile::Builder::new()
        .prefix(&temp_prefix(target))
        .suffix(".tmp")
        .tempfile_in(parent_of(target))?;
    let _guard = Guard::new(tmp.path());
    {
        let mut w = io::BufWriter::new(tmp.as_file());
        fill(&mut w)?;
        w.flush()?;
    }
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode))?;
    tmp.as_file().sync_all()?;
    tmp.persist(target).map_err(|e| e.error)?;
    sync_dir(&parent_of(target));
    Ok(())
}

/// Writes several regular files, all of them or none (`topo man --dir`): every target is
/// checked before anything is written (absent, a file, or a link, which is replaced; a FIFO,
/// device, socket or folder refuses the whole set, since a page set half written into a
/// folder is worse than none), every content goes to a temporary beside its target, and only
/// when all are written and synced are they renamed into place. `Err` names the target that
/// stopped it.
pub fn write_files(files: &[(PathBuf, String)]) -> Result<(), (PathBuf, io::Error)> {
    let mut modes = Vec::with_capacity(files.len());
    for (target, _) in files {
        let mode = match std::fs::symlink_metadata(target) {
            Ok(m) if m.is_file() => m.permissions().mode() & 0o7777,
            Ok(m) if m.is_symlink() => 0o644,
            Ok(m) if m.is_dir() => {
                return Err((target.clone(), io::Error::from_raw_os_error(libc::EISDIR)));
            }
            Ok(_) => {
                return Err((
                    target.clone(),
                    io::Error::other("a fifo, device or socket is there, not a file"),
                ));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => 0o644,
            Err(e) => return Err((target.clone(), e)),
        };
        modes.push(mode);
    }
    let mut temps = Vec::with_capacity(files.len());
    for ((target, text), mode) in files.iter().zip(modes) {
        let write = || -> io::Result<(tempfile::NamedTempFile, Guard)> {
            let tmp = tempfile::Builder::new()
                .prefix(&temp_prefix(target))
                .suffix(".tmp")
                .tempfile_in(parent_of(target))?;
            let guard = Guard::new(tmp.path());
            tmp.as_file().write_all(text.as_bytes())?;
            tmp.as_file()
                .set_permissions(std::fs::Permissions::from_mode(mode))?;
            tmp.as_file().sync_all()?;
            Ok((tmp, guard))
        };
        temps.push(write().map_err(|e| (target.clone(), e))?);
    }
    for ((target, _), (tmp, _guard)) in files.iter().zip(temps) {
        tmp.persist(target).map_err(|e| (target.clone(), e.error))?;
    }
    if let Some((first, _)) = files.first() {
        sync_dir(&parent_of(first));
    }
    Ok(())
}

/// Makes the rename itself durable; best effort (some file systems refuse fsync on folders).
fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Builds the folder `target` whole or not at all: `fill` writes into a fresh private folder
/// beside it, which is then renamed into place. `target` must be absent or an empty folder;
/// if another writer filled it first, this one fails and leaves it alone.
pub fn write_dir(target: &Path, fill: impl FnOnce(&Path) -> io::Result<()>) -> io::Result<()> {
    let tmp = tempfile::Builder::new()
        .prefix(&temp_prefix(target))
        .tempdir_in(parent_of(target))?;
    let _guard = Guard::new(tmp.path());
    fill(tmp.path())?;
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755))?;
    sync_tree(tmp.path());
    std::fs::rename(tmp.path(), target)?;
    let _ = tmp.keep();
    sync_dir(&parent_of(target));
    Ok(())
}

/// Flushes everything written under `dir` in one call (fsync on each of a thousand small
/// files would be slow).
fn sync_tree(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        // SAFETY: a valid, open descriptor.
        unsafe { libc::syncfs(std::os::fd::AsRawFd::as_raw_fd(&d)) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_temporaries_are_registered_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let (f, d) = (dir.path().join("t.tmp"), dir.path().join("snap"));
        std::fs::write(&f, "x").unwrap();
        std::fs::create_dir_all(d.join("sys/a")).unwrap();
        std::fs::write(d.join("sys/a/b"), "x").unwrap();
        {
            let _g = Guard::new(&d);
            assert!(PENDING.lock().unwrap().contains(&d));
        }
        assert!(!PENDING.lock().unwrap().contains(&d));
        remove_paths(&[f.clone(), d.clone()]);
        assert!(!f.exists() && !d.exists());
    }

    #[test]
    fn a_failed_write_leaves_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("out.txt");
        std::fs::write(&t, "old").unwrap();
        let e = write_file(&t, |w| {
            w.write_all(b"partial")?;
            Err(io::Error::from_raw_os_error(libc::ENOSPC))
        });
        assert!(e.is_err());
        assert_eq!(std::fs::read_to_string(&t).unwrap(), "old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        write_file(&t, |w| w.write_all(b"new")).unwrap();
        assert_eq!(std::fs::read_to_string(&t).unwrap(), "new");
    }

    #[test]
    fn a_symlink_at_the_target_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let t = dir.path().join("out.txt");
        std::os::unix::fs::symlink(&victim, &t).unwrap();
        write_file(&t, |w| w.write_all(b"new")).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert!(
            !std::fs::symlink_metadata(&t)
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    /// A sticky, world-writable folder holding a FIFO and a link to it, both made by
    /// another user (uid 65534) when run as root, by this user otherwise.
    fn sticky_with_fifo() -> (tempfile::TempDir, PathBuf, PathBuf) {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        let (fifo, link) = (dir.path().join("fifo"), dir.path().join("plan.txt"));
        let c = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0);
        std::os::unix::fs::symlink(&fifo, &link).unwrap();
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::lchown(&fifo, Some(65534), Some(65534)).unwrap();
            std::os::unix::fs::lchown(&link, Some(65534), Some(65534)).unwrap();
        }
        (dir, fifo, link)
    }

    #[test]
    fn a_link_to_a_fifo_is_replaced_not_followed() {
        let (_dir, fifo, link) = sticky_with_fifo();
        // Following the link would block here forever (no reader).
        write_file(&link, |w| w.write_all(b"plan")).unwrap();
        assert_eq!(std::fs::read_to_string(&link).unwrap(), "plan");
        assert!(std::fs::symlink_metadata(&link).unwrap().is_file());
        assert!(
            std::fs::symlink_metadata(&fifo)
                .unwrap()
                .file_type()
                .is_fifo()
        );
    }

    #[test]
    fn another_users_fifo_is_refused() {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let (_dir, fifo, _) = sticky_with_fifo();
        // Not as root the FIFO is this user's own, and writing it would wait for a reader.
        if root {
            let e = write_file(&fifo, |w| w.write_all(b"plan")).unwrap_err();
            assert!(e.to_string().contains("owned by another user"), "{e}");
            assert!(
                std::fs::symlink_metadata(&fifo)
                    .unwrap()
                    .file_type()
                    .is_fifo()
            );
        }
        assert!(is_own_descriptor(Path::new("/dev/stdout")));
        assert!(is_own_descriptor(Path::new("/proc/self/fd/12")));
        assert!(!is_own_descriptor(Path::new("/dev/fd/")));
        assert!(!is_own_descriptor(Path::new("/dev/shm/x")));
        assert!(is_stream(Path::new("/dev/null")).unwrap());
    }

    #[test]
    fn a_failed_folder_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("snap");
        let e = write_dir(&t, |p| {
            std::fs::write(p.join("a"), "x")?;
            Err(io::Error::from_raw_os_error(libc::ENOSPC))
        });
        assert!(e.is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        write_dir(&t, |p| std::fs::write(p.join("a"), "x")).unwrap();
        assert_eq!(std::fs::read_to_string(t.join("a")).unwrap(), "x");
        // A second writer finds it full and leaves it alone.
        assert!(write_dir(&t, |p| std::fs::write(p.join("b"), "y")).is_err());
        assert!(!t.join("b").exists());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
