//! The prices a run decides by: a `--cost-profile` choice (a shipped GPU profile, this
//! machine's, a file), whether it learns from the run, and the clock the policy reads.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::{measured, roofline, CostModel};

/// What the block policy times rounds and forwards by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Clock {
    /// This machine's wall clock (the policy measures the machine it runs on).
    #[default]
    Wall,
    /// The profile's prices: the same prompts make the same choices on any machine
    /// under any load (tests of which rules run).
    Priced,
}

/// The prices decisions start from, whether the run's own forwards may refit them, and
/// the clock the policy reads: everything about prices, set once.
#[derive(Debug, Clone, PartialEq)]
pub struct Pricing {
    pub cost: CostModel,
    /// Refit online from this run's forwards.
    pub learn: bool,
    /// A fixed profile's prices are its clock too (the measured regime and exploration
    /// included): only the machine at hand's profile learns from the wall clock.
    pub clock: Clock,
    /// What prices the decisions, in a few words for the screen: "B200 · NLD-8B
    /// (modeled)", "this CPU (measured)".
    pub label: String,
    /// Something the caller should tell the user (a saved profile that did not read).
    pub warning: Option<String>,
}

/// The profile decisions are priced by when `--cost-profile` is not given and no
/// profile was saved: the GPU the decoding is designed for. On a CPU every forward
/// is compute-bound and speculation cannot pay, so pricing by this machine's clock
/// would hide what RecGuide does where it does pay.
pub const DEFAULT_PROFILE: &str = "b200-nld8b";

/// `--cost-profile` values that name a shipped profile, with what they are.
pub const NAMED_PROFILES: &[(&str, &str)] = &[
    ("cpu", "the development CPU's measured profile (built in)"),
    ("b200-nld8b", "NLD-8B on a B200, roofline model"),
    (
        measured::B200_NLD8B,
        "NLD-8B on a B200, the paper's measured sweep (roofline beyond it)",
    ),
    ("h200-nld8b", "NLD-8B on an H200, roofline model"),
    ("h100-nld8b", "NLD-8B on an H100 SXM, roofline model"),
];

impl Pricing {
    /// `--cost-profile`: nothing (the saved profile, else [`DEFAULT_PROFILE`]), `cpu`,
    /// a GPU roofline profile by name, the paper's measured B200 sweep
    /// (`b200-nld8b-measured`), or a `specscope profile --json` file. A GPU
    /// profile keeps its prices fixed: this machine's forwards would otherwise teach
    /// the policy this machine's prices, and the point is to decide as that GPU would.
    pub fn select(spec: Option<&str>) -> Result<Self> {
        let mut warning = None;
        let (cost, learn, label) = match spec {
            None => match default_path().filter(|p| p.is_file()) {
                Some(_) => {
                    let (cost, w) = CostModel::load_default();
                    warning = w;
                    (
                        cost,
                        true,
                        "this machine's saved profile (measured)".to_string(),
                    )
                }
                None => return Self::select(Some(DEFAULT_PROFILE)),
            },
            Some("cpu") => (
                CostModel::builtin_fit()?,
                true,
                "this CPU (measured)".to_string(),
            ),
            Some(name) if roofline::named(name).is_some() => {
                let p = roofline::named(name).context("a named roofline profile")?;
                let gpu = roofline::NAMED
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map_or("GPU", |(_, g)| g.name);
                (
                    CostModel::fit(&p, &p.model)?,
                    false,
                    format!("{gpu} · NLD-8B (modeled)"),
                )
            }
            Some(measured::B200_NLD8B) => (
                measured::b200_nld8b()?,
                false,
                "B200 · NLD-8B (measured sweep)".to_string(),
            ),
            Some(path) => {
                let p = Path::new(path);
                if !p.exists() {
                    let names: Vec<&str> = NAMED_PROFILES.iter().map(|n| n.0).collect();
                    anyhow::bail!(
                        "--cost-profile {path}: no such file, and not one of {}",
                        names.join(", ")
                    );
                }
                (
                    CostModel::from_file(p)?,
                    true,
                    format!("{} (measured)", p.display()),
                )
            }
        };
        Ok(Self {
            warning,
            ..Self::new(cost, learn, label)
        })
    }

    /// `cost`, refitted online when `learn`, on the clock that goes with it.
    pub fn new(cost: CostModel, learn: bool, label: impl Into<String>) -> Self {
        Self {
            cost,
            learn,
            clock: if learn { Clock::Wall } else { Clock::Priced },
            label: label.into(),
            warning: None,
        }
    }

    /// The built-in CPU profile, refitted online on the wall clock (a scheduler's
    /// pricing until it is given another).
    pub fn builtin() -> Self {
        Self::new(CostModel::builtin(), true, "this CPU (built in)")
    }

    /// `cost` as it is, on its own clock.
    pub fn fixed(cost: CostModel) -> Self {
        let label = cost.source.clone();
        Self::new(cost, false, label)
    }

    /// The source, and whether the run refits it.
    pub fn describe(&self) -> String {
        let how = if self.learn {
            "refitted online"
        } else {
            "fixed"
        };
        format!("{} ({how})", self.cost.source)
    }
}

/// Where `specscope profile --save` puts the profile.
pub fn default_path() -> Option<PathBuf> {
    directories::ProjectDirs::from("", "", "specscope")
        .map(|d| d.config_dir().join("cost_profile.json"))
}
