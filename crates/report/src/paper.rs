//! A paper's number beside ours: `[[paper]]` rows of an experiment file.
//!
//! A row names a published value (a figure's speedup, a table's latency)
//! and says how to compute ours from the run table: the rows to take, the
//! column, and optionally the reference rows to divide by. Several matching
//! rows are averaged (the mean of the ratios, as a paper's "on average").

use serde::Deserialize;

use crate::{arrange, FilterValue, PlotError, PlotSpec, RatioTo, Table};
use std::collections::BTreeMap;

/// One published value and how to compute ours. Written as `[[paper]]` in
/// experiment files; see `docs/experiments.md`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PaperSpec {
    /// Where the value is published ("MOST Figure 9").
    pub source: String,
    /// What the value is ("MOST / Colloid, mean of the four mixes").
    pub what: String,
    /// The published value.
    pub paper: f64,
    /// The column ours is computed from.
    pub y: String,
    /// Keep only rows whose columns hold these values.
    #[serde(default)]
    pub filter: BTreeMap<String, FilterValue>,
    /// Divide each row's value by its reference row's.
    #[serde(default)]
    pub ratio_to: Option<RatioTo>,
    /// Multiply ours by this, into the paper's unit (1e-9: bytes/s to
    /// GB/s).
    #[serde(default)]
    pub y_scale: Option<f64>,
    /// An acceptance bar: ours must be at least this.
    #[serde(default)]
    pub at_least: Option<f64>,
    /// Ours matches when within this many percent of the paper's.
    #[serde(default)]
    pub within_pct: Option<f64>,
}

/// A `[[paper]]` row evaluated on a run table.
#[derive(Clone, Debug, PartialEq)]
pub struct PaperRow {
    /// The spec it comes from.
    pub spec: PaperSpec,
    /// Our value: the mean over the matching rows.
    pub ours: f64,
    /// How many rows the mean is over.
    pub rows: usize,
}

impl PaperSpec {
    /// The spec as a one-series plot, so that filters and ratios mean the
    /// same as in `[[plot]]`.
    fn as_plot(&self) -> PlotSpec {
        PlotSpec {
            name: "paper".into(),
            title: String::new(),
            data: crate::PlotData::Runs,
            kind: crate::PlotKind::Lines,
            x: self.y.clone(),
            y: self.y.clone(),
            series: None,
            panels: None,
            filter: self.filter.clone(),
            ratio_to: self.ratio_to.clone(),
            y_scale: self.y_scale,
            x_label: None,
            y_label: None,
            y_from_zero: None,
        }
    }

    /// Checks every column the spec names exists in a table with `columns`.
    pub fn check_columns(&self, columns: &[String]) -> Result<(), PlotError> {
        self.as_plot().check_columns(columns)
    }

    /// Our value on `table`: the mean of the matching rows' (ratios of)
    /// `y`. An error names the field when no row matches.
    pub fn evaluate(&self, table: &Table) -> Result<PaperRow, PlotError> {
        let panels = arrange(&self.as_plot(), table)?;
        let values: Vec<f64> = panels
            .iter()
            .flat_map(|p| &p.series)
            .flat_map(|s| s.points.iter().map(|(_, y)| *y))
            .collect();
        assert!(!values.is_empty(), "arrange refuses an empty selection");
        Ok(PaperRow {
            spec: self.clone(),
            ours: values.iter().sum::<f64>() / values.len() as f64,
            rows: values.len(),
        })
    }
}

impl PaperRow {
    /// "meets the bar", "below the bar", "matches", "deviates", or "" when
    /// the spec sets no bar and no tolerance.
    pub fn verdict(&self) -> &'static str {
        if let Some(bar) = self.spec.at_least {
            return if self.ours >= bar {
                "meets the bar"
            } else {
                "below the bar"
            };
        }
        match self.spec.within_pct {
            Some(pct) if (self.ours / self.spec.paper - 1.0).abs() * 100.0 <= pct => "matches",
            Some(_) => "deviates",
            None => "",
        }
    }
}

/// Why an experiment's paper rows could not be evaluated: which row, and
/// the plot error that names the field.
#[derive(Debug, thiserror::Error)]
#[error("paper[{index}] ('{what}'): computing ours: {problem}")]
pub struct PaperError {
    /// The row's place among the experiment's `[[paper]]` rows.
    pub index: usize,
    /// The row's `what`.
    pub what: String,
    /// The problem.
    pub problem: PlotError,
}

/// Evaluates every spec on `table`, in order; the first that fails is the
/// error.
pub fn evaluate_all(specs: &[PaperSpec], table: &Table) -> Result<Vec<PaperRow>, PaperError> {
    specs
        .iter()
        .enumerate()
        .map(|(index, spec)| {
            spec.evaluate(table).map_err(|problem| PaperError {
                index,
                what: spec.what.clone(),
                problem,
            })
        })
        .collect()
}

/// The evaluated rows as a table (`paper.csv`): source, what, paper, ours,
/// the bar or tolerance, the rows averaged and the verdict.
pub fn paper_table(rows: &[PaperRow]) -> Table {
    let columns = ["source", "what", "paper", "ours", "bar", "rows", "verdict"];
    let mut t = Table::new(columns.map(String::from).to_vec(), Vec::new());
    for r in rows {
        let bar = match (r.spec.at_least, r.spec.within_pct) {
            (Some(b), _) => format!("at least {b}"),
            (None, Some(p)) => format!("within {p} %"),
            (None, None) => String::new(),
        };
        t.rows.push(vec![
            r.spec.source.clone(),
            r.spec.what.clone(),
            r.spec.paper.to_string(),
            format!("{:.4}", r.ours),
            bar,
            r.rows.to_string(),
            r.verdict().to_string(),
        ]);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        let mut t = Table::new(
            ["mix", "policy", "throughput_ops_per_s"]
                .map(String::from)
                .to_vec(),
            ["mix", "policy"].map(String::from).to_vec(),
        );
        for (m, p, y) in [
            ("A", "colloid", "100"),
            ("A", "most", "120"),
            ("B", "colloid", "200"),
            ("B", "most", "200"),
        ] {
            t.rows.push(vec![m.into(), p.into(), y.into()]);
        }
        t
    }

    fn spec(extra: &str) -> PaperSpec {
        toml::from_str(&format!(
            "source = \"S\"\nwhat = \"W\"\npaper = 1.24\ny = \"throughput_ops_per_s\"\n{extra}"
        ))
        .unwrap()
    }

    #[test]
    fn ratios_of_the_matching_rows_are_averaged() {
        let s = spec(
            "filter = { policy = \"most\" }\nratio_to = { column = \"policy\", value = \"colloid\" }\nat_least = 1.1",
        );
        let r = s.evaluate(&table()).unwrap();
        assert_eq!(r.rows, 2);
        assert!((r.ours - 1.1).abs() < 1e-12, "{}", r.ours);
        assert_eq!(r.verdict(), "meets the bar");
        let r = spec("filter = { policy = \"most\", mix = \"B\" }\nratio_to = { column = \"policy\", value = \"colloid\" }\nwithin_pct = 5.0")
            .evaluate(&table())
            .unwrap();
        assert_eq!((r.rows, r.ours, r.verdict()), (1, 1.0, "deviates"));
    }

    #[test]
    fn a_plain_value_matches_within_its_tolerance() {
        let r = spec("filter = { mix = \"A\", policy = \"most\" }\nwithin_pct = 3.0");
        let r = PaperSpec { paper: 117.0, ..r }.evaluate(&table()).unwrap();
        assert_eq!((r.ours, r.verdict()), (120.0, "matches"));
        let t = paper_table(&[r]);
        assert_eq!(
            t.to_csv(),
            "source,what,paper,ours,bar,rows,verdict\nS,W,117,120.0000,within 3 %,1,matches\n"
        );
    }

    #[test]
    fn a_selection_without_rows_is_an_error_naming_the_field() {
        let e = spec("filter = { policy = \"cerberus\" }")
            .evaluate(&table())
            .unwrap_err();
        assert_eq!(e.field, "filter");
        let e = spec("filter = { colour = \"red\" }")
            .evaluate(&table())
            .unwrap_err();
        assert!(e.to_string().contains("no column 'colour'"), "{e}");
    }

    #[test]
    fn the_first_row_that_fails_is_named_by_place_and_what() {
        let good = spec("filter = { policy = \"most\" }");
        let bad = PaperSpec {
            what: "the second".into(),
            ..spec("filter = { policy = \"cerberus\" }")
        };
        let rows = evaluate_all(std::slice::from_ref(&good), &table()).unwrap();
        assert_eq!(rows.len(), 1);
        let e = evaluate_all(&[good, bad], &table()).unwrap_err();
        assert_eq!(e.index, 1);
        assert!(
            e.to_string()
                .starts_with("paper[1] ('the second'): computing ours: ")
                && e.to_string().contains("filter"),
            "{e}"
        );
    }
}
