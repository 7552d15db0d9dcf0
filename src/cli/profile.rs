//! `specscope profile`: forward latency for rows x tokens x committed-cache lengths.

use anyhow::{Context, Result};
use clap::Args;

use specscope::engine::{cost, signals};
use specscope::files::{MeasuredPoint, ProfileDoc};
use specscope::model::synthetic::{self, Spec};
use specscope::model::{self, Model};

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

/// The model to profile and its label: the given or bundled one, or a synthetic one
/// (`--synthetic`, or nothing bundled); the output file claimed first.
fn model_of(args: &ProfileArgs) -> Result<(Model, String)> {
    let bundled = model::source::bundled_dir().join("config.json").is_file();
    let claim = |inputs: &[std::path::PathBuf]| match &args.json {
        Some(out) => specscope::output::claim(out, "--json", args.force, inputs),
        None => Ok(()),
    };
    if args.synthetic || (args.model.model.is_none() && !bundled) {
        claim(&[])?;
        let device = super::select_device(args.model.device)?;
        let spec = Spec::small_4m();
        return Ok((
            synthetic::build_model(&spec, &device)?,
            "synthetic ~4.5M params".to_string(),
        ));
    }
    let loaded = args.model.load()?;
    claim(&loaded.files.inputs())?;
    let (model, _) = loaded.checkpoint("profile")?;
    Ok((model.clone(), loaded.files.label))
}

pub fn run(args: ProfileArgs) -> Result<()> {
    let (model, label) = model_of(&args)?;
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
        let bw = cost::timing::memory_bandwidth();
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
    let grid = cost::timing::Grid {
        cache: args.cache.clone(),
        rows: args.rows.clone(),
        tokens: args.tokens.clone(),
        repeats: args.repeats,
    };
    let timed = grid.time(&model)?;
    let mut points = Vec::with_capacity(timed.len());
    for t in timed {
        let cost::ProfilePoint {
            cache_len,
            rows,
            tokens,
            median_ms,
            min_ms,
        } = t.point;
        let bytes = cost::timing::bytes_read(cfg, model.dtype(), rows, tokens, cache_len);
        let p = MeasuredPoint {
            point: t.point,
            bytes_read: bytes,
            gb_per_s: bytes / (median_ms / 1e3) / 1e9,
            host_bytes_per_forward: t.host_bytes_per_forward,
            roofline_ms: roofline
                .map(|(gpu, g)| cost::roofline::forward_ms(&gpu, &g, rows, tokens, cache_len)),
        };
        outln!(
            "{:>6} {:>5} {:>7} {:>11.2} {:>11.2} {:>13.3} {:>12.1} {:>8.3} {:>7.1} {:>6}{}",
            cache_len,
            rows,
            tokens,
            median_ms,
            min_ms,
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
    let out = ProfileDoc {
        model: label.clone(),
        memory_bandwidth_gb_s: bandwidth,
        points,
        provenance: Some(specscope::Provenance::here()),
    };
    save(&args, &out)?;
    if args.roofline.as_deref() == Some("b200") {
        paper_sweep_table()?;
    }
    Ok(())
}

/// The profile to `--json` and, with `--save`, this machine's profile; the cost model
/// fitted to it.
fn save(args: &ProfileArgs, out: &ProfileDoc) -> Result<()> {
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
        specscope::output::write_whole(&path, &serde_json::to_string_pretty(out)?)?;
        eprintln!("wrote {}", path.display());
    }
    let (fitted, notes) = cost::CostModel::fit_noting(&out.profile(), &out.model)
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
