//! `specscope ui-bench`: what the screen costs. The same requests decoded headless and
//! through the live app drawing into a 200×60 test terminal (all of the app but the
//! terminal's own output), side by side in one process; frame times; and how long keys
//! sent while decoding take to reach the screen.

use super::progress::Progress;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Result};
use clap::Args;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::{Backend, ClearType, TestBackend, WindowSize};
use ratatui::buffer::Cell as BufCell;
use ratatui::layout::{Position, Size};
use ratatui::Terminal;
use specscope::files;

use specscope::bench::prompts::per_family;
use specscope::engine::cost::Pricing;
use specscope::engine::options::DecodeOptions;
use specscope::engine::{DecodeEvent, EngineHandle, NullSink, Submit, Timed};
use specscope::model::ChatMessage;
use specscope::trace::{read_trace, TraceEvent};
use specscope::tui::app::{run_live, Live, Player, Screen, TermInput, Ui};
use specscope::tui::keymap::Keymap;
use specscope::tui::render;
use specscope::tui::state::State;
use specscope::tui::theme::Theme;

use super::decode::DecodeArgs;
use super::{ModelArgs, PromptFileArgs};

#[derive(Debug, Clone, Args)]
pub struct UiBenchArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub prompts: PromptFileArgs,
    #[command(flatten)]
    pub decode: DecodeArgs,
    /// Terminal width for the frame measurements (20 to 1000 columns: a screen).
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u16).range(20..=1000))]
    pub width: u16,
    /// Terminal height (10 to 500 lines).
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u16).range(10..=500))]
    pub height: u16,
    /// Passes over the prompts (each request runs headless, then with the screen).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..))]
    pub repeats: u16,
    /// Also record the session, as `--record` does (its cost is then included).
    #[arg(long)]
    pub record: bool,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

fn pct(mut v: Vec<f64>, p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Mean, 99th percentile and maximum.
fn spread(v: &[f64]) -> files::Spread {
    files::Spread {
        mean: mean(v),
        p99: pct(v.to_vec(), 0.99),
        max: pct(v.to_vec(), 1.0),
    }
}

/// A backend that notes when each frame starts (its first size query) and ends (its
/// flush): the app measured from outside, nothing in the app's own types.
struct TimedBackend<B: Backend> {
    inner: B,
    start: Cell<Option<Instant>>,
    frames: Rc<RefCell<Vec<(Instant, Instant)>>>,
}

impl<B: Backend> Backend for TimedBackend<B> {
    type Error = B::Error;
    fn draw<'a, I>(&mut self, content: I) -> Result<(), Self::Error>
    where
        I: Iterator<Item = (u16, u16, &'a BufCell)>,
    {
        self.inner.draw(content)
    }
    fn hide_cursor(&mut self) -> Result<(), Self::Error> {
        self.inner.hide_cursor()
    }
    fn show_cursor(&mut self) -> Result<(), Self::Error> {
        self.inner.show_cursor()
    }
    fn get_cursor_position(&mut self) -> Result<Position, Self::Error> {
        self.inner.get_cursor_position()
    }
    fn set_cursor_position<P: Into<Position>>(&mut self, p: P) -> Result<(), Self::Error> {
        self.inner.set_cursor_position(p)
    }
    fn clear(&mut self) -> Result<(), Self::Error> {
        self.inner.clear()
    }
    fn clear_region(&mut self, t: ClearType) -> Result<(), Self::Error> {
        self.inner.clear_region(t)
    }
    fn size(&self) -> Result<Size, Self::Error> {
        if self.start.get().is_none() {
            self.start.set(Some(Instant::now()));
        }
        self.inner.size()
    }
    fn window_size(&mut self) -> Result<WindowSize, Self::Error> {
        self.inner.window_size()
    }
    fn flush(&mut self) -> Result<(), Self::Error> {
        let r = self.inner.flush();
        if let Some(start) = self.start.take() {
            self.frames.borrow_mut().push((start, Instant::now()));
        }
        r
    }
}

/// One request from the engine's `request_started` to its `request_finished`.
#[derive(Debug, Clone)]
struct RequestTiming {
    started: Instant,
    finished: Instant,
    new_tokens: usize,
    text: String,
}

/// Passes the engine's events on to the app, noting each request's engine stamps: the
/// event stream observed from outside.
fn observe(
    mut from: tokio::sync::mpsc::UnboundedReceiver<Timed>,
    log: Arc<Mutex<Vec<RequestTiming>>>,
) -> tokio::sync::mpsc::UnboundedReceiver<Timed> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        let mut started = std::collections::HashMap::new();
        while let Some(e) = from.blocking_recv() {
            match &e.event {
                DecodeEvent::RequestStarted { req, .. } => {
                    started.insert(*req, e.at);
                }
                DecodeEvent::RequestFinished {
                    req, text, stats, ..
                } => {
                    let start = started.remove(req).unwrap_or(e.at);
                    if let Ok(mut l) = log.lock() {
                        l.push(RequestTiming {
                            started: start,
                            finished: e.at,
                            new_tokens: stats.tally.new_tokens,
                            text: text.clone(),
                        });
                    }
                }
                _ => {}
            }
            if tx.send(e).is_err() {
                return;
            }
        }
    });
    rx
}

/// Requests run on each side before the timed passes.
const WARM_UP: usize = 1;

/// Decode seconds per side below which the throughput ratio is mostly the machine's
/// noise (a pass of a few short answers is a fraction of a second).
const RELIABLE_SECS: f64 = 5.0;

fn key(code: KeyCode, m: KeyModifiers) -> TermInput {
    TermInput::Key(KeyEvent::new(code, m))
}

/// The headless and the screen side of ui-bench: each request headless, then through
/// the live app; then a full screen drawn again and again; then the report.
pub fn run(args: UiBenchArgs) -> Result<()> {
    let options = args.decode.options()?;
    let pricing = args.decode.cost.pricing()?;
    let records = args.prompts.records()?;
    let loaded = args.model.load()?;
    let prompts: Vec<String> = per_family(&records, args.prompts.skip, args.prompts.limit)
        .into_iter()
        .map(|r| r.prompt.clone())
        .collect();
    let encode = |p: &str| {
        loaded
            .tokenizer
            .encode_chat(&[ChatMessage::new("user", p)], false)
    };

    // Headless: the scheduler alone, no listener.
    let mut sched = loaded.scheduler(&pricing);
    let mut headless = |p: &str| -> Result<(f64, String)> {
        let prompt = encode(p)?;
        let start = Instant::now();
        sched.submit(
            Submit {
                prompt,
                options: options.clone(),
                family: None,
            },
            &mut NullSink,
        )?;
        sched.run_to_completion(&mut NullSink)?;
        let secs = start.elapsed().as_secs_f64();
        let text = sched.take_finished().into_iter().map(|f| f.text).collect();
        Ok((secs, text))
    };

    let app = App::start(&args, &loaded, &options, &pricing)?;
    let repeats = usize::from(args.repeats);
    let driven = drive(&app, &prompts, repeats, &mut headless)?;
    let total = (repeats + 1) * prompts.len();
    app.tx
        .send(key(KeyCode::Char('q'), KeyModifiers::CONTROL))?;
    let frames = app
        .thread
        .join()
        .map_err(|_| anyhow::anyhow!("the app thread panicked"))??;
    if let Some(rec) = &app.record {
        check_recording(rec, total)?;
    }
    let timings: Vec<RequestTiming> = app
        .log
        .lock()
        .map(|l| l.iter().skip(WARM_UP).cloned().collect())
        .unwrap_or_default();
    let static_frames = demo_frames(&options, args.width, args.height)?;
    report(&args, &prompts, &driven, &timings, &frames, &static_frames)
}

/// The live app in a test terminal, driven by keys: its key channel, its thread (which
/// returns each frame's start and end), the requests it finished, and its recording.
struct App {
    tx: tokio::sync::mpsc::UnboundedSender<TermInput>,
    thread: std::thread::JoinHandle<Result<Vec<(Instant, Instant)>>>,
    log: Arc<Mutex<Vec<RequestTiming>>>,
    record: Option<std::path::PathBuf>,
}

impl App {
    fn start(
        args: &UiBenchArgs,
        loaded: &super::Loaded,
        options: &DecodeOptions,
        pricing: &Pricing,
    ) -> Result<Self> {
        let record = args.record.then(|| {
            std::env::temp_dir().join(format!("specscope-ui-bench-{}.jsonl", std::process::id()))
        });
        let log = Arc::new(Mutex::new(Vec::new()));
        let (handle, events) = EngineHandle::spawn(loaded.scheduler(pricing));
        let live = Live {
            handle,
            events: observe(events, log.clone()),
            tokenizer: loaded.tokenizer.clone(),
            context: loaded.model.config().max_position_embeddings,
            header: loaded.trace_header(options, pricing),
            record: record.clone(),
        };
        let app_options = options.clone();
        let (w, h) = (args.width, args.height);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let thread = std::thread::spawn(move || -> Result<Vec<(Instant, Instant)>> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let frames = Rc::new(RefCell::new(Vec::new()));
            let backend = TimedBackend {
                inner: TestBackend::new(w, h),
                start: Cell::new(None),
                frames: frames.clone(),
            };
            let mut screen = Screen::new(Terminal::new(backend)?, false);
            let ui = Ui {
                theme: Theme::dark(),
                keymap: Keymap::builtin(),
                warnings: Vec::new(),
            };
            // Full speed: the screen's cost, not slow motion's.
            let mut s = State::new("bench", "cpu", app_options);
            rt.block_on(run_live(&mut screen, &mut rx, live, &ui, &mut s))?;
            let frames = frames.borrow().clone();
            Ok(frames)
        });
        Ok(Self {
            tx,
            thread,
            log,
            record,
        })
    }

    /// Types `p` as a person would, into a cleared chat (each prompt alone, as
    /// headless).
    fn ask(&self, p: &str) -> Result<()> {
        self.tx
            .send(key(KeyCode::Char('l'), KeyModifiers::CONTROL))?;
        for c in p.chars() {
            self.tx.send(key(KeyCode::Char(c), KeyModifiers::NONE))?;
        }
        self.tx.send(key(KeyCode::Enter, KeyModifiers::NONE))?;
        Ok(())
    }

    fn finished(&self) -> usize {
        self.log.lock().map(|l| l.len()).unwrap_or(0)
    }

    /// Waits until more than `done` requests have finished, calling `tick` every
    /// `every`.
    fn wait(
        &self,
        done: usize,
        every: Duration,
        mut tick: impl FnMut() -> Result<()>,
    ) -> Result<()> {
        let start = Instant::now();
        while self.finished() <= done {
            std::thread::sleep(every);
            tick()?;
            if start.elapsed() > Duration::from_secs(300) {
                bail!("request {} did not finish", done + 1);
            }
        }
        Ok(())
    }
}

/// What the passes measured on the headless side: seconds per pass, the texts, and
/// when each key was sent during the last pass.
struct Driven {
    head_secs: Vec<f64>,
    head_texts: Vec<String>,
    sent: Vec<Instant>,
}

/// Each request headless, then the same request through the screen, back to back:
/// the machine's drift hits both sides alike. The `repeats` passes measure a person
/// watching; one more pass has keys pressed every 40 ms while decoding, for the key
/// latency (its throughput is reported apart). One warm-up request each side comes
/// first, not counted: the first request pays for the allocator and the thread pool.
fn drive(
    app: &App,
    prompts: &[String],
    repeats: usize,
    headless: &mut dyn FnMut(&str) -> Result<(f64, String)>,
) -> Result<Driven> {
    let passes = repeats + 1;
    let mut d = Driven {
        head_secs: vec![0.0; passes],
        head_texts: Vec::new(),
        sent: Vec::new(),
    };
    let mut progress = Progress::new("ui-bench", (passes * prompts.len()) as u64);
    if let Some(p) = prompts.first() {
        headless(p)?;
        app.ask(p)?;
        app.wait(WARM_UP - 1, Duration::from_millis(20), || Ok(()))?;
    }
    for rep in 0..passes {
        let keys = rep == repeats;
        for (i, p) in prompts.iter().enumerate() {
            let (secs, text) = headless(p)?;
            d.head_secs[rep] += secs;
            d.head_texts.push(text);
            app.ask(p)?;
            let done = WARM_UP + rep * prompts.len() + i;
            let sent = &mut d.sent;
            app.wait(done, Duration::from_millis(40), || {
                if keys {
                    // A key while decoding: select the next position in the round pane.
                    sent.push(Instant::now());
                    app.tx.send(key(KeyCode::Right, KeyModifiers::SHIFT))?;
                }
                Ok(())
            })?;
            progress.set(done as u64 + 1, "requests (headless, then with the screen)");
        }
    }
    progress.finish("done");
    Ok(d)
}

/// The recording holds every request the screen finished.
fn check_recording(rec: &std::path::Path, total: usize) -> Result<()> {
    let trace = read_trace(rec)?;
    let _ = std::fs::remove_file(rec);
    let recorded = trace
        .events
        .iter()
        .filter(|e| {
            matches!(
                e.event,
                TraceEvent::Decode(DecodeEvent::RequestFinished { .. })
            )
        })
        .count();
    ensure!(
        recorded == total + WARM_UP,
        "the recording holds {recorded} finished requests, not {}",
        total + WARM_UP
    );
    Ok(())
}

/// A full screen of the demo recording drawn 300 times: each frame's ms.
fn demo_frames(options: &DecodeOptions, w: u16, h: u16) -> Result<Vec<f64>> {
    let demo = specscope::model::source::bundled_dir()
        .parent()
        .map(|p| p.join("demo.jsonl"))
        .unwrap_or_default();
    let demo_trace = read_trace(&demo)?;
    let n_events = demo_trace.events.len();
    let mut s = State::new("demo", "cpu", options.clone());
    let mut player = Player::new(demo_trace, "demo".into());
    player.advance(&mut s, 1e9);
    debug_assert_eq!(player.pos, n_events);
    let mut term = Terminal::new(TestBackend::new(w, h))?;
    let (theme, keys) = (Theme::dark(), Keymap::builtin());
    let mut static_frames = Vec::new();
    for _ in 0..300 {
        let t = Instant::now();
        term.draw(|f| render::draw(f, &s, &theme, &keys))?;
        static_frames.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(static_frames)
}

/// The ratios, frame times and key latencies, as JSON or lines.
fn report(
    args: &UiBenchArgs,
    prompts: &[String],
    d: &Driven,
    timings: &[RequestTiming],
    frames: &[(Instant, Instant)],
    static_frames: &[f64],
) -> Result<()> {
    let repeats = usize::from(args.repeats);
    let passes = repeats + 1;
    let total = passes * prompts.len();
    let (w, h) = (args.width, args.height);
    let head_secs = &d.head_secs;
    let mut screen_secs = vec![0.0; passes];
    for (i, r) in timings.iter().enumerate() {
        screen_secs[(i / prompts.len()).min(passes - 1)] += (r.finished - r.started).as_secs_f64();
    }
    let screen_texts: Vec<String> = timings.iter().map(|r| r.text.clone()).collect();
    let same = screen_texts == d.head_texts;
    let tokens: usize = timings.iter().map(|r| r.new_tokens).sum();
    let ratios: Vec<f64> = head_secs
        .iter()
        .zip(&screen_secs)
        .map(|(h, s)| h / s)
        .collect();
    let (watch_head, watch_screen) = (
        head_secs[..repeats].iter().sum::<f64>(),
        screen_secs[..repeats].iter().sum::<f64>(),
    );
    let ratio = watch_head / watch_screen;
    let key_ratio = ratios[repeats];

    let live_frames: Vec<f64> = frames
        .iter()
        .map(|(a, b)| (*b - *a).as_secs_f64() * 1e3)
        .collect();
    let latencies: Vec<f64> = d
        .sent
        .iter()
        .filter_map(|t| {
            frames
                .iter()
                .find(|(start, _)| start >= t)
                .map(|(_, end)| (*end - *t).as_secs_f64() * 1e3)
        })
        .collect();
    let out = files::UiBenchDoc {
        format: files::Format::new("ui-bench", files::UI_BENCH_VERSION),
        requests: total,
        recording: args.record,
        repeats,
        tokens,
        identical_output: same,
        headless_secs: head_secs.clone(),
        screen_secs: screen_secs.clone(),
        throughput_ratio_screen_vs_headless: ratio,
        ratio_reliable: watch_head >= RELIABLE_SECS,
        ratio_per_pass: ratios[..repeats].to_vec(),
        throughput_ratio_with_keys_pressed: key_ratio,
        frames_live: live_frames.len(),
        frame_ms_live: spread(&live_frames),
        frame_ms_demo_full: spread(static_frames),
        key_to_frame_ms: files::KeyLatency {
            keys: latencies.len(),
            ms: spread(&latencies),
        },
        size: format!("{w}x{h}"),
    };
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    outln!(
        "requests {total} ({} prompts × {passes} passes, each headless then with the screen{})  tokens {tokens}  same text as headless: {same}",
        prompts.len(),
        if args.record { ", recording" } else { "" }
    );
    let per: Vec<String> = ratios[..repeats]
        .iter()
        .map(|r| format!("{:.1}%", 100.0 * r))
        .collect();
    outln!(
        "decode time  headless {watch_head:.2} s  with screen {watch_screen:.2} s  → screen throughput {:.1}% of headless (per pass: {}); with keys pressed every 40 ms: {:.1}%",
        100.0 * ratio,
        per.join(", "),
        100.0 * key_ratio
    );
    if watch_head < RELIABLE_SECS {
        outln!(
            "  (only {watch_head:.1} s of decoding per side: these ratios are mostly noise, \
             and above 100% only by it; --limit 10 decodes enough to compare)"
        );
    }
    outln!(
        "frames at {w}x{h}: live {} drawn, mean {:.2} ms, p99 {:.2} ms; full demo screen mean {:.2} ms, p99 {:.2} ms",
        out.frames_live,
        out.frame_ms_live.mean,
        out.frame_ms_live.p99,
        out.frame_ms_demo_full.mean,
        out.frame_ms_demo_full.p99,
    );
    outln!(
        "keys while decoding: {} sent, key → frame mean {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        out.key_to_frame_ms.keys,
        out.key_to_frame_ms.ms.mean,
        out.key_to_frame_ms.ms.p99,
        out.key_to_frame_ms.ms.max,
    );
    Ok(())
}
