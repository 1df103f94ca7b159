//! The parent's side of one worker process: spawn, talk with a timeout,
//! notice death, kill. A worker is always reaped: nothing is left behind as
//! a zombie, whatever happened to it.

use std::collections::VecDeque;
use std::io::{BufReader, Read};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::protocol::{Request, Response, read_frame, write_frame};

/// How much of a worker's stderr is kept for error messages.
const STDERR_TAIL_BYTES: usize = 2048;

/// Why a request got no answer.
#[derive(Debug)]
pub(crate) enum Failure {
    /// No answer within the timeout; the worker was killed.
    Timeout,
    /// The worker died or broke the protocol; it was reaped.
    Died(String),
}

type Frame = std::io::Result<Option<(Response, Vec<u8>)>>;

/// A running worker.
pub(crate) struct WorkerProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    frames: Receiver<Frame>,
    stderr_tail: Arc<Mutex<VecDeque<u8>>>,
    threads: Vec<JoinHandle<()>>,
    /// The key hash of the task the worker is set up for.
    pub task: Option<String>,
    /// Candidates whose kernels this worker holds.
    pub held: Vec<u64>,
    /// Whether the worker is a debug build.
    pub debug_build: bool,
}

impl WorkerProcess {
    /// Starts `program measure-worker` and waits up to `timeout` for its hello.
    pub fn spawn(program: &Path, timeout: Duration) -> Result<WorkerProcess, String> {
        // A process group of its own: Ctrl-C in a terminal stops the tuner
        // (which then finishes cleanly), not the workers mid-measurement.
        let mut child = Command::new(program)
            .arg("measure-worker")
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        let (stdin, stdout, stderr) =
            match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
                (Some(i), Some(o), Some(e)) => (i, o, e),
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err("the worker's pipes could not be opened".into());
                }
            };
        let (send, frames) = channel();
        let reader = std::thread::spawn(move || {
            let mut stdout = BufReader::new(stdout);
            loop {
                let frame = read_frame(&mut stdout);
                let end = !matches!(frame, Ok(Some(_)));
                if send.send(frame).is_err() || end {
                    return;
                }
            }
        });
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        let tail = stderr_tail.clone();
        let stderr_reader = std::thread::spawn(move || {
            let mut stderr = stderr;
            let mut chunk = [0u8; 512];
            while let Ok(n @ 1..) = stderr.read(&mut chunk) {
                if let Ok(mut tail) = tail.lock() {
                    tail.extend(&chunk[..n]);
                    let excess = tail.len().saturating_sub(STDERR_TAIL_BYTES);
                    tail.drain(..excess);
                }
            }
        });
        let mut worker = WorkerProcess {
            child,
            stdin: Some(stdin),
            frames,
            stderr_tail,
            threads: vec![reader, stderr_reader],
            task: None,
            held: Vec::new(),
            debug_build: false,
        };
        match worker.receive(timeout) {
            Ok((Response::Hello { debug_build, .. }, _)) => {
                worker.debug_build = debug_build;
                Ok(worker)
            }
            Ok((other, _)) => {
                worker.shut_down();
                Err(format!("it answered {other:?} instead of a hello"))
            }
            Err(Failure::Timeout) => Err(format!("no hello within {timeout:?}")),
            Err(Failure::Died(why)) => Err(why),
        }
    }

    /// The worker's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `request` and waits up to `timeout` for the answer. On failure
    /// the worker is dead (killed on timeout) and must not be used again.
    pub fn request(
        &mut self,
        request: &Request,
        timeout: Duration,
    ) -> Result<(Response, Vec<u8>), Failure> {
        let sent = match self.stdin.as_mut() {
            Some(stdin) => write_frame(stdin, request, &[]),
            None => Err(std::io::Error::other("the worker's stdin is closed")),
        };
        if sent.is_err() {
            // A broken pipe: the worker is gone; the reader reports how.
            return match self.receive(Duration::from_secs(5)) {
                Err(failure) => Err(failure),
                Ok(_) => Err(self.died("stopped reading requests")),
            };
        }
        self.receive(timeout)
    }

    fn receive(&mut self, timeout: Duration) -> Result<(Response, Vec<u8>), Failure> {
        match self.frames.recv_timeout(timeout) {
            Ok(Ok(Some(frame))) => Ok(frame),
            Ok(Ok(None)) | Err(RecvTimeoutError::Disconnected) => Err(self.died("exited")),
            Ok(Err(e)) => Err(self.died(&format!("broke the protocol ({e})"))),
            Err(RecvTimeoutError::Timeout) => {
                self.shut_down();
                Err(Failure::Timeout)
            }
        }
    }

    /// Reaps the worker and describes its end.
    fn died(&mut self, what: &str) -> Failure {
        let status = self.shut_down();
        let tail = self
            .stderr_tail
            .lock()
            .map(|t| String::from_utf8_lossy(&t.iter().copied().collect::<Vec<u8>>()).into_owned())
            .unwrap_or_default();
        let tail = tail.trim();
        let mut msg = format!("the worker {what}: {}", describe(status));
        if !tail.is_empty() {
            msg.push_str("; its stderr ends with: ");
            msg.push_str(tail);
        }
        Failure::Died(msg)
    }

    /// Kills (if still running) and reaps the worker, and joins its readers.
    fn shut_down(&mut self) -> Option<ExitStatus> {
        self.stdin = None;
        let status = match self.child.try_wait() {
            Ok(Some(status)) => Some(status),
            _ => {
                let _ = self.child.kill();
                self.child.wait().ok()
            }
        };
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
        status
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// "killed by signal 11 (SIGSEGV)", "exit code 1".
fn describe(status: Option<ExitStatus>) -> String {
    let Some(status) = status else {
        return "its exit status is unknown".into();
    };
    if let Some(signal) = status.signal() {
        let name = match signal {
            4 => " (SIGILL)",
            6 => " (SIGABRT)",
            7 => " (SIGBUS)",
            8 => " (SIGFPE)",
            9 => " (SIGKILL)",
            11 => " (SIGSEGV)",
            15 => " (SIGTERM)",
            _ => "",
        };
        return format!("killed by signal {signal}{name}");
    }
    match status.code() {
        Some(code) => format!("exit code {code}"),
        None => "an unknown exit status".into(),
    }
}
