//! The engine on its own thread: `EngineCommand` in, `DecodeEvent` out. Commands are
//! handled between rounds, so a cancel answers within one round and every cache stays
//! consistent.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

use super::events::{DecodeEvent, EventSink, RequestId};
use super::options::DecodeOptions;
use super::scheduler::{Scheduler, Submit};

/// Everything the engine can be asked to do.
#[derive(Debug)]
pub enum EngineCommand {
    /// Queue a request under an id chosen by the handle.
    Submit { id: RequestId, submit: Box<Submit> },
    /// Stop a request between rounds.
    Cancel(RequestId),
    /// Stop running rounds until resumed or stepped.
    Pause,
    /// Run rounds again.
    Resume,
    /// Run exactly one round, then stay paused.
    Step,
    /// New options for the live requests (their token budget and sampling stay).
    SetOptions(Box<DecodeOptions>),
    /// Wait this long between rounds (slow motion for people watching; zero: none).
    SetDelay(std::time::Duration),
    /// End the engine thread.
    Shutdown,
}

/// An event with the moment the engine emitted it (a listener may read it later).
#[derive(Debug, Clone)]
pub struct Timed {
    pub at: Instant,
    pub event: DecodeEvent,
}

/// Sends events to the channel; computes per-position detail only when asked.
struct ChannelSink {
    tx: UnboundedSender<Timed>,
    detail: Arc<AtomicBool>,
}

impl EventSink for ChannelSink {
    fn detail(&self) -> bool {
        self.detail.load(Ordering::Relaxed) && !self.tx.is_closed()
    }
    fn emit(&mut self, e: DecodeEvent) {
        let _ = self.tx.send(Timed {
            at: Instant::now(),
            event: e,
        });
    }
}

/// The caller's side of a running engine.
pub struct EngineHandle {
    tx: Sender<EngineCommand>,
    next_id: AtomicU64,
    detail: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EngineHandle {
    /// Starts the engine thread; events arrive on the returned receiver.
    pub fn spawn(scheduler: Scheduler) -> (Self, UnboundedReceiver<Timed>) {
        let (tx, rx) = mpsc::channel();
        let (etx, erx) = unbounded_channel();
        let detail = Arc::new(AtomicBool::new(false));
        let sink = ChannelSink {
            tx: etx,
            detail: detail.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("specscope-engine".into())
            .spawn(move || run(scheduler, rx, sink))
            .ok();
        (
            Self {
                tx,
                next_id: AtomicU64::new(1),
                detail,
                thread,
            },
            erx,
        )
    }

    /// Queues a request and returns its id at once.
    pub fn submit(&self, submit: Submit) -> RequestId {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.send(EngineCommand::Submit {
            id,
            submit: Box::new(submit),
        });
        id
    }

    pub fn send(&self, cmd: EngineCommand) {
        let _ = self.tx.send(cmd);
    }

    /// Ask for per-position top-k in draft and verify events (the screen's inspector).
    pub fn set_detail(&self, on: bool) {
        self.detail.store(on, Ordering::Relaxed);
    }

    /// Ends the engine and waits for its thread.
    pub fn shutdown(mut self) {
        self.send(EngineCommand::Shutdown);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for EngineHandle {
    fn drop(&mut self) {
        let _ = self.tx.send(EngineCommand::Shutdown);
    }
}

fn run(mut sched: Scheduler, rx: Receiver<EngineCommand>, mut sink: ChannelSink) {
    let mut paused = false;
    let mut step_once = false;
    let mut delay = Duration::ZERO;
    let mut next_round = Instant::now();
    loop {
        let idle = sched.active() == 0 || (paused && !step_once);
        let wait = next_round.saturating_duration_since(Instant::now());
        let cmd = if idle {
            match rx.recv() {
                Ok(c) => Some(c),
                Err(_) => return,
            }
        } else if !wait.is_zero() && !step_once {
            // Slow motion: commands still answer at once while the next round waits.
            match rx.recv_timeout(wait) {
                Ok(c) => Some(c),
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
        } else {
            match rx.try_recv() {
                Ok(c) => Some(c),
                Err(TryRecvError::Empty) => None,
                Err(TryRecvError::Disconnected) => return,
            }
        };
        if let Some(cmd) = cmd {
            match cmd {
                EngineCommand::Submit { id, submit } => {
                    if let Err(e) = sched.submit_with_id(id, *submit, &mut sink) {
                        sink.emit(DecodeEvent::Error {
                            req: Some(id),
                            message: format!("{e:#}"),
                        });
                    }
                }
                EngineCommand::Cancel(id) => {
                    sched.cancel(id, &mut sink);
                }
                EngineCommand::Pause => {
                    paused = true;
                    sink.emit(DecodeEvent::EngineState { paused });
                }
                EngineCommand::Resume => {
                    paused = false;
                    sink.emit(DecodeEvent::EngineState { paused });
                }
                EngineCommand::Step => step_once = true,
                EngineCommand::SetOptions(o) => {
                    if let Err(e) = sched.set_options(&o) {
                        sink.emit(DecodeEvent::Error {
                            req: None,
                            message: format!("{e:#}"),
                        });
                    }
                }
                EngineCommand::SetDelay(d) => {
                    delay = d;
                    next_round = Instant::now() + delay;
                }
                EngineCommand::Shutdown => return,
            }
            continue; // drain every pending command before the next round
        }
        if sched.active() > 0 && (!paused || step_once) {
            step_once = false;
            next_round = Instant::now() + delay;
            if let Err(e) = sched.step(&mut sink) {
                sink.emit(DecodeEvent::Error {
                    req: None,
                    message: format!("{e:#}"),
                });
                // A failed forward leaves caches unchanged; drop the live requests so the
                // engine does not spin on the same error.
                sched.cancel_all(&mut sink);
            }
        }
    }
}
