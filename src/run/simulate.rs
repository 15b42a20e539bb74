//! The fake HTCondor a run drives instead of a real pool: the pool of a
//! `--simulate` run, made from the sites file's `[site.simulate]` models, or
//! one a test names with `COSCHED_FAKE_POOL`. Either sets the run's clock:
//! t = 0 at the pool's epoch, at the pool's speedup.

use crate::config::SitesFile;
use crate::fake_condor::{self, FakeSite, PoolConfig};
use crate::Failure;
use std::path::PathBuf;

/// The fake pool of a `--simulate` run, from the sites file's models.
pub(super) fn simulated_pool(sites: &SitesFile, epoch: f64, speedup: f64) -> Result<PoolConfig, Failure> {
    let params = sites.simulated_sites().map_err(|missing| {
        Failure::usage(format!(
            "--simulate needs a [site.simulate] table for every site; missing for: {}",
            missing.join(", ")
        ))
    })?;
    let mut pool = PoolConfig {
        epoch: Some(epoch),
        speedup,
        base_runtime: sites.simulate.base_runtime,
        jitter: sites.simulate.jitter,
        seed: sites.simulate.seed,
        kinds: sites.simulate.kinds.clone(),
        ..PoolConfig::default()
    };
    for (site, params) in sites.sites.iter().zip(params) {
        match &site.grid_resource {
            Some(grid) => pool.sites.push(FakeSite::grid(grid.raw.clone(), params)),
            None if pool.local.is_none() => pool.local = Some(FakeSite::grid("", params)),
            None => {
                return Err(Failure::usage(format!(
                "--simulate: site `{}` is a second local-pool site (no grid_resource); the simulated grid \
                     has one local pool",
                site.name
            )))
            }
        }
    }
    Ok(pool)
}

/// The fake pool named by `COSCHED_FAKE_POOL` (tests): its directory, epoch
/// and speedup.
pub fn foreign_fake_pool() -> Result<Option<(PathBuf, f64, f64)>, Failure> {
    let Some(dir) = std::env::var_os(fake_condor::POOL_ENV).filter(|d| !d.is_empty()) else {
        return Ok(None);
    };
    let dir = PathBuf::from(dir);
    let path = dir.join("pool.toml");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        Failure::usage(format!("{}: {e} (COSCHED_FAKE_POOL names a fake pool)", path.display()))
    })?;
    let config: PoolConfig =
        toml::from_str(&text).map_err(|e| Failure::usage(format!("{}: {e}", path.display())))?;
    let epoch = config.epoch.ok_or_else(|| Failure::usage(format!("{}: no epoch", path.display())))?;
    Ok(Some((dir, epoch, config.speedup)))
}
