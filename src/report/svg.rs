//! Hand-written SVG charts: histogram, sorted area (goodput), stacked areas
//! over time, horizontal bars, grouped bars. Each chart is a standalone
//! `<svg>` element with a title, axes with ticks, axis labels with units and a
//! legend where there is more than one series, so it can be inlined in HTML or
//! saved as a file. No scripts, no external fonts or styles.
//!
//! Many series stay readable because callers pass at most [`MAX_SERIES`]
//! (the rest aggregated into "others"); labels longer than fits are cut with
//! an ellipsis and the full text is kept in a `<title>` tooltip.

use std::fmt::Write;

/// Series drawn in their own colour; callers aggregate the rest.
pub const MAX_SERIES: usize = 12;

/// Colour-blind-friendly palette (Tableau 10 + 2), then grey for "others".
const PALETTE: [&str; MAX_SERIES] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
    "#17becf", "#bcbd22", "#7f7f7f",
];
pub const OTHERS_COLOUR: &str = "#c7c7c7";

/// One series of a chart: label, values, fill colour.
pub type Series = (String, Vec<f64>, String);

pub fn colour(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// Escapes text for XML content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control characters are not allowed in XML 1.0.
            c if (c as u32) < 0x20 && c != '\t' && c != '\n' && c != '\r' => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

/// Cuts a label to `max` characters with an ellipsis.
pub fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// A unit for durations, chosen so that tick labels stay short.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimeUnit {
    pub name: &'static str,
    pub seconds: f64,
}

pub fn time_unit(max_seconds: f64) -> TimeUnit {
    if max_seconds <= 900.0 {
        TimeUnit { name: "s", seconds: 1.0 }
    } else if max_seconds <= 3.0 * 3600.0 {
        TimeUnit { name: "min", seconds: 60.0 }
    } else {
        TimeUnit { name: "h", seconds: 3600.0 }
    }
}

/// Round tick positions covering `[lo, hi]`: about `target` steps of 1, 2 or 5 × 10^k.
pub fn nice_ticks(lo: f64, hi: f64, target: usize) -> Vec<f64> {
    let (lo, hi) = if hi > lo { (lo, hi) } else { (lo, lo + 1.0) };
    let raw = (hi - lo) / target.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
    let first = (lo / step).floor() * step;
    let mut ticks = Vec::new();
    let mut i = 0;
    loop {
        let t = first + step * i as f64;
        ticks.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
        if t >= hi - step * 1e-9 || i > 1000 {
            break;
        }
        i += 1;
    }
    ticks
}

/// Formats a tick value with just enough decimals for its step.
pub fn fmt_tick(v: f64, step: f64) -> String {
    let decimals = if step >= 1.0 { 0 } else { (-step.log10()).ceil().clamp(0.0, 6.0) as usize };
    let s = format!("{v:.decimals$}");
    if s.starts_with('-') && s.trim_start_matches(['-', '0', '.']).is_empty() {
        s[1..].to_string()
    } else {
        s
    }
}

/// How a legend entry is drawn.
#[derive(Clone, Debug, PartialEq)]
pub enum Swatch {
    /// A filled square (areas, bars), of this colour.
    Fill(String),
    /// A line of this colour, solid or dashed.
    Line { stroke: String, dashed: bool },
    /// A dot of this colour (markers).
    Dot(String),
}

/// A plot area with linear x and y axes, drawn into one `<svg>`.
pub struct Frame {
    width: f64,
    height: f64,
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
    xticks: Vec<f64>,
    yticks: Vec<f64>,
    body: String,
    legend: Vec<(String, Swatch)>,
    title: String,
    x_label: String,
    y_label: String,
    /// Category axes (bar charts) label their rows/groups themselves.
    x_numbers: bool,
    y_numbers: bool,
}

impl Frame {
    /// A frame whose axes cover the data ranges, rounded out to ticks.
    pub fn new(title: &str, x_label: &str, y_label: &str, x: (f64, f64), y: (f64, f64)) -> Self {
        Frame {
            width: 760.0,
            height: 360.0,
            left: 70.0,
            right: 24.0,
            top: 40.0,
            bottom: 56.0,
            xticks: nice_ticks(x.0, x.1, 8),
            yticks: nice_ticks(y.0, y.1, 6),
            body: String::new(),
            legend: Vec::new(),
            title: title.to_string(),
            x_label: x_label.to_string(),
            y_label: y_label.to_string(),
            x_numbers: true,
            y_numbers: true,
        }
    }

    /// Makes room at the right for a legend of `entries` series.
    pub fn with_legend(self, entries: Vec<(String, String)>) -> Self {
        self.with_swatches(entries.into_iter().map(|(name, fill)| (name, Swatch::Fill(fill))).collect())
    }

    /// [`Frame::with_legend`] with entries drawn as areas, lines or dots.
    pub fn with_swatches(mut self, entries: Vec<(String, Swatch)>) -> Self {
        if !entries.is_empty() {
            self.right = 230.0;
            self.width = 900.0;
            self.height = self.height.max(70.0 + 18.0 * entries.len() as f64 + self.bottom);
        }
        self.legend = entries;
        self
    }

    pub fn with_left(mut self, left: f64) -> Self {
        self.width += left - self.left;
        self.left = left;
        self
    }

    pub fn with_height(mut self, height: f64) -> Self {
        self.height = height;
        self
    }

    fn x_range(&self) -> (f64, f64) {
        (self.xticks[0], *self.xticks.last().unwrap_or(&1.0))
    }
    fn y_range(&self) -> (f64, f64) {
        (self.yticks[0], *self.yticks.last().unwrap_or(&1.0))
    }
    pub fn px(&self, x: f64) -> f64 {
        let (lo, hi) = self.x_range();
        self.left + (x - lo) / (hi - lo) * (self.width - self.left - self.right)
    }
    pub fn py(&self, y: f64) -> f64 {
        let (lo, hi) = self.y_range();
        self.height - self.bottom - (y - lo) / (hi - lo) * (self.height - self.top - self.bottom)
    }

    /// Appends raw SVG to the plot.
    pub fn push(&mut self, svg: &str) {
        self.body.push_str(svg);
    }

    /// A closed polygon through `points` (data coordinates).
    pub fn polygon(&mut self, points: &[(f64, f64)], fill: &str, tooltip: &str) {
        // In tenths of a pixel, as written. Points that draw nothing (a
        // repeat, or the middle of a horizontal or vertical run: most of a
        // step function's) are left out.
        let at =
            |&(x, y): &(f64, f64)| ((self.px(x) * 10.0).round() as i64, (self.py(y) * 10.0).round() as i64);
        let mut kept: Vec<(i64, i64)> = Vec::with_capacity(points.len());
        for p in points.iter().map(at) {
            if let [.., a, b] = kept[..] {
                if (a.0 == b.0 && b.0 == p.0) || (a.1 == b.1 && b.1 == p.1) {
                    kept.pop();
                }
            }
            if kept.last() != Some(&p) {
                kept.push(p);
            }
        }
        let mut d = String::new();
        for (i, &(x, y)) in kept.iter().enumerate() {
            let _ =
                write!(d, "{}{:.1},{:.1}", if i == 0 { "M" } else { "L" }, x as f64 / 10.0, y as f64 / 10.0);
        }
        d.push('Z');
        let _ = write!(
            self.body,
            r#"<path d="{d}" fill="{fill}" stroke="none"><title>{}</title></path>"#,
            esc(tooltip)
        );
    }

    /// A rectangle in data coordinates.
    pub fn rect(&mut self, x0: f64, x1: f64, y0: f64, y1: f64, fill: &str, tooltip: &str) {
        let (a, b) = (self.px(x0.min(x1)), self.px(x0.max(x1)));
        let (c, d) = (self.py(y0.max(y1)), self.py(y0.min(y1)));
        let _ = write!(
            self.body,
            r#"<rect x="{a:.1}" y="{c:.1}" width="{:.1}" height="{:.1}" fill="{fill}"><title>{}</title></rect>"#,
            (b - a).max(0.5),
            (d - c).max(0.0),
            esc(tooltip)
        );
    }

    /// The finished `<svg>` element.
    pub fn finish(&self) -> String {
        let mut s = String::new();
        let (w, h) = (self.width, self.height);
        let _ = write!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12" role="img"><title>{t}</title><rect width="{w}" height="{h}" fill="white"/><text x="{cx:.1}" y="22" text-anchor="middle" font-size="15" font-weight="bold">{t}</text>"#,
            t = esc(&self.title),
            cx = w / 2.0
        );
        let (x0, x1) = (self.left, self.width - self.right);
        let (y0, y1) = (self.height - self.bottom, self.top);
        // Grid lines and tick labels.
        let ystep = self.yticks.get(1).map_or(1.0, |b| b - self.yticks[0]);
        for &t in &self.yticks {
            let y = self.py(t);
            if !self.y_numbers {
                continue;
            }
            let _ = write!(
                s,
                r##"<line x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#e5e5e5"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                x0 - 6.0,
                y + 4.0,
                fmt_tick(t, ystep)
            );
        }
        let xstep = self.xticks.get(1).map_or(1.0, |b| b - self.xticks[0]);
        for &t in &self.xticks {
            let x = self.px(t);
            if !self.x_numbers {
                continue;
            }
            let _ = write!(
                s,
                r##"<line x1="{x:.1}" y1="{y0}" x2="{x:.1}" y2="{:.1}" stroke="#333"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                y0 + 5.0,
                y0 + 18.0,
                fmt_tick(t, xstep)
            );
        }
        s.push_str(&self.body);
        // Axes on top of the data.
        let _ = write!(
            s,
            r##"<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}" stroke="#333"/><line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" stroke="#333"/>"##
        );
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            (x0 + x1) / 2.0,
            self.height - 14.0,
            esc(&self.x_label)
        );
        let (ly, lx) = ((y0 + y1) / 2.0, 18.0);
        let _ = write!(
            s,
            r#"<text x="{lx}" y="{ly:.1}" text-anchor="middle" transform="rotate(-90 {lx} {ly:.1})">{}</text>"#,
            esc(&self.y_label)
        );
        for (i, (name, swatch)) in self.legend.iter().enumerate() {
            let ly = self.top + 4.0 + 18.0 * i as f64;
            let lx = x1 + 16.0;
            let _ = match swatch {
                Swatch::Fill(fill) => {
                    write!(s, r#"<rect x="{lx}" y="{ly:.1}" width="12" height="12" fill="{fill}"/>"#)
                }
                Swatch::Line { stroke, dashed } => write!(
                    s,
                    r#"<line x1="{lx}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{stroke}" stroke-width="2"{}/>"#,
                    lx + 12.0,
                    if *dashed { DASHED } else { "" },
                    y = ly + 6.0
                ),
                Swatch::Dot(fill) => {
                    write!(s, r#"<circle cx="{:.1}" cy="{:.1}" r="4" fill="{fill}"/>"#, lx + 6.0, ly + 6.0)
                }
            };
            let _ = write!(
                s,
                r#"<text x="{:.1}" y="{:.1}">{}<title>{}</title></text>"#,
                lx + 18.0,
                ly + 10.5,
                esc(&shorten(name, 30)),
                esc(name)
            );
        }
        s.push_str("</svg>");
        s
    }
}

/// Histogram of durations (seconds) in about 20–30 equal bins.
pub fn histogram(title: &str, what: &str, values: &[f64]) -> String {
    let max = values.iter().copied().fold(0.0, f64::max);
    let unit = time_unit(max);
    let hi = (max / unit.seconds).max(1e-9);
    let ticks = nice_ticks(0.0, hi, 25);
    let width = ticks.get(1).map_or(1.0, |b| b - ticks[0]);
    let n_bins = ticks.len().max(2) - 1;
    let mut bins = vec![0usize; n_bins];
    for v in values {
        let i = ((v / unit.seconds) / width).floor().max(0.0) as usize;
        bins[i.min(n_bins - 1)] += 1;
    }
    let ymax = bins.iter().copied().max().unwrap_or(0).max(1) as f64;
    let mut f = Frame::new(
        title,
        &format!("{what} ({}; bin width {} {})", unit.name, fmt_tick(width, width), unit.name),
        "jobs",
        (0.0, width * n_bins as f64),
        (0.0, ymax),
    );
    for (i, &c) in bins.iter().enumerate() {
        if c > 0 {
            let (a, b) = (i as f64 * width, (i + 1) as f64 * width);
            let tip = format!("{}–{} {}: {c} jobs", fmt_tick(a, width), fmt_tick(b, width), unit.name);
            f.rect(a, b, 0.0, c as f64, colour(0), &tip);
        }
    }
    if values.is_empty() {
        f.push(&no_data(&f));
    }
    f.finish()
}

/// The goodput graph: every job's turnaround, sorted, as an area.
pub fn goodput(title: &str, sorted: &[f64]) -> String {
    let max = sorted.last().copied().unwrap_or(0.0);
    let unit = time_unit(max);
    let n = sorted.len();
    let mut f = Frame::new(
        title,
        "jobs, sorted by turnaround (rank)",
        &format!("turnaround ({})", unit.name),
        (0.0, n.max(1) as f64),
        (0.0, (max / unit.seconds).max(1e-9)),
    );
    if n == 0 {
        f.push(&no_data(&f));
        return f.finish();
    }
    // Step outline: job i spans [i, i+1). Thin down to at most ~2000 points.
    let stride = n.div_ceil(1000);
    let mut pts = vec![(0.0, 0.0)];
    let mut i = 0;
    while i < n {
        let j = (i + stride).min(n);
        let y = sorted[j - 1] / unit.seconds;
        pts.push((i as f64, y));
        pts.push((j as f64, y));
        i = j;
    }
    pts.push((n as f64, 0.0));
    let area_h = sorted.iter().sum::<f64>() / 3600.0;
    f.polygon(&pts, colour(0), &format!("area = {area_h:.2} job-hours"));
    let _ = write!(
        f.body,
        r#"<text x="{:.1}" y="{:.1}">area = {} job-hours</text>"#,
        f.px(0.0) + 10.0,
        f.top + 16.0,
        fmt_num(area_h)
    );
    f.finish()
}

/// Stacked areas of step functions: `series[k].1[i]` holds from `t[i]` to `t[i+1]`.
pub fn stacked_steps(title: &str, y_label: &str, t: &[f64], series: &[Series]) -> String {
    let tmax = t.last().copied().unwrap_or(0.0);
    let unit = time_unit(tmax);
    let totals: Vec<f64> = (0..t.len()).map(|i| series.iter().map(|s| s.1[i]).sum()).collect();
    let ymax = totals.iter().copied().fold(0.0, f64::max).max(1.0);
    let legend = series.iter().map(|(n, _, c)| (n.clone(), c.clone())).collect();
    let mut f = Frame::new(
        title,
        &format!("time since first submission ({})", unit.name),
        y_label,
        (0.0, (tmax / unit.seconds).max(1e-9)),
        (0.0, ymax),
    )
    .with_legend(if series.len() > 1 { legend } else { Vec::new() });
    if t.is_empty() {
        f.push(&no_data(&f));
        return f.finish();
    }
    let mut base = vec![0.0; t.len()];
    for (name, values, fill) in series {
        let top: Vec<f64> = base.iter().zip(values).map(|(b, v)| b + v).collect();
        if values.iter().all(|v| *v == 0.0) {
            continue;
        }
        let mut pts = Vec::with_capacity(4 * t.len());
        for i in 0..t.len() {
            let x0 = t[i] / unit.seconds;
            let x1 = t.get(i + 1).copied().unwrap_or(t[i]) / unit.seconds;
            pts.push((x0, top[i]));
            pts.push((x1, top[i]));
        }
        for i in (0..t.len()).rev() {
            let x0 = t[i] / unit.seconds;
            let x1 = t.get(i + 1).copied().unwrap_or(t[i]) / unit.seconds;
            pts.push((x1, base[i]));
            pts.push((x0, base[i]));
        }
        f.polygon(&pts, fill, name);
        base = top;
    }
    f.finish()
}

const DASHED: &str = r#" stroke-dasharray="5 4""#;

/// Colours of the decisions chart: the window, and the verdicts.
const WINDOW_COLOUR: &str = "#222222";
const HEALTHY_COLOUR: &str = "#2ca02c";
const DEGRADED_COLOUR: &str = "#d62728";

/// Steps drawn at most in one chart: a longer step function is reduced to
/// its maximum per x bucket (a 10^6-job site would otherwise make an SVG of
/// megabytes that no screen can show anyway).
const MAX_STEPS: usize = 1500;

/// A point of [`decisions`]' window line: from `.0` seconds on, a window of
/// `.1` jobs and the capacity found `.2`.
pub type WindowStep = (f64, f64, Option<f64>);

/// A test's verdict, marked on [`decisions`].
#[derive(Clone, Debug, PartialEq)]
pub struct Mark {
    /// Seconds.
    pub t: f64,
    /// Jobs running when the test judged (the dot's height).
    pub level: f64,
    pub healthy: bool,
    pub tooltip: String,
}

/// One site's running jobs as an area, and over it what the scheduler
/// decided: the window (`windows[i] = (t, window, capacity)` holds from `t`
/// to the next point) as a step line, the capacity found as a dashed step
/// line (absent while none), and the verdicts as dots at the level judged,
/// green for healthy and red for degraded. `t`/`running` as in
/// [`stacked_steps`]. Elements carry classes `running`, `window`,
/// `capacity`, `verdict healthy`, `verdict degraded`.
pub fn decisions(
    title: &str,
    t: &[f64],
    running: &[f64],
    fill: &str,
    windows: &[WindowStep],
    marks: &[Mark],
) -> String {
    let tmax = t
        .iter()
        .chain(windows.iter().map(|w| &w.0))
        .chain(marks.iter().map(|m| &m.t))
        .copied()
        .fold(0.0, f64::max);
    let unit = time_unit(tmax);
    let x_end = (tmax / unit.seconds).max(1e-9);
    let seen = running
        .iter()
        .copied()
        .chain(windows.iter().filter_map(|w| w.2))
        .chain(marks.iter().map(|m| m.level))
        .fold(1.0, f64::max);
    // A window far above anything that ran (no knee found yet) would flatten
    // the chart; it is drawn cut at the top.
    let ymax = windows.iter().map(|w| w.1).fold(seen, f64::max).min(2.0 * seen);
    let legend = vec![
        ("jobs running".to_string(), Swatch::Fill(fill.to_string())),
        ("window".to_string(), Swatch::Line { stroke: WINDOW_COLOUR.into(), dashed: false }),
        ("capacity found".to_string(), Swatch::Line { stroke: WINDOW_COLOUR.into(), dashed: true }),
        ("verdict: healthy".to_string(), Swatch::Dot(HEALTHY_COLOUR.into())),
        ("verdict: degraded".to_string(), Swatch::Dot(DEGRADED_COLOUR.into())),
    ];
    let mut f = Frame::new(
        title,
        &format!("time since first submission ({})", unit.name),
        "jobs",
        (0.0, x_end),
        (0.0, ymax),
    )
    .with_swatches(legend);
    let (t, running) = step_envelope(t, running, tmax, MAX_STEPS);
    if !t.is_empty() {
        let mut pts = Vec::with_capacity(2 * t.len() + 2);
        pts.push((t[0] / unit.seconds, 0.0));
        for i in 0..t.len() {
            let next = t.get(i + 1).copied().unwrap_or(t[i]);
            pts.push((t[i] / unit.seconds, running[i]));
            pts.push((next / unit.seconds, running[i]));
        }
        pts.push((t[t.len() - 1] / unit.seconds, 0.0));
        f.polygon(&pts, fill, "jobs running");
        f.body = f.body.replacen("<path d=", r#"<path class="running" d="#, 1);
    }
    let y = |f: &Frame, v: f64| f.py(v.min(ymax));
    let steps = |f: &Frame, value: &dyn Fn(&WindowStep) -> Option<f64>| {
        let mut d = String::new();
        let mut open = false;
        for (i, w) in windows.iter().enumerate() {
            let x0 = f.px(w.0 / unit.seconds);
            let x1 = f.px(windows.get(i + 1).map_or(x_end, |n| n.0 / unit.seconds));
            match value(w) {
                Some(v) if open => {
                    let _ = write!(d, "V{:.1}H{x1:.1}", y(f, v));
                }
                Some(v) => {
                    let _ = write!(d, "M{x0:.1},{:.1}H{x1:.1}", y(f, v));
                    open = true;
                }
                None => open = false,
            }
        }
        d
    };
    let window_path = steps(&f, &|w| Some(w.1));
    let capacity_path = steps(&f, &|w| w.2);
    let mut overlay = String::new();
    if !window_path.is_empty() {
        let _ = write!(
            overlay,
            r#"<path class="window" d="{window_path}" fill="none" stroke="{WINDOW_COLOUR}" stroke-width="1.5"><title>window: jobs the scheduler let out at this site</title></path>"#
        );
    }
    if !capacity_path.is_empty() {
        let _ = write!(
            overlay,
            r#"<path class="capacity" d="{capacity_path}" fill="none" stroke="{WINDOW_COLOUR}" stroke-width="1.5"{DASHED}><title>capacity found: the most jobs seen running healthy</title></path>"#
        );
    }
    for m in marks {
        let (class, colour) = if m.healthy {
            ("verdict healthy", HEALTHY_COLOUR)
        } else {
            ("verdict degraded", DEGRADED_COLOUR)
        };
        let _ = write!(
            overlay,
            r#"<circle class="{class}" cx="{:.1}" cy="{:.1}" r="4" fill="{colour}" stroke="white"><title>{}</title></circle>"#,
            f.px(m.t / unit.seconds),
            y(&f, m.level),
            esc(&m.tooltip)
        );
    }
    if t.is_empty() && windows.is_empty() {
        overlay.push_str(&no_data(&f));
    }
    f.push(&overlay);
    f.finish()
}

/// The step function `t`/`v` with at most about `buckets` steps: each of
/// `buckets` equal spans of `[0, tmax]` gets the largest value held in it.
/// Shorter functions are returned as they are.
pub fn step_envelope(t: &[f64], v: &[f64], tmax: f64, buckets: usize) -> (Vec<f64>, Vec<f64>) {
    if t.len() <= 2 * buckets || tmax <= 0.0 {
        return (t.to_vec(), v.to_vec());
    }
    let width = tmax / buckets as f64;
    let bucket = |x: f64| ((x / width).floor().max(0.0) as usize).min(buckets - 1);
    let mut top = vec![f64::NEG_INFINITY; buckets];
    for i in 0..t.len() {
        let end = t.get(i + 1).copied().unwrap_or(t[i]);
        for b in &mut top[bucket(t[i])..=bucket(end)] {
            *b = b.max(v[i]);
        }
    }
    let mut out = (Vec::new(), Vec::new());
    for (k, value) in top.into_iter().enumerate() {
        if value.is_finite() && out.1.last() != Some(&value) {
            out.0.push(k as f64 * width);
            out.1.push(value);
        }
    }
    out
}

/// Horizontal bars, one per labelled value (`None` = no data, drawn as "n/a").
pub fn hbars(title: &str, x_label: &str, bars: &[(String, Option<f64>, String)]) -> String {
    let max = bars.iter().filter_map(|b| b.1).fold(0.0, f64::max).max(1e-9);
    let row = 22.0;
    let height = 40.0 + 56.0 + row * bars.len().max(1) as f64 + 10.0;
    let mut f = Frame::new(title, x_label, "", (0.0, max), (0.0, bars.len().max(1) as f64))
        .with_left(250.0)
        .with_height(height);
    f.yticks = vec![0.0, bars.len().max(1) as f64];
    f.y_numbers = false;
    let mut labels = String::new();
    for (i, (name, value, fill)) in bars.iter().enumerate() {
        // Row i from the top.
        let y_top = bars.len() as f64 - i as f64;
        let (a, b) = (y_top - 0.15, y_top - 0.85);
        let cy = (f.py(a) + f.py(b)) / 2.0 + 4.0;
        let _ = write!(
            labels,
            r#"<text x="{:.1}" y="{cy:.1}" text-anchor="end">{}<title>{}</title></text>"#,
            f.left - 8.0,
            esc(&shorten(name, 34)),
            esc(name)
        );
        match value {
            Some(v) => {
                f.rect(0.0, *v, b, a, fill, &format!("{name}: {}", fmt_num(*v)));
                let _ =
                    write!(labels, r#"<text x="{:.1}" y="{cy:.1}">{}</text>"#, f.px(*v) + 4.0, fmt_num(*v));
            }
            None => {
                let _ = write!(
                    labels,
                    r##"<text x="{:.1}" y="{cy:.1}" fill="#777">n/a</text>"##,
                    f.px(0.0) + 4.0
                );
            }
        }
    }
    if bars.is_empty() {
        labels.push_str(&no_data(&f));
    }
    f.push(&labels);
    f.finish()
}

/// Grouped vertical bars: groups along x, one bar per series in each group.
/// `values[g][s]`; `None` is drawn as a label (e.g. "hang").
pub fn grouped_bars(
    title: &str,
    y_label: &str,
    groups: &[String],
    series: &[String],
    values: &[Vec<Option<f64>>],
    missing_label: &str,
    reference: Option<f64>,
) -> String {
    let max = values.iter().flatten().flatten().copied().fold(0.0, f64::max).max(1e-9);
    let legend = series.iter().enumerate().map(|(i, s)| (s.clone(), colour(i).to_string())).collect();
    let mut f = Frame::new(title, "scenario", y_label, (0.0, groups.len().max(1) as f64), (0.0, max))
        .with_legend(legend);
    f.xticks = vec![0.0, groups.len().max(1) as f64];
    f.x_numbers = false;
    let n_s = series.len().max(1) as f64;
    let mut labels = String::new();
    for (g, name) in groups.iter().enumerate() {
        let _ = write!(
            labels,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            f.px(g as f64 + 0.5),
            f.height - f.bottom + 18.0,
            esc(&shorten(name, 14))
        );
        for (s, series_name) in series.iter().enumerate() {
            let x0 = g as f64 + 0.1 + 0.8 * s as f64 / n_s;
            let x1 = x0 + 0.8 / n_s;
            match values.get(g).and_then(|row| row.get(s)).copied().flatten() {
                Some(v) => {
                    f.rect(x0, x1, 0.0, v, colour(s), &format!("{name} {series_name}: {}", fmt_num(v)))
                }
                None => {
                    let _ = write!(
                        labels,
                        r##"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="#b00" font-size="10" transform="rotate(-90 {0:.1} {1:.1})">{}</text>"##,
                        f.px((x0 + x1) / 2.0) + 3.0,
                        f.py(0.0) - 4.0,
                        esc(missing_label)
                    );
                }
            }
        }
    }
    if let Some(r) = reference {
        let y = f.py(r);
        let _ = write!(
            labels,
            r##"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#333" stroke-dasharray="4 3"/>"##,
            f.left,
            f.width - f.right
        );
    }
    f.push(&labels);
    f.finish()
}

fn no_data(f: &Frame) -> String {
    format!(
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#777">no data</text>"##,
        (f.left + f.width - f.right) / 2.0,
        (f.top + f.height - f.bottom) / 2.0
    )
}

/// A number with about three significant digits.
pub fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(nice_ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        let t = nice_ticks(0.0, 437.0, 6);
        assert_eq!(t[0], 0.0);
        assert!(*t.last().unwrap() >= 437.0);
        assert!(t.len() <= 12, "{t:?}");
        assert_eq!(nice_ticks(0.0, 0.0, 5).first(), Some(&0.0));
    }

    #[test]
    fn labels_are_escaped_and_shortened() {
        assert_eq!(esc("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
        assert_eq!(shorten("abcdef", 4), "abc…");
        assert_eq!(shorten("abc", 4), "abc");
    }

    #[test]
    fn charts_have_titles_and_axis_labels() {
        let h = histogram("T", "turnaround", &[1.0, 2.0, 30.0]);
        assert!(h.starts_with("<svg") && h.ends_with("</svg>"));
        assert!(h.contains("turnaround (s;"));
        assert!(h.contains(">jobs<"));
        let empty = goodput("G", &[]);
        assert!(empty.contains("no data"));
    }

    #[test]
    fn a_long_step_function_keeps_its_peaks_within_the_bound() {
        // 10 000 steps alternating 1 and 0, with one spike of 9 in the middle.
        let t: Vec<f64> = (0..10_000).map(f64::from).collect();
        let mut v: Vec<f64> = (0..10_000).map(|i| f64::from(i % 2)).collect();
        v[5_001] = 9.0;
        let (tt, vv) = step_envelope(&t, &v, 10_000.0, 100);
        assert!(tt.len() <= 100, "{}", tt.len());
        assert_eq!(vv.iter().copied().fold(0.0, f64::max), 9.0, "the spike survives");
        assert_eq!(tt.len(), vv.len());
        let short = step_envelope(&t[..10], &v[..10], 10.0, 100);
        assert_eq!(short, (t[..10].to_vec(), v[..10].to_vec()));
    }

    #[test]
    fn the_decisions_chart_draws_window_capacity_and_verdicts() {
        let windows = [(0.0, 16.0, None), (100.0, 32.0, Some(16.0)), (300.0, 20.0, Some(16.0))];
        let marks = [
            Mark { t: 100.0, level: 16.0, healthy: true, tooltip: "healthy at 16".into() },
            Mark { t: 300.0, level: 30.0, healthy: false, tooltip: "degraded at 30 <2×>".into() },
        ];
        let svg = decisions("site a", &[0.0, 50.0, 400.0], &[10.0, 16.0, 0.0], "#4e79a7", &windows, &marks);
        assert_eq!(svg.matches(r#"class="window""#).count(), 1);
        assert_eq!(svg.matches(r#"class="capacity""#).count(), 1);
        assert_eq!(svg.matches(r#"class="verdict healthy""#).count(), 1);
        assert_eq!(svg.matches(r#"class="verdict degraded""#).count(), 1);
        assert!(svg.contains("degraded at 30 &lt;2×&gt;"), "tooltips are escaped");
        assert!(svg.contains(r#"class="running""#));
        // The capacity line starts where the first capacity was found, not at 0.
        let capacity = svg.split(r#"class="capacity" d="M"#).nth(1).unwrap();
        let x: f64 = capacity.split(',').next().unwrap().parse().unwrap();
        let window = svg.split(r#"class="window" d="M"#).nth(1).unwrap();
        let x0: f64 = window.split(',').next().unwrap().parse().unwrap();
        assert!(x > x0, "capacity from {x}, window from {x0}");
        for name in ["window", "capacity found", "verdict: degraded"] {
            assert!(svg.contains(&format!(">{name}<")), "legend names {name}");
        }
    }
}
