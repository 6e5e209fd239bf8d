//! Writing an experiment's figures: each `[[plot]]` as SVG, and as PNG
//! beside it when asked (`--png`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use tiermux_report::{PlotSpec, Table};

/// Pixels per SVG unit of the PNG copies.
const PNG_SCALE: f32 = 2.0;

/// How to write an experiment's figures.
#[derive(Clone, Copy, Debug, Default)]
pub struct FigureOptions {
    /// Also write PNG copies.
    pub png: bool,
    /// Runs were cut short (a quick check): a figure with no rows to draw
    /// says so instead of failing the command.
    pub cut_short: bool,
}

/// Draws `plot` from `data` into `out/NAME.svg` (and `out/NAME.png` when
/// asked); returns the files written. Errors name the experiment `file`
/// and the plot.
pub fn write_figure(
    file: &Path,
    out: &Path,
    plot: &PlotSpec,
    data: &Table,
    opts: FigureOptions,
) -> Result<Vec<PathBuf>> {
    let what = || format!("{}: drawing plot '{}'", file.display(), plot.name);
    let svg = match tiermux_report::render(plot, data) {
        Err(e) if opts.cut_short && e.is_empty_selection() => {
            tiermux_report::render_note(plot, "nothing to draw: the runs were cut short")
        }
        other => other.with_context(what)?,
    };
    let png = opts.png;
    let mut written = vec![out.join(format!("{}.svg", plot.name))];
    if png {
        let bytes = tiermux_report::png_from_svg(&svg, PNG_SCALE).with_context(what)?;
        let path = out.join(format!("{}.png", plot.name));
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
    }
    std::fs::write(&written[0], svg)
        .with_context(|| format!("writing {}", written[0].display()))?;
    Ok(written)
}
