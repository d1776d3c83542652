//! Ordered parallel encoding: a document cut into jobs (a section, or a run of hosts of
//! one), encoded on every core and written in document order by the calling thread.
//!
//! At 32,768 GPUs `topo show --format json` writes 255 MiB; built and encoded on one core
//! the other core idled. Here workers take jobs in document order and the caller writes each
//! job's bytes as soon as every job before it is written. A worker does not start a job more
//! than `window` jobs ahead of the writer, so at most about `window` jobs' bytes wait in
//! memory however large the document is. Buffers the writer is done with go back to the
//! workers, so the allocator sees a handful of buffers, not one per job.

use std::any::Any;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// A job's result: its bytes, an I/O error, or the payload of a panic (raised again on the
/// writer's thread, so a bug in an encoder fails the command instead of hanging it).
type Done = Result<std::io::Result<Vec<u8>>, Box<dyn Any + Send>>;

struct State {
    /// The next job a worker may take.
    next: usize,
    /// Jobs the writer has taken (written or being written).
    written: usize,
    done: Vec<Option<Done>>,
    spare: Vec<Vec<u8>>,
    /// The writer stopped (its output failed): workers take no more jobs.
    stopped: bool,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Jobs run outside the lock and a panic in one is caught: no holder can poison it.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait<'a>(&self, g: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.changed.wait(g).unwrap_or_else(PoisonError::into_inner)
    }
}

/// Runs `encode(k, buf)` for every job `k` in `0..jobs` on up to `workers` threads (an
/// empty `buf` to append to) and hands the buffers to `write(k, bytes)` on this thread in
/// order of `k`; with no workers, on this thread alone. The first error, from either side,
/// ends the run and is returned.
pub fn run(
    jobs: usize,
    workers: usize,
    window: usize,
    encode: impl Fn(usize, &mut Vec<u8>) -> std::io::Result<()> + Sync,
    mut write: impl FnMut(usize, &[u8]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let shared = Shared {
        state: Mutex::new(State {
            next: 0,
            written: 0,
            done: (0..jobs).map(|_| None).collect(),
            spare: Vec::new(),
            stopped: false,
        }),
        changed: Condvar::new(),
    };
    if workers == 0 {
        // Too small a document to be worth threads: encode and write each job in turn.
        let mut buf = Vec::new();
        for k in 0..jobs {
            buf.clear();
            encode(k, &mut buf)?;
            write(k, &buf)?;
        }
        return Ok(());
    }
    let window = window.max(1);
    std::thread::scope(|s| {
        for _ in 0..workers.clamp(1, jobs.max(1)) {
            s.spawn(|| work(&shared, jobs, window, &encode));
        }
        // Also when `drain` unwinds: the scope joins the workers, which must not wait on.
        let _stop = Stop(&shared);
        drain(&shared, jobs, &mut write)
    })
}

/// Tells the workers to stop when the writer is done, by returning or by unwinding.
struct Stop<'a>(&'a Shared);

impl Drop for Stop<'_> {
    fn drop(&mut self) {
        self.0.lock().stopped = true;
        self.0.changed.notify_all();
    }
}

fn work(
    shared: &Shared,
    jobs: usize,
    window: usize,
    encode: &(impl Fn(usize, &mut Vec<u8>) -> std::io::Result<()> + Sync),
) {
    loop {
        let (k, mut buf) = {
            let mut g = shared.lock();
            while !g.stopped && g.next < jobs && g.next >= g.written + window {
                g = shared.wait(g);
            }
            if g.stopped || g.next >= jobs {
                return;
            }
            g.next += 1;
            (g.next - 1, g.spare.pop().unwrap_or_default())
        };
        buf.clear();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            encode(k, &mut buf).map(|()| buf)
        }));
        shared.lock().done[k] = Some(r);
        shared.changed.notify_all();
    }
}

/// The writer's side: each job's bytes in order, buffers handed back.
fn drain(
    shared: &Shared,
    jobs: usize,
    write: &mut impl FnMut(usize, &[u8]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    for k in 0..jobs {
        let done = {
            let mut g = shared.lock();
            loop {
                if let Some(d) = g.done[k].take() {
                    g.written = k + 1;
                    break d;
                }
                g = shared.wait(g);
            }
        };
        shared.changed.notify_all();
        let buf = match done {
            Ok(r) => r?,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        write(k, &buf)?;
        shared.lock().spare.push(buf);
    }
    Ok(())
}

/// Worker threads for a document of `jobs` jobs: one per core (the writer mostly waits on
/// the kernel), at most 8; none below `min_jobs` jobs, where starting threads and handing
/// each job over costs more than it saves (a millisecond on an 8-GPU `topo show`).
pub fn workers(jobs: usize, min_jobs: usize) -> usize {
    if jobs < min_jobs {
        return 0;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    cores.clamp(1, 8).min(jobs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn collect(jobs: usize, workers: usize, window: usize) -> String {
        let mut out = String::new();
        run(
            jobs,
            workers,
            window,
            |k, buf| {
                // Later jobs finish first: the writer must still keep the order.
                std::thread::sleep(std::time::Duration::from_micros(
                    ((jobs - k) % 7) as u64 * 50,
                ));
                buf.extend_from_slice(format!("{k};").as_bytes());
                Ok(())
            },
            |_, b| {
                out.push_str(std::str::from_utf8(b).unwrap());
                Ok(())
            },
        )
        .unwrap();
        out
    }

    #[test]
    fn bytes_come_out_in_job_order() {
        let want: String = (0..200).map(|k| format!("{k};")).collect();
        for (workers, window) in [(0, 1), (1, 1), (2, 1), (4, 3), (8, 64)] {
            assert_eq!(collect(200, workers, window), want, "{workers} {window}");
        }
        assert_eq!(collect(0, 2, 4), "");
    }

    #[test]
    fn workers_stay_within_the_window() {
        let written = AtomicUsize::new(0);
        let ahead = AtomicUsize::new(0);
        run(
            300,
            4,
            5,
            |k, _| {
                let w = written.load(Ordering::SeqCst);
                ahead.fetch_max(k.saturating_sub(w), Ordering::SeqCst);
                Ok(())
            },
            |k, _| {
                written.store(k + 1, Ordering::SeqCst);
                Ok(())
            },
        )
        .unwrap();
        // A job starts only while it is fewer than `window` jobs past the last one taken.
        assert!(ahead.load(Ordering::SeqCst) < 5 + 1);
    }

    #[test]
    fn an_encoder_error_ends_the_run() {
        let mut seen = vec![];
        let r = run(
            100,
            2,
            4,
            |k, buf| {
                if k == 10 {
                    return Err(std::io::Error::other("job 10 failed"));
                }
                buf.push(1);
                Ok(())
            },
            |k, _| {
                seen.push(k);
                Ok(())
            },
        );
        assert_eq!(r.unwrap_err().to_string(), "job 10 failed");
        assert_eq!(seen, (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn a_writer_error_stops_the_workers() {
        let started = AtomicUsize::new(0);
        let r = run(
            10_000,
            2,
            4,
            |_, _| {
                started.fetch_add(1, Ordering::SeqCst);
                Ok(())
            },
            |k, _| {
                if k == 3 {
                    Err(std::io::Error::new(
                        std::io::ErrorKind::BrokenPipe,
                        "closed",
                    ))
                } else {
                    Ok(())
                }
            },
        );
        assert_eq!(r.unwrap_err().kind(), std::io::ErrorKind::BrokenPipe);
        assert!(started.load(Ordering::SeqCst) < 20);
    }

    #[test]
    fn a_panicking_encoder_panics_the_writer_not_a_hang() {
        let r = std::panic::catch_unwind(|| {
            run(
                50,
                2,
                4,
                |k, _| {
                    assert!(k != 7, "encoder bug");
                    Ok(())
                },
                |_, _| Ok(()),
            )
        });
        assert!(r.is_err());
    }
}
