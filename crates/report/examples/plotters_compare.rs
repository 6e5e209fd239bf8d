//! Our figure writer against `plotters` on one experiment figure: the same
//! panels and series (from `tiermux_report::arrange`), drawn by each as
//! SVG and as PNG, timed side by side in one run.
//!
//! ```sh
//! tiermux sim experiments/orthus-fig4-caching-vs-splitting.toml --out /tmp/fig4
//! cargo run --release -p tiermux-report --example plotters_compare -- \
//!     /tmp/fig4/results.csv experiments/orthus-fig4-caching-vs-splitting.toml splitting
//! ```
//!
//! Writes the four drawings to /tmp/plotters-compare-* for a look. The
//! plotters drawing covers line figures only (numeric x); bar figures and
//! categorical axes would need more code.

use std::time::Instant;

use plotters::coord::Shift;
use plotters::prelude::*;
use tiermux_report::{arrange, png_from_svg, render, Panel, PlotSpec, Table};

const PANEL_W: u32 = 380;
const PANEL_H: u32 = 270;
const COLUMNS: usize = 3;
const PALETTE: [(u8, u8, u8); 4] = [(31, 119, 180), (214, 39, 40), (44, 160, 44), (255, 127, 14)];

#[derive(serde::Deserialize)]
struct Plots {
    plot: Vec<PlotSpec>,
}

/// The figure through plotters: a title, a legend row, one chart per panel.
fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    spec: &PlotSpec,
    panels: &[Panel],
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let root = root.titled(
        &spec.title,
        ("sans-serif", 14).into_font().style(FontStyle::Bold),
    )?;
    let (legend, body) = root.split_vertically(26);
    let labels: Vec<&str> = panels[0].series.iter().map(|s| s.label.as_str()).collect();
    for (i, label) in labels.iter().enumerate() {
        let x = 12 + i as i32 * 80;
        let c = PALETTE[i % PALETTE.len()];
        legend.draw(&Rectangle::new(
            [(x, 6), (x + 14, 16)],
            RGBColor(c.0, c.1, c.2).filled(),
        ))?;
        legend.draw(&Text::new(
            label.to_string(),
            (x + 19, 6),
            ("sans-serif", 11),
        ))?;
    }
    let rows = panels.len().div_ceil(COLUMNS);
    for (panel, area) in panels.iter().zip(body.split_evenly((rows, COLUMNS))) {
        let points = |i: usize| -> Vec<(f64, f64)> {
            let s = &panel.series[i];
            s.points
                .iter()
                .map(|(x, y)| (x.parse().unwrap(), *y))
                .collect()
        };
        let all: Vec<(f64, f64)> = (0..panel.series.len()).flat_map(points).collect();
        let (xlo, xhi) = all
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
        let yhi = all.iter().fold(0.0f64, |a, p| a.max(p.1)) * 1.05;
        let mut chart = ChartBuilder::on(&area)
            .caption(
                &panel.label,
                ("sans-serif", 12).into_font().style(FontStyle::Bold),
            )
            .margin(8)
            .x_label_area_size(34)
            .y_label_area_size(44)
            .build_cartesian_2d(xlo..xhi, 0.0..yhi)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_desc(spec.x_label.clone().unwrap_or_default())
            .y_desc(spec.y_label.clone().unwrap_or_default())
            .draw()?;
        for i in 0..panel.series.len() {
            let c = PALETTE[i % PALETTE.len()];
            let color = RGBColor(c.0, c.1, c.2);
            chart.draw_series(LineSeries::new(points(i), color.stroke_width(2)))?;
            chart.draw_series(
                points(i)
                    .into_iter()
                    .map(|p| Circle::new(p, 3, color.filled())),
            )?;
        }
    }
    root.present()?;
    Ok(())
}

/// Seconds per call of `f`, over `n` calls.
fn per_call(n: u32, mut f: impl FnMut()) -> f64 {
    let t = Instant::now();
    for _ in 0..n {
        f();
    }
    t.elapsed().as_secs_f64() / n as f64
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [csv, experiment, name] = args.as_slice() else {
        eprintln!("usage: plotters_compare RESULTS.csv EXPERIMENT.toml PLOT_NAME");
        std::process::exit(2);
    };
    let table = Table::from_csv(&std::fs::read_to_string(csv).unwrap()).unwrap();
    let plots: Plots = toml::from_str(&std::fs::read_to_string(experiment).unwrap()).unwrap();
    let spec = plots
        .plot
        .into_iter()
        .find(|p| &p.name == name)
        .expect("no such plot");
    let panels = arrange(&spec, &table).unwrap();
    plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
        .map_err(|_| "font")
        .unwrap();
    plotters::style::register_font("sans-serif", FontStyle::Bold, dejavu::sans::bold())
        .map_err(|_| "font")
        .unwrap();
    let rows = panels.len().div_ceil(COLUMNS) as u32;
    let size = (PANEL_W * COLUMNS as u32, 60 + PANEL_H * rows);
    let n = 50;

    let ours_svg = per_call(n, || drop(render(&spec, &table).unwrap()));
    let plotters_svg_text = || {
        let mut s = String::new();
        draw(
            SVGBackend::with_string(&mut s, size).into_drawing_area(),
            &spec,
            &panels,
        )
        .unwrap();
        s
    };
    let plotters_svg = per_call(n, || drop(plotters_svg_text()));
    let ours_png = per_call(n, || {
        let png = png_from_svg(&render(&spec, &table).unwrap(), 1.0).unwrap();
        std::fs::write("/tmp/plotters-compare-ours.png", png).unwrap();
    });
    let plotters_png = per_call(n, || {
        let root =
            BitMapBackend::new("/tmp/plotters-compare-plotters.png", size).into_drawing_area();
        draw(root, &spec, &panels).unwrap();
    });
    let svg = render(&spec, &table).unwrap();
    let theirs = plotters_svg_text();
    std::fs::write("/tmp/plotters-compare-ours.svg", &svg).unwrap();
    std::fs::write("/tmp/plotters-compare-plotters.svg", &theirs).unwrap();
    let png_bytes = |p: &str| std::fs::metadata(p).unwrap().len();
    println!(
        "figure '{name}': {} panels, {} series",
        panels.len(),
        panels[0].series.len()
    );
    println!("| | ours | plotters | plotters / ours |");
    println!("|---|---|---|---|");
    let row = |what: &str, a: f64, b: f64, unit: &str| {
        println!("| {what} | {a:.2} {unit} | {b:.2} {unit} | {:.2} |", b / a);
    };
    row(
        "SVG, time per figure",
        ours_svg * 1e3,
        plotters_svg * 1e3,
        "ms",
    );
    row(
        "SVG, size",
        svg.len() as f64 / 1e3,
        theirs.len() as f64 / 1e3,
        "kB",
    );
    row(
        "PNG at 1x, time per figure",
        ours_png * 1e3,
        plotters_png * 1e3,
        "ms",
    );
    row(
        "PNG at 1x, size",
        png_bytes("/tmp/plotters-compare-ours.png") as f64 / 1e3,
        png_bytes("/tmp/plotters-compare-plotters.png") as f64 / 1e3,
        "kB",
    );
}
