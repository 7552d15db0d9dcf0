//! `specscope profile`: forward latency for rows x tokens x committed-cache lengths.

use std::time::Instant;

use anyhow::{ensure, Context, Result};
use clap::Args;

use specscope::engine::{cost, signals};
use specscope::files::MeasuredPoint;
use specscope::model::synthetic::{self, Rng, Spec};
use specscope::model::{self, AttnRule, KvCache, LogitSel, Model, Row, RowBatch};

use super::ModelArgs;

#[derive(Debug, Clone, Args)]
pub struct ProfileArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Profile a random ~4.5M-parameter model instead of the bundled or given one.
    #[arg(long)]
    pub synthetic: bool,
    /// Rows per forward (comma-separated; 1 to 256, more requests than decoding runs
    /// at once).
    #[arg(long, value_delimiter = ',', default_value = "1,4", value_parser = super::count(1, 256))]
    pub rows: Vec<usize>,
    /// Query tokens per row (comma-separated; 1 to 4096, a prefill-sized row).
    #[arg(long, value_delimiter = ',', default_value = "1,8,16,32", value_parser = super::count(1, 4096))]
    pub tokens: Vec<usize>,
    /// Committed cache length before each row (comma-separated; with the tokens, within
    /// the model's context window).
    #[arg(long, value_delimiter = ',', default_value = "256,1024", value_parser = super::count(0, 1 << 20))]
    pub cache: Vec<usize>,
    /// Timed repetitions per point, the median reported (1 to 1000).
    #[arg(long, default_value_t = 7, value_parser = super::count(1, 1000))]
    pub repeats: usize,
    /// Also write the table as JSON to this file (an existing one only with --force).
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    /// Replace the output file(s) if they exist (without it an existing file is kept
    /// and the command refuses).
    #[arg(long)]
    pub force: bool,
    /// Save the table as this machine's cost profile (used by RecGuide's cost rules).
    #[arg(long)]
    pub save: bool,
    /// Beside each point, the roofline model's ms for this model's geometry on this GPU
    /// (b200, h200 or h100; `--roofline` alone: b200) and measured ÷ modeled: how far
    /// the shipped GPU profiles are from a real one. With b200, the paper's measured
    /// B200 sweep too, against what the b200-nld8b-measured and b200-nld8b profiles
    /// price it at.
    #[arg(long, value_parser = ["b200", "h200", "h100"], num_args = 0..=1, default_missing_value = "b200")]
    pub roofline: Option<String>,
}

fn prefill(model: &Model, len: usize, seed: u64) -> Result<KvCache> {
    let mut cache = model.new_cache();
    let vocab = model.config().vocab_size as u64;
    let mut rng = Rng::new(seed);
    let ids: Vec<u32> = (0..len).map(|_| (rng.next_u64() % vocab) as u32).collect();
    for chunk in ids.chunks(256) {
        let row = Row::new(0, chunk.to_vec(), AttnRule::Causal).commit();
        model.forward(&RowBatch::single(row), &mut [&mut cache])?;
    }
    Ok(cache)
}

/// This machine's memory bandwidth in GB/s, measured as `profile` reports it: the best
/// of a few parallel streaming reads of a buffer far larger than the caches (what one
/// token's forward must do with the weights).
pub fn memory_bandwidth() -> f64 {
    use rayon::prelude::*;
    const FLOATS: usize = 1 << 27; // 512 MiB
    let buf = vec![1f32; FLOATS];
    let mut best = 0f64;
    for _ in 0..4 {
        let t = Instant::now();
        let sum: f32 = buf
            .par_chunks(1 << 16)
            .map(|c| {
                let mut acc = [0f32; 8];
                for x in c.chunks_exact(8) {
                    for k in 0..8 {
                        acc[k] += x[k];
                    }
                }
                acc.iter().sum::<f32>()
            })
            .sum();
        std::hint::black_box(sum);
        best = best.max((FLOATS * 4) as f64 / t.elapsed().as_secs_f64() / 1e9);
    }
    best
}

/// Bytes a forward of `rows` rows of `tokens` tokens after `cache_len` cached ones must
/// read at least: the weights once, each row's keys and values.
fn bytes_read(
    cfg: &model::Config,
    dtype: candle_core::DType,
    rows: usize,
    tokens: usize,
    cache_len: usize,
) -> f64 {
    let size = dtype.size_in_bytes() as f64;
    let kv = (rows
        * cfg.num_hidden_layers
        * (cache_len + tokens)
        * cfg.num_kv_heads()
        * cfg.head_dim()
        * 2) as f64;
    (cfg.weights_read_per_forward() as f64 + kv) * size
}

/// Forwards of a point run before its sample is timed (the change-of-shape transient).
const UNTIMED_FORWARDS: usize = 3;
/// Forwards of a point in one timed sample.
const TIMED_FORWARDS: usize = 3;

#[allow(clippy::too_many_lines)] // the profile's grid and its report; to be cut into steps
pub fn run(args: ProfileArgs) -> Result<()> {
    ensure!(args.repeats > 0, "--repeats must be at least 1");
    let bundled = model::source::bundled_dir().join("config.json").is_file();
    let claim = |inputs: &[std::path::PathBuf]| match &args.json {
        Some(out) => specscope::output::claim(out, "--json", args.force, inputs),
        None => Ok(()),
    };
    let (model, label) = if args.synthetic || (args.model.model.is_none() && !bundled) {
        claim(&[])?;
        let device = super::select_device(args.model.device)?;
        let spec = Spec::small_4m();
        (
            synthetic::build_model(&spec, &device)?,
            "synthetic ~4.5M params".to_string(),
        )
    } else {
        let loaded = args.model.load()?;
        claim(&loaded.files.inputs())?;
        let (model, _) = loaded.checkpoint("profile")?;
        (model.clone(), loaded.files.label)
    };
    let cfg = model.config();
    let params = cfg.vocab_size * cfg.hidden_size * 2
        + cfg.num_hidden_layers
            * (cfg.hidden_size * cfg.num_attention_heads * cfg.head_dim() * 2
                + cfg.hidden_size * cfg.num_kv_heads() * cfg.head_dim() * 2
                + 3 * cfg.hidden_size * cfg.intermediate_size);
    outln!(
        "model: {label} ({:.2}M params, {} layers, hidden {}); device {:?}; threads {}",
        params as f64 / 1e6,
        cfg.num_hidden_layers,
        cfg.hidden_size,
        model.device(),
        candle_core::utils::get_num_threads()
    );
    let roofline = match args.roofline.as_deref() {
        Some(name) => Some((
            cost::roofline::gpu(name).context("a GPU of the roofline model")?,
            cost::roofline::Geometry::of(cfg),
        )),
        None => None,
    };
    // Host memory's bandwidth: what a CPU forward reads its weights at (a GPU's
    // forward reads its own memory, which this cannot measure).
    let bandwidth = if model.device().is_cpu() {
        let bw = memory_bandwidth();
        outln!(
            "memory bandwidth here: {bw:.1} GB/s (a parallel streaming read of 512 MiB, best of 4); a forward's GB/s counts the weights once and its rows' cached keys and values"
        );
        Some(bw)
    } else {
        None
    };
    outln!(
        "{:>6} {:>5} {:>7} {:>11} {:>11} {:>13} {:>12} {:>8} {:>7} {:>6}{}",
        "cache",
        "rows",
        "tokens",
        "median ms",
        "min ms",
        "ms / token",
        "KB to host",
        "GB read",
        "GB/s",
        "÷ bw",
        roofline.map_or(String::new(), |(gpu, _)| format!(
            " {:>11} {:>10}",
            format!("{} ms", gpu.name),
            "measured/"
        ))
    );
    let max_rows = args.rows.iter().copied().max().unwrap_or(1);
    let longest = args.cache.iter().max().copied().unwrap_or(0)
        + args.tokens.iter().max().copied().unwrap_or(0);
    ensure!(
        longest <= cfg.max_position_embeddings,
        "--cache and --tokens reach {longest} positions: the model's context window is {}",
        cfg.max_position_embeddings
    );
    let mask = cfg.mask_token_id();
    // Caches per committed length; every forward below is read-only on them.
    let mut caches = Vec::with_capacity(args.cache.len());
    for &cache_len in &args.cache {
        let c = (0..max_rows)
            .map(|i| prefill(&model, cache_len, i as u64))
            .collect::<Result<Vec<_>>>()
            .with_context(|| format!("prefilling caches of {cache_len} tokens"))?;
        caches.push(c);
    }
    // (cache index, rows, tokens, batch)
    let mut grid = Vec::new();
    for ci in 0..args.cache.len() {
        for &rows in &args.rows {
            for &tokens in &args.tokens {
                let batch = RowBatch::new(
                    (0..rows)
                        .map(|r| {
                            Row::new(r, vec![7; tokens], AttnRule::Causal).logits(LogitSel::All)
                        })
                        .collect(),
                );
                grid.push((ci, rows, tokens, batch));
            }
        }
    }
    // One sample per point per pass, the passes alternating in direction, so that the
    // machine's drift spreads over every point instead of a run of them. A sample is
    // the mean of a short run of forwards of that point after untimed ones: while
    // decoding, forwards of one shape follow each other, and on a CPU the first few
    // after a change of shape are slower (about 1.3 ms against 1.0 for a 1-token
    // forward of the bundled model), so timing the first after a change overprices
    // the small forwards that AR steps run back to back.
    let mut times = vec![Vec::with_capacity(args.repeats); grid.len()];
    let mut reads = vec![signals::HostReads::default(); grid.len()];
    for pass in 0..args.repeats {
        let order: Vec<usize> = if pass % 2 == 0 {
            (0..grid.len()).collect()
        } else {
            (0..grid.len()).rev().collect()
        };
        for k in order {
            let (ci, _, _, batch) = &grid[k];
            let mut refs: Vec<&mut KvCache> = caches[*ci].iter_mut().collect();
            let mut t = Instant::now();
            let mut before = signals::HostReads::now();
            for n in 0..UNTIMED_FORWARDS + TIMED_FORWARDS {
                if n == UNTIMED_FORWARDS {
                    t = Instant::now();
                    before = signals::HostReads::now();
                }
                // As the engine pays for a forward: the logits turned into signals too.
                for logits in model.forward(batch, &mut refs)? {
                    signals::signals(&logits, mask)?;
                }
            }
            let ms = t.elapsed().as_secs_f64() * 1e3 / TIMED_FORWARDS as f64;
            times[k].push(ms);
            reads[k] = signals::HostReads::since(before);
        }
    }
    let mut points = Vec::with_capacity(grid.len());
    for (((ci, rows, tokens, _), mut ms), read) in grid.into_iter().zip(times).zip(reads) {
        ms.sort_by(f64::total_cmp);
        let bytes = bytes_read(cfg, model.dtype(), rows, tokens, args.cache[ci]);
        let median_ms = ms[ms.len() / 2];
        let p = MeasuredPoint {
            point: cost::ProfilePoint {
                cache_len: args.cache[ci],
                rows,
                tokens,
                median_ms,
                min_ms: ms[0],
            },
            bytes_read: bytes,
            gb_per_s: bytes / (median_ms / 1e3) / 1e9,
            host_bytes_per_forward: read.bytes as f64 / TIMED_FORWARDS as f64,
            roofline_ms: roofline
                .map(|(gpu, g)| cost::roofline::forward_ms(&gpu, &g, rows, tokens, args.cache[ci])),
        };
        outln!(
            "{:>6} {:>5} {:>7} {:>11.2} {:>11.2} {:>13.3} {:>12.1} {:>8.3} {:>7.1} {:>6}{}",
            args.cache[ci],
            rows,
            tokens,
            median_ms,
            ms[0],
            median_ms / (rows * tokens) as f64,
            p.host_bytes_per_forward / 1024.0,
            p.bytes_read / 1e9,
            p.gb_per_s,
            bandwidth.map_or("—".to_string(), |bw| format!("{:.2}", p.gb_per_s / bw)),
            p.roofline_ms.map_or(String::new(), |r| format!(
                " {r:>11.2} {:>10.2}",
                median_ms / r
            ))
        );
        points.push(p);
    }
    outln!(
        "logits statistics: {}; {}",
        signals::path(model.device()),
        specscope::model::kernels::describe()
    );
    let out = specscope::files::ProfileDoc {
        model: label.clone(),
        memory_bandwidth_gb_s: bandwidth,
        points,
        provenance: Some(specscope::Provenance::here()),
    };
    let mut targets: Vec<std::path::PathBuf> = args.json.iter().cloned().collect();
    if args.save {
        let p = cost::default_path().context("no configuration directory for this user")?;
        if let Some(dir) = p.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        targets.push(p);
    }
    for path in targets {
        specscope::output::write_whole(&path, &serde_json::to_string_pretty(&out)?)?;
        eprintln!("wrote {}", path.display());
    }
    let (fitted, notes) = cost::CostModel::fit_noting(&out.profile(), &label)
        .context("the points above were measured, but a cost model cannot be fitted to them")?;
    for n in notes {
        eprintln!("note: {n}");
    }
    eprintln!(
        "fitted cost: {:.3} ms + rows x ({:.3} ms + {:.2e} ms x cache + tokens x ({:.4} ms + {:.2e} ms x cache))",
        fitted.fixed_ms,
        fitted.per_row_ms,
        fitted.per_row_ctx_ms,
        fitted.per_token_ms,
        fitted.per_token_ctx_ms
    );
    if args.roofline.as_deref() == Some("b200") {
        paper_sweep_table()?;
    }
    Ok(())
}

/// The paper's B200 sweep beside what the two B200 profiles price each of its rounds
/// at (draft + verify of a full bucket): the measured profile as the policy sees it
/// at that load (its tangent model), the roofline profile as fitted.
fn paper_sweep_table() -> Result<()> {
    let measured = cost::Pricing::select(Some(cost::measured::B200_NLD8B))?.cost;
    let roofline = cost::Pricing::select(Some("b200-nld8b"))?.cost;
    let ctx = cost::roofline::PAPER_CONTEXT;
    outln!(
        "the paper's B200 sweep (NLD-8B, draft + verify ms of a full bucket, context {ctx}) against the B200 profiles:"
    );
    outln!(
        "{:>4} {:>3} {:>9} {:>12} {:>7} {:>12} {:>7}",
        "C",
        "B",
        "paper ms",
        "measured ms",
        "÷paper",
        "roofline ms",
        "÷paper"
    );
    let (mut m_range, mut r_range) = ((f64::MAX, 0f64), (f64::MAX, 0f64));
    let widen = |(lo, hi): (f64, f64), r: f64| (lo.min(r), hi.max(r));
    for &(c, ms) in cost::roofline::PAPER_B200_8B {
        let at = measured.at_load(c);
        for (b, paper) in [8, 16, 32].into_iter().zip(ms) {
            let (m, r) = (at.round_ms(c, b, ctx), roofline.round_ms(c, b, ctx));
            (m_range, r_range) = (widen(m_range, m / paper), widen(r_range, r / paper));
            outln!(
                "{c:>4} {b:>3} {paper:>9.2} {m:>12.2} {:>7.2} {r:>12.2} {:>7.2}",
                m / paper,
                r / paper
            );
        }
    }
    outln!(
        "÷paper over the 24 points: measured profile {:.2}–{:.2}, roofline profile {:.2}–{:.2}",
        m_range.0,
        m_range.1,
        r_range.0,
        r_range.1
    );
    Ok(())
}
