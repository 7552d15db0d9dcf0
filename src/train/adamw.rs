//! The optimizer of `specscope train`.

use std::path::Path;

use anyhow::{anyhow, Context, Result};
use candle_core::{Device, Tensor, Var};
use candle_nn::VarMap;

/// AdamW with decoupled weight decay on matrices only; moments are saved for resume.
pub(super) struct AdamW {
    vars: Vec<(String, Var, Tensor, Tensor)>,
    t: usize,
    beta1: f64,
    beta2: f64,
    eps: f64,
}

impl AdamW {
    pub(super) fn new(varmap: &VarMap) -> Result<Self> {
        let data = varmap
            .data()
            .lock()
            .map_err(|_| anyhow!("var map lock poisoned"))?;
        let mut vars: Vec<(String, Var, Tensor, Tensor)> = data
            .iter()
            .map(|(name, var)| {
                let z = var.as_tensor().zeros_like()?;
                Ok((name.clone(), var.clone(), z.clone(), z))
            })
            .collect::<Result<_>>()?;
        vars.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(Self {
            vars,
            t: 0,
            beta1: 0.9,
            beta2: 0.95,
            eps: 1e-8,
        })
    }

    pub(super) fn load(&mut self, path: &Path, t: usize) -> Result<()> {
        let saved = candle_core::safetensors::load(path, &Device::Cpu)?;
        for (name, _, m, v) in &mut self.vars {
            *m = saved
                .get(&format!("m.{name}"))
                .cloned()
                .with_context(|| format!("{}: no m.{name}", path.display()))?;
            *v = saved
                .get(&format!("v.{name}"))
                .cloned()
                .with_context(|| format!("{}: no v.{name}", path.display()))?;
        }
        self.t = t;
        Ok(())
    }

    pub(super) fn save(&self, path: &Path) -> Result<()> {
        let mut map = std::collections::HashMap::new();
        for (name, _, m, v) in &self.vars {
            map.insert(format!("m.{name}"), m.clone());
            map.insert(format!("v.{name}"), v.clone());
        }
        candle_core::safetensors::save(&map, path)
            .with_context(|| format!("cannot write {}", path.display()))
    }

    /// Clips the global gradient norm to `clip`, then updates; returns the norm.
    pub(super) fn step(
        &mut self,
        grads: &candle_core::backprop::GradStore,
        lr: f64,
        wd: f64,
        clip: f64,
    ) -> Result<f64> {
        let mut sq = 0f64;
        for (_, var, _, _) in &self.vars {
            if let Some(g) = grads.get(var.as_tensor()) {
                sq += g.sqr()?.sum_all()?.to_scalar::<f32>()? as f64;
            }
        }
        let norm = sq.sqrt();
        let scale = if norm > clip { clip / norm } else { 1.0 };
        self.t += 1;
        let (b1, b2) = (self.beta1, self.beta2);
        let c1 = 1.0 - b1.powi(self.t as i32);
        let c2 = 1.0 - b2.powi(self.t as i32);
        for (_, var, m, v) in &mut self.vars {
            let Some(g) = grads.get(var.as_tensor()) else {
                continue;
            };
            let g = (g * scale)?;
            *m = ((&*m * b1)? + (&g * (1.0 - b1))?)?;
            *v = ((&*v * b2)? + (g.sqr()? * (1.0 - b2))?)?;
            let update = ((&*m / c1)? / ((&*v / c2)?.sqrt()? + self.eps)?)?;
            let theta = var.as_tensor();
            let decay = if theta.rank() >= 2 { wd } else { 0.0 };
            let next = ((theta * (1.0 - lr * decay))? - (update * lr)?)?;
            var.set(&next)?;
        }
        Ok(norm)
    }
}
