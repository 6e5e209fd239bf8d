//! SVG rendering of a [`PlotSpec`] over a [`Table`]: a grid of panels with
//! axes, ticks, grid lines and one shared legend.

use std::fmt::Write;

use crate::{arrange, Panel, PlotError, PlotKind, PlotSpec, Series, Table};

const PANEL_W: f64 = 380.0;
const PANEL_H: f64 = 270.0;
const MARGIN_LEFT: f64 = 64.0;
const MARGIN_RIGHT: f64 = 14.0;
const MARGIN_TOP: f64 = 28.0;
const MARGIN_BOTTOM: f64 = 46.0;
const MAX_PANEL_COLUMNS: usize = 3;
const LEGEND_ROW_H: f64 = 18.0;
const COLORS: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

/// Draws `spec` over `table` as an SVG document.
pub fn render(spec: &PlotSpec, table: &Table) -> Result<String, PlotError> {
    let panels = arrange(spec, table)?;
    // Series labels across panels share colors.
    let mut labels: Vec<String> = Vec::new();
    for p in &panels {
        for s in &p.series {
            if !labels.contains(&s.label) {
                labels.push(s.label.clone());
            }
        }
    }
    let numeric_x = spec.kind == PlotKind::Lines
        && panels
            .iter()
            .flat_map(|p| &p.series)
            .flat_map(|s| &s.points)
            .all(|(x, _)| x.parse::<f64>().is_ok_and(f64::is_finite));
    let cols = panels.len().min(MAX_PANEL_COLUMNS);
    let rows = panels.len().div_ceil(cols);
    let longest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0);
    let legend_item_w = 30.0 + 6.6 * longest as f64;
    let legend_per_row = ((cols as f64 * PANEL_W - 12.0) / legend_item_w)
        .floor()
        .max(1.0) as usize;
    let legend_rows = labels.len().div_ceil(legend_per_row);
    let title_h = if spec.title.is_empty() { 10.0 } else { 34.0 };
    let legend_h = legend_rows as f64 * LEGEND_ROW_H + 8.0;
    let width = cols as f64 * PANEL_W;
    let height = title_h + legend_h + rows as f64 * PANEL_H;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(
        out,
        r#"<rect width="{width}" height="{height}" fill="white"/>"#
    );
    if !spec.title.is_empty() {
        let _ = writeln!(
            out,
            r#"<text x="{}" y="22" text-anchor="middle" font-size="14" font-weight="bold">{}</text>"#,
            width / 2.0,
            esc(&spec.title)
        );
    }
    for (i, label) in labels.iter().enumerate() {
        let x = 12.0 + (i % legend_per_row) as f64 * legend_item_w;
        let y = title_h + 12.0 + (i / legend_per_row) as f64 * LEGEND_ROW_H;
        let c = COLORS[i % COLORS.len()];
        let _ = writeln!(
            out,
            r#"<rect x="{x}" y="{}" width="14" height="10" fill="{c}"/><text x="{}" y="{}">{}</text>"#,
            y - 9.0,
            x + 19.0,
            y,
            esc(label)
        );
    }
    for (i, panel) in panels.iter().enumerate() {
        let ox = (i % cols) as f64 * PANEL_W;
        let oy = title_h + legend_h + (i / cols) as f64 * PANEL_H;
        draw_panel(&mut out, spec, panel, &labels, numeric_x, ox, oy);
    }
    out.push_str("</svg>\n");
    Ok(out)
}

/// A figure of `spec` with its title and `note` in place of the data (a
/// figure with nothing to draw).
pub fn render_note(spec: &PlotSpec, note: &str) -> String {
    let (width, height) = (PANEL_W, 90.0);
    format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">
<rect width="{width}" height="{height}" fill="white"/>
<text x="{}" y="22" text-anchor="middle" font-size="14" font-weight="bold">{}</text>
<text x="{}" y="55" text-anchor="middle" fill="#555">{}</text>
</svg>
"##,
        width / 2.0,
        esc(&spec.title),
        width / 2.0,
        esc(note)
    )
}

/// A panel's plotting area and its mapping from data to pixels.
struct Frame {
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
    lo: f64,
    hi: f64,
    xlo: f64,
    xhi: f64,
    numeric_x: bool,
    /// x values in order of first appearance (the categories).
    cats: Vec<String>,
    yticks: Vec<f64>,
    xticks: Vec<f64>,
}

impl Frame {
    fn new(spec: &PlotSpec, panel: &Panel, numeric_x: bool, ox: f64, oy: f64) -> Frame {
        let ys = panel
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1));
        let (mut lo, mut hi) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), y| {
            (a.min(y), b.max(y))
        });
        if spec.y_from_zero.unwrap_or(true) || spec.kind == PlotKind::Bars {
            lo = lo.min(0.0);
            hi = hi.max(0.0);
        }
        if hi <= lo {
            hi = lo + 1.0;
        }
        let yticks = nice_ticks(lo, hi, 5);
        let (lo, hi) = (yticks[0], *yticks.last().expect("ticks"));
        let mut cats: Vec<String> = Vec::new();
        for s in &panel.series {
            for (x, _) in &s.points {
                if !cats.contains(x) {
                    cats.push(x.clone());
                }
            }
        }
        let (xlo, xhi, xticks) = if numeric_x {
            numeric_x_range(&cats)
        } else {
            (0.0, cats.len() as f64, Vec::new())
        };
        Frame {
            x0: ox + MARGIN_LEFT,
            x1: ox + PANEL_W - MARGIN_RIGHT,
            y0: oy + PANEL_H - MARGIN_BOTTOM,
            y1: oy + MARGIN_TOP,
            lo,
            hi,
            xlo,
            xhi,
            numeric_x,
            cats,
            yticks,
            xticks,
        }
    }

    fn ymap(&self, y: f64) -> f64 {
        self.y0 - (y - self.lo) / (self.hi - self.lo) * (self.y0 - self.y1)
    }

    fn xmap(&self, x: f64) -> f64 {
        self.x0 + (x - self.xlo) / (self.xhi - self.xlo) * (self.x1 - self.x0)
    }

    fn cat_center(&self, c: &str) -> f64 {
        let i = self.cats.iter().position(|x| x == c).unwrap_or(0);
        self.xmap(i as f64 + 0.5)
    }

    /// The pixel x of a data point's x value.
    fn x_of(&self, x: &str) -> f64 {
        if self.numeric_x {
            self.xmap(x.parse().unwrap_or(0.0))
        } else {
            self.cat_center(x)
        }
    }
}

/// The x range of numeric categories and the round ticks inside it.
fn numeric_x_range(cats: &[String]) -> (f64, f64, Vec<f64>) {
    let v: Vec<f64> = cats.iter().filter_map(|c| c.parse().ok()).collect();
    let (a, b) = v
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        });
    let (a, b) = if b > a { (a, b) } else { (a - 0.5, a + 0.5) };
    let t = nice_ticks(a, b, 6);
    let inside: Vec<f64> = t
        .iter()
        .copied()
        .filter(|&x| x >= a - 1e-9 * (b - a) && x <= b + 1e-9 * (b - a))
        .collect();
    (a, b, inside)
}

fn draw_panel(
    out: &mut String,
    spec: &PlotSpec,
    panel: &Panel,
    labels: &[String],
    numeric_x: bool,
    ox: f64,
    oy: f64,
) {
    let f = Frame::new(spec, panel, numeric_x, ox, oy);
    draw_axes(out, spec, panel, &f, ox, oy);
    let n = panel.series.len().max(1) as f64;
    for (si, s) in panel.series.iter().enumerate() {
        let ci = labels.iter().position(|l| *l == s.label).unwrap_or(0);
        let color = COLORS[ci % COLORS.len()];
        match spec.kind {
            PlotKind::Bars => draw_bars(out, &f, s, si as f64, n, color),
            PlotKind::Lines => draw_line(out, &f, s, color),
        }
    }
}

/// The panel's title, grid, ticks, frame and axis labels.
fn draw_axes(out: &mut String, spec: &PlotSpec, panel: &Panel, f: &Frame, ox: f64, oy: f64) {
    let (x0, x1, y0, y1) = (f.x0, f.x1, f.y0, f.y1);
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle" font-weight="bold">{}</text>"#,
        (x0 + x1) / 2.0,
        oy + 16.0,
        esc(&panel.label)
    );
    for &t in &f.yticks {
        let y = f.ymap(t);
        let _ = writeln!(
            out,
            r##"<line x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#e4e4e4"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            x0 - 5.0,
            y + 4.0,
            fmt_num(t)
        );
    }
    if f.numeric_x {
        for &t in &f.xticks {
            let x = f.xmap(t);
            let _ = writeln!(
                out,
                r##"<line x1="{x:.1}" y1="{y0}" x2="{x:.1}" y2="{}" stroke="#444"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
                y0 + 4.0,
                y0 + 16.0,
                fmt_num(t)
            );
        }
    } else {
        for c in &f.cats {
            let _ = writeln!(
                out,
                r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
                f.cat_center(c),
                y0 + 16.0,
                esc(c)
            );
        }
    }
    let _ = writeln!(
        out,
        r##"<polyline points="{x0},{y1} {x0},{y0} {x1},{y0}" fill="none" stroke="#444"/>"##
    );
    let xl = spec.x_label.clone().unwrap_or_else(|| spec.x.clone());
    let yl = spec.y_label.clone().unwrap_or_else(|| spec.y.clone());
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        (x0 + x1) / 2.0,
        y0 + 34.0,
        esc(&xl)
    );
    let (yx, yy) = (ox + 14.0, (y0 + y1) / 2.0);
    let _ = writeln!(
        out,
        r#"<text x="{yx}" y="{yy}" text-anchor="middle" transform="rotate(-90 {yx} {yy})">{}</text>"#,
        esc(&yl)
    );
}

/// Series `si` of `n` as bars beside the others in each category.
fn draw_bars(out: &mut String, f: &Frame, s: &Series, si: f64, n: f64, color: &str) {
    let group = (f.x1 - f.x0) / f.cats.len().max(1) as f64 * 0.8;
    let w = group / n;
    for (x, y) in &s.points {
        let left = f.cat_center(x) - group / 2.0 + si * w;
        let (top, bottom) = (f.ymap(y.max(0.0)), f.ymap(y.min(0.0)));
        let _ = writeln!(
            out,
            r#"<rect x="{left:.1}" y="{top:.1}" width="{:.1}" height="{:.1}" fill="{color}"><title>{}: {}</title></rect>"#,
            (w - 1.0).max(1.0),
            (bottom - top).max(0.5),
            esc(&s.label),
            fmt_num(*y)
        );
    }
}

/// A series as a line, with its points marked when there are few.
fn draw_line(out: &mut String, f: &Frame, s: &Series, color: &str) {
    let mut pts: Vec<(f64, f64)> = s
        .points
        .iter()
        .map(|(x, y)| (f.x_of(x), f.ymap(*y)))
        .collect();
    if f.numeric_x {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let path: Vec<String> = pts.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
    let _ = writeln!(
        out,
        r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="1.6"/>"#,
        path.join(" ")
    );
    if pts.len() <= 60 {
        for (x, y) in &pts {
            let _ = writeln!(
                out,
                r#"<circle cx="{x:.1}" cy="{y:.1}" r="2.6" fill="{color}"/>"#
            );
        }
    }
}

/// Round tick values covering [lo, hi] with about `n` steps.
fn nice_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let raw = (hi - lo) / n as f64;
    let exp = raw.log10().floor() as i32;
    let m = [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .find(|m| m * 10f64.powi(exp) >= raw)
        .unwrap_or(10.0);
    // k * m * 10^exp, computed so that decimal steps stay exact.
    let at = |k: f64| {
        if exp < 0 {
            k * m / 10f64.powi(-exp)
        } else {
            k * m * 10f64.powi(exp)
        }
    };
    let step = at(1.0);
    let first = (lo / step).floor();
    let mut t = Vec::new();
    let mut k = first;
    while at(k) < hi + step * 0.999 && t.len() <= 50 {
        t.push(at(k));
        k += 1.0;
    }
    if t.len() < 2 {
        t.push(at(first + 1.0));
    }
    t
}

/// Compact number: 1.2M, 35k, 0.25.
fn fmt_num(x: f64) -> String {
    let a = x.abs();
    let trim = |s: String| {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if a >= 1e9 {
        trim(format!("{:.2}", x / 1e9)) + "G"
    } else if a >= 1e6 {
        trim(format!("{:.2}", x / 1e6)) + "M"
    } else if a >= 1e4 {
        trim(format!("{:.1}", x / 1e3)) + "k"
    } else if a >= 100.0 || a == 0.0 {
        trim(format!("{x:.0}"))
    } else {
        trim(format!("{x:.3}"))
    }
}

pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Table;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(nice_ticks(0.0, 1.0, 5), vec![0.0, 0.2, 0.4, 0.6, 0.8, 1.0]);
        let t = nice_ticks(0.0, 67_296.0, 5);
        assert_eq!(t[1], 20_000.0);
        assert!(*t.last().unwrap() >= 67_296.0);
        assert_eq!(fmt_num(1_500_000.0), "1.5M");
        assert_eq!(fmt_num(35_000.0), "35k");
        assert_eq!(fmt_num(0.25), "0.25");
    }

    #[test]
    fn renders_panels_series_and_escapes_text() {
        let mut t = Table::new(
            ["hit", "load", "policy", "y"].map(String::from).to_vec(),
            ["hit", "load", "policy"].map(String::from).to_vec(),
        );
        for hit in ["0.95", "0.8"] {
            for load in ["0.5", "1", "2"] {
                for p in ["classic", "a<b"] {
                    t.rows
                        .push(vec![hit.into(), load.into(), p.into(), "10".into()]);
                }
            }
        }
        for kind in ["lines", "bars"] {
            let spec: PlotSpec = toml::from_str(&format!(
                "name = \"f\"\ntitle = \"T & U\"\nkind = \"{kind}\"\nx = \"load\"\ny = \"y\"\nseries = \"policy\"\npanels = \"hit\"\n"
            ))
            .unwrap();
            let svg = render(&spec, &t).unwrap();
            assert!(svg.starts_with("<svg"));
            assert!(svg.trim_end().ends_with("</svg>"));
            assert!(svg.contains("T &amp; U"));
            assert!(svg.contains("a&lt;b"));
            assert!(svg.contains("hit=0.95") && svg.contains("hit=0.8"));
            if kind == "bars" {
                assert_eq!(svg.matches("<rect x=").count(), 12 + 2);
            } else {
                assert_eq!(svg.matches("<polyline points=\"").count(), 4 + 2);
            }
        }
    }

    #[test]
    fn a_plot_with_nothing_to_draw_is_told_apart_and_can_say_so() {
        let mut t = Table::new(["x", "y"].map(String::from).to_vec(), Vec::new());
        t.rows.push(vec!["1".into(), String::new()]);
        let spec: PlotSpec =
            toml::from_str("name = \"f\"\ntitle = \"T<1>\"\nx = \"x\"\ny = \"y\"\n").unwrap();
        let e = render(&spec, &t).unwrap_err();
        assert!(e.is_empty_selection(), "{e}");
        let typo: PlotSpec = toml::from_str("name = \"f\"\nx = \"x\"\ny = \"z\"\n").unwrap();
        assert!(!render(&typo, &t).unwrap_err().is_empty_selection());
        let svg = render_note(&spec, "nothing & more");
        assert!(svg.contains("T&lt;1&gt;") && svg.contains("nothing &amp; more"));
        assert!(crate::png_from_svg(&svg, 1.0).is_ok(), "a well-formed SVG");
    }
}
