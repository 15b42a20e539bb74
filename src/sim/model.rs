//! Site model parameters, in the schema of `shared/scenarios/scenarios.toml`
//! (also the `[site.simulate]` table of sites.toml). Plain data: the policy
//! core's oracle, the simulator and the fake HTCondor all read it.

use serde::{Deserialize, Serialize};

/// Knee of a site's shared resource, in jobs at full speed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Capacity {
    Finite(f64),
    /// `"inf"`: never saturates.
    Infinite,
}

impl Capacity {
    pub fn value(self) -> f64 {
        match self {
            Capacity::Finite(c) => c,
            Capacity::Infinite => f64::INFINITY,
        }
    }
}

impl Default for Capacity {
    fn default() -> Self {
        Capacity::Infinite
    }
}

impl Serialize for Capacity {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Capacity::Finite(c) => s.serialize_f64(*c),
            Capacity::Infinite => s.serialize_str("inf"),
        }
    }
}

impl<'de> Deserialize<'de> for Capacity {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Num(f64),
            Int(i64),
            Str(String),
        }
        match Raw::deserialize(d)? {
            Raw::Num(c) if c > 0.0 => Ok(Capacity::Finite(c)),
            Raw::Int(c) if c > 0 => Ok(Capacity::Finite(c as f64)),
            Raw::Str(s) if s == "inf" => Ok(Capacity::Infinite),
            _ => Err(serde::de::Error::custom("capacity must be a positive number or \"inf\"")),
        }
    }
}

fn one() -> f64 {
    1.0
}

/// One site of the model. Field meanings: `shared/scenarios/README.md`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SiteParams {
    /// Only in scenario files; in sites.toml the site's own name is used.
    #[serde(default)]
    pub name: String,
    pub slots: u32,
    #[serde(default)]
    pub wait_mean: f64,
    #[serde(default)]
    pub capacity: Capacity,
    #[serde(default)]
    pub beta: f64,
    #[serde(default = "one")]
    pub speed: f64,
    #[serde(default)]
    pub p_fail: f64,
    /// `[t1, t2, factor]`: capacity × factor while t1 ≤ t < t2.
    #[serde(default)]
    pub cap_windows: Vec<[f64; 3]>,
    #[serde(default)]
    pub dead: bool,
}

/// One scenario of a scenarios file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default)]
    pub desc: String,
    pub n_jobs: u64,
    pub base_runtime: f64,
    #[serde(default)]
    pub jitter: f64,
    pub sites: Vec<SiteParams>,
}
