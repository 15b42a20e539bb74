//! The parameters of the site model of `shared/scenarios/README.md`: one
//! site's slots, queue wait, knee, failures. They are a file format (the
//! schema of `shared/scenarios/scenarios.toml`, and the `[site.simulate]`
//! table of sites.toml), so field names here are part of it. Their readers
//! import them from here: [`crate::config`] without depending on the
//! simulator, [`crate::sim`] (which runs the model, `sim::model`) and the
//! fake HTCondor.

use crate::policy::SiteTruth;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Knee of a site's shared resource, in jobs at full speed.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Capacity {
    Finite(f64),
    /// `"inf"`: never saturates.
    #[default]
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
    /// Share of the jobs this site holds for a cause of its own (their
    /// input is missing here): each such job is held here on every attempt,
    /// as it is submitted (as a Condor-C site's gridmanager holds a job
    /// whose input it cannot spool), and could run at another site. 1: the
    /// site holds every job. Default 0.
    #[serde(default)]
    pub p_hold: f64,
    /// `[t1, t2, factor]`: capacity × factor while t1 ≤ t < t2.
    #[serde(default)]
    pub cap_windows: Vec<[f64; 3]>,
    #[serde(default)]
    pub dead: bool,
    /// The slots the policy is told of, where they differ from the `slots`
    /// the site really starts our jobs on (a pool shared with a Condor-C
    /// site, an operator's cap that is not one). Only in scenario files: in
    /// sites.toml the site's own `slots` is what is declared. Default:
    /// `slots`.
    #[serde(default)]
    pub declared_slots: Option<u32>,
    /// Seconds between the site's negotiation cycles: a job whose wait is
    /// over and whose slot is free starts at the next multiple of it (a
    /// slot freed between cycles is filled at the next one). 0: at once.
    #[serde(default)]
    pub negotiation_period: f64,
    /// Seconds between the gridmanager's polls of a Condor-C or grid site
    /// (`GRIDMANAGER_JOB_PROBE_INTERVAL`): a job's start and end there reach
    /// the submit side's user log at the next multiple of it. 0: at once.
    #[serde(default)]
    pub poll_period: f64,
    /// A kind of job's speed factor here, by the kind's name: it runs at
    /// `speed × type_speed[kind]` (1 for a kind not listed). Only kinds a
    /// scenario's `types` or a sites file's `[simulate.kinds]` declares.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub type_speed: BTreeMap<String, f64>,
}

/// A kind of job of the simulated grid, as a sites file's
/// `[simulate.kinds]` declares it under its name (a run's kind is matched by
/// the name `--jobs` gives it): the scenario files' `types` without their
/// counts and sizes, which the run gives.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KindModel {
    /// Share of an uncontended run spent on the site's shared resource: 1
    /// for an I/O-bound job, 0 for one that never touches it.
    pub load: f64,
}

impl KindModel {
    /// What is wrong with the kind's parameters, if anything.
    pub fn check(&self) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.load) {
            return Err(format!(
                "load = {} is not in [0, 1] (the share of an uncontended run spent on the site's \
                 shared resource: 1 for I/O-bound jobs, 0 for CPU-bound ones)",
                self.load
            ));
        }
        Ok(())
    }
}

impl SiteParams {
    /// A healthy site: `slots` slots, no queue wait, no knee, no failures.
    pub fn healthy(name: &str, slots: u32) -> SiteParams {
        SiteParams {
            name: name.to_string(),
            slots,
            wait_mean: 0.0,
            capacity: Capacity::Infinite,
            beta: 0.0,
            speed: 1.0,
            p_fail: 0.0,
            p_hold: 0.0,
            cap_windows: Vec::new(),
            dead: false,
            declared_slots: None,
            type_speed: BTreeMap::new(),
            negotiation_period: 0.0,
            poll_period: 0.0,
        }
    }

    /// The slots the policy is told of.
    pub fn declared(&self) -> u32 {
        self.declared_slots.unwrap_or(self.slots)
    }

    /// What is wrong with the site's parameters, if anything: the first
    /// problem, in words that name the field.
    pub fn check(&self) -> Result<(), String> {
        if self.slots == 0 {
            return Err("slots must be at least 1".into());
        }
        if self.declared_slots == Some(0) {
            return Err("declared_slots must be at least 1".into());
        }
        if !(self.wait_mean >= 0.0 && self.wait_mean.is_finite()) {
            return Err("wait_mean must be ≥ 0".into());
        }
        if !(self.beta >= 0.0 && self.beta.is_finite()) {
            return Err("beta must be ≥ 0".into());
        }
        if !(self.speed > 0.0 && self.speed.is_finite()) {
            return Err("speed must be > 0".into());
        }
        if !(0.0..1.0).contains(&self.p_fail) {
            return Err("p_fail must be in [0, 1)".into());
        }
        if !(0.0..=1.0).contains(&self.p_hold) {
            return Err("p_hold must be in [0, 1] (the share of jobs the site holds; 0: none)".into());
        }
        for w in &self.cap_windows {
            if !(w[0] >= 0.0 && w[0] < w[1] && w[2] >= 0.0 && w[2].is_finite()) {
                return Err("cap_windows entries are [t1, t2, factor] with 0 ≤ t1 < t2 and factor ≥ 0".into());
            }
        }
        for (field, period) in
            [("negotiation_period", self.negotiation_period), ("poll_period", self.poll_period)]
        {
            if !(period >= 0.0 && period.is_finite()) {
                return Err(format!("{field} must be a number of seconds ≥ 0 (0: no latency)"));
            }
        }
        Ok(())
    }

    /// The site as the oracle may know it (the model's equations live
    /// there), for a run of one kind of job.
    pub fn truth(&self) -> SiteTruth {
        self.truth_for(&[])
    }

    /// The site as the oracle may know it, for a run of the kinds named
    /// `kinds` in order: each kind's speed factor resolved by its name.
    pub fn truth_for(&self, kinds: &[&str]) -> SiteTruth {
        let type_speed = if self.type_speed.is_empty() {
            Vec::new()
        } else {
            kinds.iter().map(|k| self.type_speed.get(*k).copied().unwrap_or(1.0)).collect()
        };
        SiteTruth {
            slots: self.slots,
            wait_mean: self.wait_mean,
            capacity: self.capacity.value(),
            beta: self.beta,
            speed: self.speed,
            p_fail: self.p_fail,
            cap_windows: self.cap_windows.clone(),
            dead: self.dead,
            type_speed,
        }
    }
}
