//! `specscope plot`: the pictures decoding is read by, as SVG, from a bench JSON
//! (`bench --json`), a recording (`--record`, `trace record`) and a profile
//! (`profile --json`). Each figure states its source (command, model, machine, date)
//! in a caption line. `data` extracts the series, `draw` draws them.

pub mod data;
mod draw;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Deserialize;

pub use draw::Palette;

/// Figure 1's drawing (tokens advanced per round, a panel per histogram) for other
/// inputs: `trace compare` draws one panel per recording.
pub fn acceptance_figure(a: &data::Acceptance, caption: &str, pal: &Palette) -> Result<String> {
    draw::acceptance(a, caption, pal)
}

use crate::bench::sweep::BenchResult;
use crate::engine::cost::{CostModel, Profile};
use crate::engine::events::{round_records, RoundRecord};
use crate::trace::{read_trace, TraceEvent};

/// Where a figure's numbers come from, for its caption.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Source {
    /// The input file.
    pub file: String,
    pub command: Option<String>,
    pub model: String,
    pub machine: Option<String>,
    pub date: Option<String>,
}

impl Source {
    /// One line: the command (else the file), model, machine and date (control
    /// characters, which XML cannot hold, as spaces).
    pub fn caption(&self) -> String {
        let unknown = "not recorded";
        // A simulated backbone's figures say so on every figure.
        let model = if self.model.starts_with(crate::sim::PREFIX) {
            format!("{} ({})", self.model, crate::sim::LABEL)
        } else {
            self.model.clone()
        };
        let line = format!(
            "source: {} · model: {} · machine: {} · date: {}",
            self.command
                .as_deref()
                .map_or_else(|| self.file.clone(), |c| format!("`{c}`")),
            model,
            self.machine.as_deref().unwrap_or(unknown),
            self.date.as_deref().unwrap_or(unknown)
        );
        line.chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect()
    }
}

/// Bench results' numbers against what a bench can write, before anything is drawn or
/// sized with them: block sizes a configuration names, concurrency, the tallies'
/// counts (as a recording's are checked), histograms, rates and times.
fn check_results(results: &[BenchResult]) -> Result<()> {
    use crate::engine::options::MAX_BLOCK;
    // More rounds than any bench runs (a bench of 2^24 rounds takes days here).
    let most = 1usize << 32;
    for r in results {
        let what = format!("result `{}` at C = {}", r.config, r.concurrency);
        r.options
            .validate()
            .with_context(|| format!("{what}: its options"))?;
        anyhow::ensure!(
            (1..=1 << 20).contains(&r.concurrency),
            "{what}: concurrency {} is not a load a bench runs",
            r.concurrency
        );
        // Names are drawn as SVG text: no control character (XML has none).
        for name in std::iter::once(&r.config).chain(r.accept_hist_by_family.keys()) {
            anyhow::ensure!(
                !name.chars().any(char::is_control),
                "{what}: the name {name:?} holds a control character"
            );
        }
        // The name is what ran: `linear B=8` with B = 32 in its options is refused.
        anyhow::ensure!(
            r.named_config()
                .is_some_and(|c| c.options == r.options && c.batching == r.batching),
            "{what}: its options ({:?}, {}) and batching are not what the configuration `{}` runs in this specscope (the file was edited, or a preset changed since it ran: run the bench again)",
            r.options.mode,
            r.options.blocks,
            r.config
        );
        anyhow::ensure!(
            (r.concurrency..=crate::bench::prompts::MAX_REQUESTS).contains(&r.requests),
            "{what}: {} requests, not a number a bench runs at a load of {} (it runs at least the load and at most {})",
            r.requests,
            r.concurrency,
            crate::bench::prompts::MAX_REQUESTS
        );
        for (name, n, most) in [
            ("answers_checked", r.answers_checked, r.requests),
            ("answers_right", r.answers_right, r.answers_checked),
            ("ended_at_eos", r.ended_at_eos, r.requests),
        ] {
            anyhow::ensure!(
                n <= most,
                "{what}: `{name}` is {n}, more than the {most} it counts among"
            );
        }
        crate::trace::validate::tally(&r.tally, most, r.requests.max(1))
            .with_context(|| what.clone())?;
        // A round advances at most the largest block it could draft.
        let largest = match (&r.options.mode, &r.options.blocks) {
            (crate::engine::Mode::Ar, _) => 1,
            (_, crate::engine::Blocks::Fixed(b)) => *b,
            (_, crate::engine::Blocks::Adaptive(set)) => {
                set.iter().copied().max().unwrap_or(MAX_BLOCK)
            }
        };
        anyhow::ensure!(
            r.tally.accept_hist.len() <= largest + 1,
            "{what}: rounds advancing {} tokens, more than the block of {largest}",
            r.tally.accept_hist.len().saturating_sub(1)
        );
        let mut families = Vec::new();
        for (family, h) in &r.accept_hist_by_family {
            anyhow::ensure!(
                h.len() <= largest + 1 && h.iter().all(|&n| n <= most),
                "{what}: the histogram of `{family}` is not one a bench writes"
            );
            crate::engine::events::add_hist(&mut families, h);
        }
        // Equal up to trailing empty cells.
        let cells = |h: &[usize]| h.len() - h.iter().rev().take_while(|&&n| n == 0).count();
        let all = &r.tally.accept_hist;
        anyhow::ensure!(
            families[..cells(&families)] == all[..cells(all)],
            "{what}: the families' histograms do not add up to the tally's"
        );
        // What is derived from the counts is derived again, not trusted.
        let modeled = crate::engine::events::ratio(r.tally.new_tokens as f64, r.modeled_secs);
        for (name, x, want) in [
            ("tpf", r.tpf, r.tally.tpf()),
            ("mean_accept", r.mean_accept, r.tally.mean_accept()),
            ("modeled_tokens_per_sec", r.modeled_tokens_per_sec, modeled),
        ] {
            anyhow::ensure!(
                (x - want).abs() <= 1e-9 * want.abs().max(1.0),
                "{what}: `{name}` is {x}, but its counts give {want}"
            );
        }
        for (name, x) in [
            ("tokens_per_sec", r.tokens_per_sec),
            ("modeled_tokens_per_sec", r.modeled_tokens_per_sec),
            ("tpf", r.tpf),
            ("mean_accept", r.mean_accept),
            ("wall_secs", r.wall_secs),
            ("modeled_secs", r.modeled_secs),
            ("tokens_per_sec_per_request", r.tokens_per_sec_per_request),
        ] {
            anyhow::ensure!(
                x.is_finite() && (0.0..1e12).contains(&x),
                "{what}: `{name}` is {x}, not a rate or time a bench writes"
            );
        }
    }
    Ok(())
}

/// A bench JSON file.
#[derive(Debug, Clone)]
pub struct BenchFile {
    pub source: Source,
    pub results: Vec<BenchResult>,
}

/// A file's version alone.
#[derive(Deserialize)]
struct Version {
    #[serde(default)]
    format_version: Option<u32>,
}

fn source(file: &Path, model: String, p: Option<crate::Provenance>) -> Source {
    let p = p.unwrap_or_default();
    let some = |s: String| (!s.is_empty()).then_some(s);
    Source {
        file: file.display().to_string(),
        command: some(p.command),
        model,
        machine: some(p.machine),
        date: some(p.date),
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path, what: &str) -> Result<T> {
    parse_json(path, &read_text(path, what)?, what)
}

fn read_text(path: &Path, what: &str) -> Result<String> {
    let text = crate::read_bounded(path, 256 << 20)
        .with_context(|| format!("cannot read the {what} {}", path.display()))?;
    if text.trim().is_empty() {
        bail!("{}: empty file, not a {what}", path.display());
    }
    Ok(text)
}

fn parse_json<T: serde::de::DeserializeOwned>(path: &Path, text: &str, what: &str) -> Result<T> {
    serde_json::from_str(text).with_context(|| {
        format!(
            "{}: not a {what} (expected the JSON it writes)",
            path.display()
        )
    })
}

/// Reads a `specscope bench --json` file.
pub fn read_bench(path: &Path) -> Result<BenchFile> {
    let what = "bench result file (`specscope bench --json`)";
    // The version first: an older file fails on what it lacks, not on serde's words.
    let text = read_text(path, what)?;
    let v: Version = parse_json(path, &text, what)?;
    let want = crate::files::BENCH_VERSION;
    match v.format_version {
        Some(v) if v > want => bail!(
            "{}: bench format version {v} is newer than this specscope reads ({want})",
            path.display()
        ),
        Some(v) if v == want => {}
        v => bail!(
            "{}: bench format version {} does not record each configuration's options; \
             run the bench again to plot it (this specscope reads version {want})",
            path.display(),
            v.map_or("1 (unversioned)".to_string(), |v| v.to_string())
        ),
    }
    let b: crate::files::BenchDoc = parse_json(path, &text, what)?;
    if b.results.is_empty() {
        bail!("{}: the bench file holds no results", path.display());
    }
    check_results(&b.results).with_context(|| format!("{}", path.display()))?;
    Ok(BenchFile {
        source: source(path, b.model, b.provenance),
        results: b.results,
    })
}

/// A profile JSON file with its fitted cost model.
#[derive(Debug, Clone)]
pub struct ProfileFile {
    pub source: Source,
    pub profile: Profile,
    pub fitted: CostModel,
}

/// Reads a `specscope profile --json` file and fits it.
pub fn read_profile(path: &Path) -> Result<ProfileFile> {
    let p: crate::files::ProfileDoc = read_json(path, "profile (`specscope profile --json`)")?;
    let profile = p.profile();
    let fitted = CostModel::fit(&profile, &path.display().to_string())
        .with_context(|| format!("{}: cannot fit a cost model", path.display()))?;
    Ok(ProfileFile {
        source: source(path, p.model, p.provenance),
        profile,
        fitted,
    })
}

/// A recording's rounds.
#[derive(Debug, Clone)]
pub struct RecordingFile {
    pub source: Source,
    pub rounds: Vec<RoundRecord>,
    /// What the recorded requests started with (for titles).
    pub what: String,
    pub risk_threshold: f32,
}

/// Reads a recording.
pub fn read_recording(path: &Path) -> Result<RecordingFile> {
    let t = read_trace(path)?;
    let events: Vec<&crate::engine::DecodeEvent> = t
        .events
        .iter()
        .filter_map(|s| match &s.event {
            TraceEvent::Decode(e) => Some(e),
            TraceEvent::Session(_) => None,
        })
        .collect();
    let mut rounds = round_records(events);
    // An imported log's rounds, as far as it holds them.
    rounds.extend(crate::trace::nld::imported_rounds(&t).map(|r| r.record()));
    if rounds.is_empty() {
        bail!("{}: the recording holds no verified rounds", path.display());
    }
    let h = &t.header;
    let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
    Ok(RecordingFile {
        source: Source {
            file: path.display().to_string(),
            command: some(&h.command).or_else(|| Some(format!("recording {}", path.display()))),
            model: h.model.clone(),
            machine: some(&h.machine).or_else(|| Some(format!("device {}", h.device))),
            date: (h.created_unix > 0).then(|| crate::utc_date(h.created_unix)),
        },
        rounds,
        what: h.options.label(),
        risk_threshold: h.risk.threshold,
    })
}

/// What `plot` draws from.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    pub bench: Option<BenchFile>,
    pub recording: Option<RecordingFile>,
    pub profile: Option<ProfileFile>,
    /// The bench configuration figures 1 and 6 show (default: chosen per figure).
    pub config: Option<String>,
}

/// One drawn figure.
#[derive(Debug, Clone)]
pub struct Figure {
    /// File stem, e.g. `acceptance-length`.
    pub name: String,
    pub svg: String,
}

/// Every figure the inputs allow.
#[allow(clippy::too_many_lines)] // the list of figures, one block per figure
pub fn figures(inputs: &Inputs, pal: &Palette) -> Result<Vec<Figure>> {
    let mut out = Vec::new();
    let mut push = |name: &str, svg: Result<String>| -> Result<()> {
        out.push(Figure {
            name: name.to_string(),
            svg: svg.with_context(|| format!("figure {name}"))?,
        });
        Ok(())
    };
    let bench = inputs.bench.as_ref();
    let rec = inputs.recording.as_ref();
    if let Some(c) = &inputs.config {
        let b = bench.context("--config picks a bench configuration: give --bench too")?;
        if !b.results.iter().any(|r| &r.config == c) {
            let names: std::collections::BTreeSet<&str> =
                b.results.iter().map(|r| r.config.as_str()).collect();
            bail!(
                "--config {c}: not in {} (it has: {})",
                b.source.file,
                names.into_iter().collect::<Vec<_>>().join(", ")
            );
        }
    }
    // 1. Acceptance length per round, per family.
    if let Some(r) = rec {
        let a = data::acceptance_from_rounds(&r.rounds, &r.what);
        push(
            "acceptance-length",
            draw::acceptance(&a, &r.source.caption(), pal),
        )?;
    } else if let Some(b) = bench {
        if let Some(res) = data::pick_result(&b.results, inputs.config.as_deref()) {
            let a = data::acceptance_from_bench(res);
            push(
                "acceptance-length",
                draw::acceptance(&a, &b.source.caption(), pal),
            )?;
        }
    }
    // 2. Per-position acceptance per block size.
    let curves = match (rec, bench) {
        (Some(r), _) => Some((
            data::positions_from_rounds(&r.rounds),
            r.what.clone(),
            &r.source,
        )),
        (None, Some(b)) => Some((
            data::positions_from_bench(&b.results),
            "LinearSS at each block size".to_string(),
            &b.source,
        )),
        _ => None,
    };
    if let Some((curves, what, src)) = curves.filter(|c| !c.0.is_empty()) {
        push(
            "position-acceptance",
            draw::positions(&curves, &what, &src.caption(), pal),
        )?;
    }
    // 3. Forward latency.
    if let Some(p) = &inputs.profile {
        if let Some(l) = data::latency(&p.profile, p.fitted.clone()) {
            push(
                "forward-latency",
                draw::latency(&l, &p.source.caption(), pal),
            )?;
        }
    }
    if let Some(b) = bench {
        // 4. Throughput and TPF against concurrency.
        let s = data::throughput(&b.results);
        push("throughput", draw::throughput(&s, &b.source.caption(), pal))?;
        // 4b. RecGuide's modeled speed-up over each fixed block size.
        let up = data::speedup(&b.results);
        if !up.is_empty() {
            push("speedup", draw::speedup(&up, &b.source.caption(), pal))?;
        }
        // 4c. Block diffusion's speed against its agreement with AR.
        let f = data::faithfulness(&b.results);
        if !f.is_empty() {
            push(
                "faithfulness",
                draw::faithfulness(&f, &b.source.caption(), pal),
            )?;
        }
        // 5. Block sizes against concurrency.
        if let Some(mut shares) = data::block_shares(&b.results) {
            if b.source.model.starts_with(crate::sim::PREFIX) {
                shares.paper = crate::sim::PAPER_BLOCK_SHARES
                    .iter()
                    .map(|(c, s)| (*c, s.to_vec()))
                    .collect();
            }
            push(
                "block-sizes",
                draw::block_shares(&shares, &b.source.caption(), pal),
            )?;
        }
    }
    // 5. Block sizes over a session.
    if let Some(r) = rec {
        let t = data::block_timeline(&r.rounds);
        push(
            "block-timeline",
            draw::block_timeline(&t, &r.source.caption(), pal),
        )?;
    }
    // 6. Branch hit rates, and the draft at the first rejection.
    // (Not for a recording with neither: an imported log holds no rows or margins.)
    let rows_or_margins = |r: &RecordingFile| {
        r.rounds
            .iter()
            .any(|x| !x.built.is_empty() || x.margin_at_reject.is_some())
    };
    if let Some(r) = rec.filter(|r| rows_or_margins(r)) {
        let b = data::branches_from_rounds(&r.rounds, &r.what);
        let f = data::first_reject(&r.rounds);
        let f = (f.rejects() > 0).then_some(f);
        push(
            "branches",
            draw::branches(&b, f.as_ref(), r.risk_threshold, &r.source.caption(), pal),
        )?;
    } else if let Some(b) = bench {
        let with_rows = b
            .results
            .iter()
            .filter(|r| !r.tally.branches.is_empty())
            .filter(|r| inputs.config.as_ref().is_none_or(|c| &r.config == c))
            .min_by_key(|r| r.concurrency);
        if let Some(res) = with_rows {
            let br = data::branches_from_bench(res);
            push(
                "branches",
                draw::branches(
                    &br,
                    None,
                    crate::engine::options::DEFAULT_RISK_THRESHOLD,
                    &b.source.caption(),
                    pal,
                ),
            )?;
        }
    }
    Ok(out)
}

/// Writes the figures into `dir` as NAME.svg (files already there only with `force`);
/// returns the paths.
pub fn write(figures: &[Figure], dir: &Path, force: bool) -> Result<Vec<PathBuf>> {
    let names: Vec<String> = figures.iter().map(|f| format!("{}.svg", f.name)).collect();
    crate::output::claim_in(dir, &names, "--out", force)?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    figures
        .iter()
        .map(|f| {
            let p = dir.join(format!("{}.svg", f.name));
            std::fs::write(&p, &f.svg).with_context(|| format!("cannot write {}", p.display()))?;
            Ok(p)
        })
        .collect()
}
