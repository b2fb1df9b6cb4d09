//! `splab plot`: figures from JSON reports, the project's one plotting path (seed 000 6.5's
//! Figure 5: contiguity against time).
//!
//! One line per report (a `splab run --json` report, or every report of a `splab compare
//! --json` comparison), x = simulated seconds, y = one of the report's time series; dotted
//! vertical lines at phase boundaries (`workload_stats.phases` of `seq(...)` runs).
//!
//! A sweep (`--x-values`) draws instead one point per report: the reports are taken in order, as
//! many per line as there are x values, and y is any number of the report named by its JSON path
//! (`tlb.levels.0.misses`, `time.cycles_total`): seed 004 Figure 2's TLB misses against matrix size.
//!
//! Both formats are drawn by this file from one layout: SVG as text, PNG rasterised here and
//! encoded with the `png` crate. Text in the PNG is drawn with the public-domain 8x8 bitmap font
//! of the `font8x8` crate, so no system font is needed (CI machines have none).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use serde_json::Value;
use splab_sim::SimError;

/// The series `-y` accepts.
pub const METRICS: &[&str] = &["contiguity", "superpage_bytes", "footprint_bytes"];

/// One plotted line.
#[derive(Clone, Debug)]
pub struct Line {
    pub label: String,
    pub xs: Vec<f64>,
    pub ys: Vec<f64>,
}

/// What to draw.
#[derive(Clone, Debug)]
pub struct Figure {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub lines: Vec<Line>,
    /// Phase boundaries, simulated seconds.
    pub phases: Vec<f64>,
    pub width: u32,
    pub height: u32,
}

fn bad(msg: String) -> anyhow::Error {
    SimError::BadInput(msg).into()
}

/// The reports in `paths`: each file holds a report or a comparison (all its reports), in order.
fn read_reports(paths: &[String]) -> Result<Vec<(String, Value)>> {
    let mut reports: Vec<(String, Value)> = Vec::new();
    for p in paths {
        let text =
            std::fs::read_to_string(p).map_err(|e| bad(format!("plot: cannot read '{p}': {e}")))?;
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| bad(format!("plot: '{p}' is not JSON: {e}")))?;
        match v["schema"].as_str() {
            Some(s) if s.starts_with("splab.report.") => reports.push((p.clone(), v)),
            Some(s) if s.starts_with("splab.compare.") => {
                // An empty list too: a figure with no line would be written, exit status 0.
                let Some(rs) = v["reports"].as_array().filter(|rs| !rs.is_empty()) else {
                    return Err(bad(format!("plot: comparison '{p}' holds no reports")));
                };
                for r in rs {
                    reports.push((p.clone(), r.clone()));
                }
            }
            _ => {
                return Err(bad(format!(
                    "plot: '{p}' is not a splab report (expected the JSON of `splab run --json` or `splab compare --json`)"
                )))
            }
        }
    }
    Ok(reports)
}

/// A number of a report by its dotted JSON path (`tlb.levels.0.misses`).
fn lookup(r: &Value, path: &str) -> Option<f64> {
    let mut v = r;
    for part in path.split('.') {
        v = match part.parse::<usize>() {
            Ok(i) if v.is_array() => v.get(i)?,
            _ => v.get(part)?,
        };
    }
    v.as_f64()
}

/// A sweep: `x_values.len()` consecutive reports per line, y = the number at `y_path` of each.
/// `labels`: one per line, or empty for each line's first policy spec.
pub fn sweep(
    paths: &[String],
    x_values: &[f64],
    y_path: &str,
    labels: &[String],
    title: Option<&str>,
    x_label: Option<&str>,
) -> Result<Figure> {
    if x_values.is_empty() {
        return Err(bad("plot: --x-values is empty".into()));
    }
    if let Some(x) = x_values.iter().find(|x| !x.is_finite()) {
        return Err(bad(format!(
            "plot: --x-values {x}: each x must be a finite number"
        )));
    }
    let reports = read_reports(paths)?;
    let n = x_values.len();
    if reports.is_empty() || reports.len() % n != 0 {
        return Err(bad(format!(
            "plot: {} reports for {n} x values: a sweep takes {n} reports per line, in x order",
            reports.len()
        )));
    }
    let nlines = reports.len() / n;
    if !labels.is_empty() && labels.len() != nlines {
        return Err(bad(format!(
            "plot: {} --label given for {nlines} lines (one per line of {n} reports, or none)",
            labels.len()
        )));
    }
    let mut lines = Vec::new();
    for (k, chunk) in reports.chunks(n).enumerate() {
        let mut ys = Vec::with_capacity(n);
        for (p, r) in chunk {
            ys.push(lookup(r, y_path).ok_or_else(|| {
                bad(format!(
                    "plot: a report in '{p}' has no number at '{y_path}' (a dotted JSON path, e.g. tlb.levels.0.misses)"
                ))
            })?);
        }
        let label = match labels.get(k) {
            Some(l) => l.clone(),
            None => chunk[0].1["config"]["policy"]
                .as_str()
                .unwrap_or(&chunk[0].0)
                .to_string(),
        };
        lines.push(Line {
            label,
            xs: x_values.to_vec(),
            ys,
        });
    }
    let default_title = reports[0].1["config"]["machine"]
        .as_str()
        .map(|m| format!("{y_path} on {m}"))
        .unwrap_or_else(|| y_path.to_string());
    Ok(Figure {
        title: title.map(str::to_string).unwrap_or(default_title),
        x_label: x_label.unwrap_or("x").to_string(),
        y_label: y_path.to_string(),
        lines,
        phases: Vec::new(),
        width: 800,
        height: 500,
    })
}

/// Reads the reports in `paths` (a report, or a comparison holding several) and builds the
/// figure of `metric`. `labels`: one per line, or empty for the reports' policy specs.
pub fn figure(
    paths: &[String],
    metric: &str,
    labels: &[String],
    title: Option<&str>,
) -> Result<Figure> {
    if !METRICS.contains(&metric) {
        return Err(bad(format!(
            "plot: unknown series '{metric}' (valid: {})",
            METRICS.join(", ")
        )));
    }
    let reports = read_reports(paths)?;
    if !labels.is_empty() && labels.len() != reports.len() {
        return Err(bad(format!(
            "plot: {} --label given for {} lines (one per report, or none)",
            labels.len(),
            reports.len()
        )));
    }
    let mut lines = Vec::new();
    let mut phases: Vec<f64> = Vec::new();
    let scale = if metric == "contiguity" {
        100.0
    } else {
        1.0 / (1u64 << 20) as f64
    };
    for (i, (p, r)) in reports.iter().enumerate() {
        let series = &r["series"];
        let (Some(t), Some(y)) = (series["t"].as_array(), series[metric].as_array()) else {
            return Err(bad(format!(
                "plot: report in '{p}' has no series '{metric}' (series.t and series.{metric})"
            )));
        };
        if t.is_empty() {
            return Err(bad(format!(
                "plot: report in '{p}': series.t is empty (no sample to draw)"
            )));
        }
        if t.len() != y.len() {
            return Err(bad(format!(
                "plot: report in '{p}': series.t and series.{metric} differ in length"
            )));
        }
        let xs: Vec<f64> = t.iter().filter_map(Value::as_f64).collect();
        let ys: Vec<f64> = y
            .iter()
            .filter_map(|v| v.as_f64().map(|v| v * scale))
            .collect();
        if xs.len() != t.len() || ys.len() != y.len() {
            return Err(bad(format!(
                "plot: report in '{p}': series.{metric} holds non-numbers"
            )));
        }
        let label = match labels.get(i) {
            Some(l) => l.clone(),
            None => r["config"]["policy"].as_str().unwrap_or(p).to_string(),
        };
        if let Some(ph) = r["workload_stats"]["phases"].as_array() {
            for x in ph.iter().filter_map(Value::as_f64) {
                if !phases.iter().any(|&q| (q - x).abs() < 1e-9) {
                    phases.push(x);
                }
            }
        }
        lines.push(Line { label, xs, ys });
    }
    let default_title = match reports.first() {
        Some((_, r)) => r["config"]["workload"].as_str().unwrap_or("").to_string(),
        None => String::new(),
    };
    Ok(Figure {
        title: title.map(str::to_string).unwrap_or(default_title),
        x_label: "simulated time (s)".into(),
        y_label: match metric {
            "contiguity" => "available contiguity (%)".into(),
            m => format!("{} (MB)", m.trim_end_matches("_bytes").replace('_', " ")),
        },
        lines,
        phases,
        width: 800,
        height: 500,
    })
}

/// Whether `out` names a PNG (else an SVG); an error for any other extension.
pub fn is_png(out: &str) -> Result<bool> {
    let ext = Path::new(out)
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("svg") => Ok(false),
        Some("png") => Ok(true),
        _ => Err(bad(format!(
            "plot: output '{out}' must end in .svg or .png"
        ))),
    }
}

/// The figure as the bytes of `out`'s format: `.svg` or `.png`.
pub fn render(fig: &Figure, out: &str) -> Result<Vec<u8>> {
    Ok(if is_png(out)? {
        png(fig)?
    } else {
        svg(fig).into_bytes()
    })
}

const COLOURS: &[(u8, u8, u8)] = &[
    (31, 119, 180),
    (214, 39, 40),
    (44, 160, 44),
    (255, 127, 14),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
];

/// Ticks at 1, 2 or 5 x 10^k covering [lo, hi].
fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let span = (hi - lo).max(1e-12);
    let raw = span / 6.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| span / s <= 7.0)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() as i64;
    (first..)
        .map(|i| i as f64 * step)
        .take_while(|&x| x <= hi + step * 1e-9)
        .collect()
}

fn fmt_tick(x: f64) -> String {
    let s = format!("{x:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

/// The figure in pixel coordinates: what both formats draw.
struct Layout {
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
    xt: Vec<f64>,
    yt: Vec<f64>,
}

impl Layout {
    fn new(f: &Figure) -> Layout {
        let xmax = f
            .lines
            .iter()
            .flat_map(|l| l.xs.iter().copied())
            .chain(f.phases.iter().copied())
            .fold(0.0f64, f64::max);
        let ymax = f
            .lines
            .iter()
            .flat_map(|l| l.ys.iter().copied())
            .fold(0.0f64, f64::max);
        let x1 = if xmax > 0.0 { xmax } else { 1.0 };
        let y1 = if ymax > 0.0 { ymax * 1.05 } else { 1.0 };
        let (xt, yt) = (ticks(0.0, x1), ticks(0.0, y1));
        Layout {
            left: 70.0,
            right: f.width as f64 - 20.0,
            top: 40.0,
            bottom: f.height as f64 - 50.0,
            x0: 0.0,
            x1,
            y0: 0.0,
            y1,
            xt,
            yt,
        }
    }
    fn px(&self, x: f64) -> f64 {
        self.left + (x - self.x0) / (self.x1 - self.x0) * (self.right - self.left)
    }
    fn py(&self, y: f64) -> f64 {
        self.bottom - (y - self.y0) / (self.y1 - self.y0) * (self.bottom - self.top)
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The figure as SVG: one `<polyline>` per line, nothing else drawn as a polyline.
pub fn svg(f: &Figure) -> String {
    let l = Layout::new(f);
    let mut s = String::new();
    let (w, h) = (f.width, f.height);
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="24" text-anchor="middle" font-size="14">{}</text>"#,
        w / 2,
        esc(&f.title)
    );
    let _ = writeln!(
        s,
        r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="none" stroke="black"/>"#,
        l.left,
        l.top,
        l.right - l.left,
        l.bottom - l.top
    );
    for &x in &l.xt {
        let _ = writeln!(
            s,
            r#"<line x1="{0:.1}" y1="{1:.1}" x2="{0:.1}" y2="{2:.1}" stroke="black"/><text x="{0:.1}" y="{3:.1}" text-anchor="middle">{4}</text>"#,
            l.px(x),
            l.bottom,
            l.bottom + 5.0,
            l.bottom + 18.0,
            fmt_tick(x)
        );
    }
    for &y in &l.yt {
        let _ = writeln!(
            s,
            r#"<line x1="{0:.1}" y1="{1:.1}" x2="{2:.1}" y2="{1:.1}" stroke="black"/><text x="{3:.1}" y="{4:.1}" text-anchor="end">{5}</text>"#,
            l.left - 5.0,
            l.py(y),
            l.left,
            l.left - 8.0,
            l.py(y) + 4.0,
            fmt_tick(y)
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
        (l.left + l.right) / 2.0,
        h - 12,
        esc(&f.x_label)
    );
    let _ = writeln!(
        s,
        r#"<text x="16" y="{0:.1}" text-anchor="middle" transform="rotate(-90 16 {0:.1})">{1}</text>"#,
        (l.top + l.bottom) / 2.0,
        esc(&f.y_label)
    );
    for &x in &f.phases {
        let _ = writeln!(
            s,
            r#"<line x1="{0:.1}" y1="{1:.1}" x2="{0:.1}" y2="{2:.1}" stroke="gray" stroke-dasharray="2,3"/>"#,
            l.px(x),
            l.top,
            l.bottom
        );
    }
    for (i, line) in f.lines.iter().enumerate() {
        let (r, g, b) = COLOURS[i % COLOURS.len()];
        let pts: Vec<String> = line
            .xs
            .iter()
            .zip(&line.ys)
            .map(|(&x, &y)| format!("{:.1},{:.1}", l.px(x), l.py(y)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="rgb({r},{g},{b})" stroke-width="1.5" points="{}"/>"#,
            pts.join(" ")
        );
        let ly = l.top + 14.0 + 16.0 * i as f64;
        let _ = writeln!(
            s,
            r#"<line x1="{0:.1}" y1="{1:.1}" x2="{2:.1}" y2="{1:.1}" stroke="rgb({r},{g},{b})" stroke-width="2"/><text x="{3:.1}" y="{4:.1}" text-anchor="end">{5}</text>"#,
            l.right - 30.0,
            ly,
            l.right - 10.0,
            l.right - 35.0,
            ly + 4.0,
            esc(&line.label)
        );
    }
    s.push_str("</svg>\n");
    s
}

/// An RGB raster.
struct Canvas {
    w: i64,
    h: i64,
    px: Vec<u8>,
}

impl Canvas {
    fn new(w: u32, h: u32) -> Canvas {
        Canvas {
            w: w as i64,
            h: h as i64,
            px: vec![255; w as usize * h as usize * 3],
        }
    }
    fn set(&mut self, x: i64, y: i64, c: (u8, u8, u8)) {
        if x >= 0 && y >= 0 && x < self.w && y < self.h {
            let i = ((y * self.w + x) * 3) as usize;
            self.px[i..i + 3].copy_from_slice(&[c.0, c.1, c.2]);
        }
    }
    /// A line `thick` pixels wide; `dash`: draw `dash` pixels of every `2 * dash` (0: solid).
    fn line(&mut self, a: (f64, f64), b: (f64, f64), c: (u8, u8, u8), thick: i64, dash: usize) {
        let n = ((b.0 - a.0).abs().max((b.1 - a.1).abs()).ceil() as usize).max(1);
        for k in 0..=n {
            if dash > 0 && (k / dash) % 2 == 1 {
                continue;
            }
            let t = k as f64 / n as f64;
            let (x, y) = (a.0 + (b.0 - a.0) * t, a.1 + (b.1 - a.1) * t);
            for d in 0..thick {
                let o = d - thick / 2;
                self.set(x.round() as i64 + o, y.round() as i64, c);
                self.set(x.round() as i64, y.round() as i64 + o, c);
            }
        }
    }
    /// Text in the 8x8 bitmap font; `anchor`: 0 start, 1 middle, 2 end; `y` is the baseline.
    fn text(&mut self, x: f64, y: f64, s: &str, anchor: u8) {
        let width = 8 * s.chars().count() as i64;
        let x0 = x.round() as i64
            - match anchor {
                1 => width / 2,
                2 => width,
                _ => 0,
            };
        let y0 = y.round() as i64 - 8;
        for (i, ch) in s.chars().enumerate() {
            let glyph = font8x8::legacy::BASIC_LEGACY
                .get(ch as usize)
                .copied()
                .unwrap_or(font8x8::legacy::BASIC_LEGACY[b'?' as usize]);
            for (row, bits) in glyph.iter().enumerate() {
                for col in 0..8 {
                    if (bits >> col) & 1 == 1 {
                        self.set(x0 + 8 * i as i64 + col, y0 + row as i64, (0, 0, 0));
                    }
                }
            }
        }
    }
    /// Text turned 90 degrees counter-clockwise, centred on (x, y).
    fn text_up(&mut self, x: f64, y: f64, s: &str) {
        let len = 8 * s.chars().count() as i64;
        let (cx, cy) = (x.round() as i64 - 4, y.round() as i64 + len / 2);
        for (i, ch) in s.chars().enumerate() {
            let glyph = font8x8::legacy::BASIC_LEGACY
                .get(ch as usize)
                .copied()
                .unwrap_or(font8x8::legacy::BASIC_LEGACY[b'?' as usize]);
            for (row, bits) in glyph.iter().enumerate() {
                for col in 0..8 {
                    if (bits >> col) & 1 == 1 {
                        self.set(cx + row as i64, cy - 8 * i as i64 - col, (0, 0, 0));
                    }
                }
            }
        }
    }
}

/// The figure as PNG, drawn from the same layout as `svg`.
pub fn png(f: &Figure) -> Result<Vec<u8>> {
    let l = Layout::new(f);
    let mut c = Canvas::new(f.width, f.height);
    let k = (0, 0, 0);
    c.text(f.width as f64 / 2.0, 24.0, &f.title, 1);
    for (a, b) in [
        ((l.left, l.top), (l.right, l.top)),
        ((l.right, l.top), (l.right, l.bottom)),
        ((l.right, l.bottom), (l.left, l.bottom)),
        ((l.left, l.bottom), (l.left, l.top)),
    ] {
        c.line(a, b, k, 1, 0);
    }
    for &x in &l.xt {
        c.line((l.px(x), l.bottom), (l.px(x), l.bottom + 5.0), k, 1, 0);
        c.text(l.px(x), l.bottom + 18.0, &fmt_tick(x), 1);
    }
    for &y in &l.yt {
        c.line((l.left - 5.0, l.py(y)), (l.left, l.py(y)), k, 1, 0);
        c.text(l.left - 8.0, l.py(y) + 4.0, &fmt_tick(y), 2);
    }
    c.text(
        (l.left + l.right) / 2.0,
        f.height as f64 - 12.0,
        &f.x_label,
        1,
    );
    c.text_up(16.0, (l.top + l.bottom) / 2.0, &f.y_label);
    for &x in &f.phases {
        c.line((l.px(x), l.top), (l.px(x), l.bottom), (128, 128, 128), 1, 3);
    }
    for (i, line) in f.lines.iter().enumerate() {
        let col = COLOURS[i % COLOURS.len()];
        for w in line.xs.iter().zip(&line.ys).collect::<Vec<_>>().windows(2) {
            let (a, b) = (
                (l.px(*w[0].0), l.py(*w[0].1)),
                (l.px(*w[1].0), l.py(*w[1].1)),
            );
            c.line(a, b, col, 2, 0);
        }
        let ly = l.top + 14.0 + 16.0 * i as f64;
        c.line((l.right - 30.0, ly), (l.right - 10.0, ly), col, 2, 0);
        c.text(l.right - 35.0, ly + 4.0, &line.label, 2);
    }
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, f.width, f.height);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut w = enc.write_header().context("plot: PNG header")?;
        w.write_image_data(&c.px).context("plot: PNG data")?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        let f = |lo, hi| ticks(lo, hi).into_iter().map(fmt_tick).collect::<Vec<_>>();
        assert_eq!(f(0.0, 1.0), ["0", "0.2", "0.4", "0.6", "0.8", "1"]);
        assert_eq!(f(0.0, 105.0), ["0", "20", "40", "60", "80", "100"]);
        assert_eq!(f(0.0, 3.7), ["0", "1", "2", "3"]);
    }
}
