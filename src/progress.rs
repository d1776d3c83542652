//! A spinner on stderr for work that runs past about a second (a plan or show of thousands of
//! GPUs), only when stderr is a terminal: nothing is ever written to a pipe, a file or stdout.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

/// Shows `{spinner} {what} {elapsed}` once the work has taken a second; dropping it (the
/// work is done, or failed) stops and clears the line before anything else is printed.
pub struct Progress {
    done: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Progress {
    pub fn start(what: &str) -> Progress {
        if !std::io::stderr().is_terminal() {
            return Progress {
                done: None,
                thread: None,
            };
        }
        let (tx, rx) = mpsc::channel::<()>();
        let what = what.to_string();
        let thread = std::thread::spawn(move || {
            // Short runs end (the sender is dropped) before anything is drawn.
            if rx.recv_timeout(Duration::from_secs(1)) != Err(RecvTimeoutError::Timeout) {
                return;
            }
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} {msg} {elapsed}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.set_message(what);
            bar.enable_steady_tick(Duration::from_millis(120));
            let _ = rx.recv();
            bar.finish_and_clear();
        });
        Progress {
            done: Some(tx),
            thread: Some(thread),
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        drop(self.done.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
