//! Results as tables and figures.
//!
//! A [`Table`] holds one row per run (or per time-series sample) as named
//! text columns, the same columns a `results.csv` has. A [`PlotSpec`],
//! written in an experiment file, says which columns make a figure; [`render`]
//! turns a table and a spec into a self-contained SVG file, and
//! [`png_from_svg`] rasterizes one. A [`PaperSpec`]
//! puts a published value beside ours, and [`page`] gathers the results of
//! several experiments into one HTML page.

mod html;
mod paper;
mod png;
mod svg;

use std::collections::BTreeMap;

use serde::Deserialize;

pub use html::{page, Section};
pub use paper::{evaluate_all, paper_table, PaperError, PaperRow, PaperSpec};
pub use png::{png_from_svg, PngError};
pub use svg::{render, render_note};

/// Rows of named columns.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    /// Column names.
    pub columns: Vec<String>,
    /// Columns that identify a run (the swept keys and the policy); a
    /// ratio compares rows that agree on all of them but one.
    pub key_columns: Vec<String>,
    /// Rows, each with one value per column.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// An empty table with these columns.
    pub fn new(columns: Vec<String>, key_columns: Vec<String>) -> Self {
        Table {
            columns,
            key_columns,
            rows: Vec::new(),
        }
    }

    /// Index of column `name`.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }

    /// Reads CSV text with a header row, as [`Table::to_csv`] writes it;
    /// no column is a key column. An error names the record at fault.
    pub fn from_csv(text: &str) -> Result<Self, csv::Error> {
        let mut r = csv::ReaderBuilder::new().from_reader(text.as_bytes());
        let columns: Vec<String> = r.headers()?.iter().map(String::from).collect();
        let mut t = Table::new(columns, Vec::new());
        for record in r.records() {
            t.rows.push(record?.iter().map(String::from).collect());
        }
        Ok(t)
    }

    /// The table as CSV text (RFC 4180 quoting by the `csv` crate: cells
    /// with commas, quotes, carriage returns or newlines are quoted).
    pub fn to_csv(&self) -> String {
        let mut w = csv::WriterBuilder::new()
            .terminator(csv::Terminator::Any(b'\n'))
            .from_writer(Vec::new());
        for record in std::iter::once(&self.columns).chain(&self.rows) {
            w.write_record(record)
                .expect("writing CSV to memory cannot fail");
        }
        let bytes = w.into_inner().expect("writing CSV to memory cannot fail");
        String::from_utf8(bytes).expect("CSV of UTF-8 cells is UTF-8")
    }
}

/// Which rows a figure uses.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum PlotData {
    /// One row per run (`results.csv`).
    #[default]
    Runs,
    /// One row per time-series sample of every run (`timeseries.csv`).
    Timeseries,
}

/// How values are drawn.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum PlotKind {
    /// Lines with markers over a numeric (or categorical) x axis.
    #[default]
    Lines,
    /// Grouped bars, one group per x value.
    Bars,
}

/// One column name or several.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum Columns {
    /// A single column.
    One(String),
    /// Several columns, combined.
    Many(Vec<String>),
}

impl Columns {
    /// The column names.
    pub fn names(&self) -> Vec<String> {
        match self {
            Columns::One(c) => vec![c.clone()],
            Columns::Many(v) => v.clone(),
        }
    }
}

/// A filter value: one accepted value or a list.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum FilterValue {
    /// Rows whose column equals this.
    One(toml_like::Scalar),
    /// Rows whose column equals any of these.
    Many(Vec<toml_like::Scalar>),
}

/// Scalar values as written in a spec, compared as text with table cells.
pub mod toml_like {
    use serde::Deserialize;

    /// A string, number or boolean.
    #[derive(Clone, Debug, Deserialize, PartialEq)]
    #[serde(untagged)]
    pub enum Scalar {
        /// Text.
        Str(String),
        /// An integer.
        Int(i64),
        /// A real number.
        Float(f64),
        /// A boolean.
        Bool(bool),
    }

    impl Scalar {
        /// Whether a table cell holds this value (numbers compare by value).
        pub fn matches(&self, cell: &str) -> bool {
            match self {
                Scalar::Str(s) => s == cell,
                Scalar::Bool(b) => cell == b.to_string(),
                Scalar::Int(i) => cell.parse::<f64>().is_ok_and(|c| c == *i as f64),
                Scalar::Float(x) => cell.parse::<f64>().is_ok_and(|c| c == *x),
            }
        }
    }
}

/// Divide y by the y of a reference row (for speedups).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RatioTo {
    /// The key column whose value differs between a row and its reference.
    pub column: String,
    /// The reference rows' value of that column.
    pub value: toml_like::Scalar,
    /// Key columns that may differ too (a reference policy run on other
    /// devices: `also_differ = ["devices"]`).
    #[serde(default)]
    pub also_differ: Vec<String>,
}

/// A figure: which columns go where. Written as `[[plot]]` in experiment
/// files; see `docs/experiments.md`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PlotSpec {
    /// File name (without `.svg`).
    pub name: String,
    /// Title over the figure.
    #[serde(default)]
    pub title: String,
    /// Rows to use.
    #[serde(default)]
    pub data: PlotData,
    /// Lines or bars.
    #[serde(default)]
    pub kind: PlotKind,
    /// The x column.
    pub x: String,
    /// The y column.
    pub y: String,
    /// Column(s) whose values make separate series.
    #[serde(default)]
    pub series: Option<Columns>,
    /// Column(s) whose values make separate panels.
    #[serde(default)]
    pub panels: Option<Columns>,
    /// Keep only rows whose columns hold these values.
    #[serde(default)]
    pub filter: BTreeMap<String, FilterValue>,
    /// Show y relative to a reference row.
    #[serde(default)]
    pub ratio_to: Option<RatioTo>,
    /// Multiply y by this (for example 1e-9 for GB/s).
    #[serde(default)]
    pub y_scale: Option<f64>,
    /// Label of the x axis (default: the column).
    #[serde(default)]
    pub x_label: Option<String>,
    /// Label of the y axis (default: the column).
    #[serde(default)]
    pub y_label: Option<String>,
    /// Start the y axis at zero (default true).
    #[serde(default)]
    pub y_from_zero: Option<bool>,
}

/// A plot that cannot be drawn from a table.
#[derive(Debug, PartialEq, thiserror::Error)]
#[error("plot '{plot}': {field}: {message}")]
pub struct PlotError {
    /// The plot's name.
    pub plot: String,
    /// The spec field at fault.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// The message of a plot whose filter leaves no rows with a value.
const NO_ROWS: &str = "no rows left to plot";

impl PlotError {
    /// True when the table has no rows for the plot (every row filtered
    /// out, or none with a value to draw), rather than a spec at fault.
    pub fn is_empty_selection(&self) -> bool {
        self.field == "filter" && self.message == NO_ROWS
    }
}

impl PlotSpec {
    fn err(&self, field: &str, message: impl Into<String>) -> PlotError {
        PlotError {
            plot: self.name.clone(),
            field: field.to_string(),
            message: message.into(),
        }
    }

    /// Checks every column the spec names exists in a table with `columns`.
    pub fn check_columns(&self, columns: &[String]) -> Result<(), PlotError> {
        let has = |c: &str| columns.iter().any(|x| x == c);
        let mut named: Vec<(&str, String)> = vec![("x", self.x.clone()), ("y", self.y.clone())];
        for c in self.series.iter().flat_map(|s| s.names()) {
            named.push(("series", c));
        }
        for c in self.panels.iter().flat_map(|s| s.names()) {
            named.push(("panels", c));
        }
        for c in self.filter.keys() {
            named.push(("filter", c.clone()));
        }
        if let Some(r) = &self.ratio_to {
            named.push(("ratio_to.column", r.column.clone()));
            for c in &r.also_differ {
                named.push(("ratio_to.also_differ", c.clone()));
            }
        }
        for (field, c) in named {
            if !has(&c) {
                return Err(self.err(
                    field,
                    format!("no column '{c}' (columns: {})", columns.join(", ")),
                ));
            }
        }
        if self.name.is_empty() || self.name.contains(['/', '\\']) || self.name.starts_with('.') {
            return Err(self.err("name", "must be a plain file name"));
        }
        Ok(())
    }
}

/// One series of a figure: its label and its (x, y) points, x as the
/// table writes it, y scaled and divided as the spec says.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// The series' label (the values of the spec's `series` columns).
    pub label: String,
    /// The points in table order.
    pub points: Vec<(String, f64)>,
}

/// One panel of a figure: its label and its series.
#[derive(Clone, Debug, PartialEq)]
pub struct Panel {
    /// The panel's label (the values of the spec's `panels` columns).
    pub label: String,
    /// The series, in order of first appearance.
    pub series: Vec<Series>,
}

/// "name=value, name=value" for the non-empty columns `idx` (named
/// `names`) of `row`; with `bare`, a single column shows its value only.
fn joined(row: &[String], idx: &[usize], names: &[String], bare: bool) -> String {
    let parts: Vec<String> = idx
        .iter()
        .zip(names)
        .filter(|(&i, _)| !row[i].is_empty())
        .map(|(&i, n)| {
            if bare && idx.len() == 1 {
                row[i].clone()
            } else {
                format!("{}={}", short(n), row[i])
            }
        })
        .collect();
    if parts.is_empty() && !idx.is_empty() {
        "default".to_string()
    } else {
        parts.join(", ")
    }
}

/// The last part of a dotted column name.
fn short(name: &str) -> &str {
    name.rsplit('.').next().unwrap_or(name)
}

/// Groups a table's rows into the panels and series a figure of `spec`
/// shows (filtered, divided by the ratio's reference rows, scaled): the
/// data of [`render`], for other renderers.
pub fn arrange(spec: &PlotSpec, table: &Table) -> Result<Vec<Panel>, PlotError> {
    spec.check_columns(&table.columns)?;
    let col = |c: &str| table.column(c).expect("checked");
    let (xi, yi) = (col(&spec.x), col(&spec.y));
    let series_names = spec.series.as_ref().map(|s| s.names()).unwrap_or_default();
    let panel_names = spec.panels.as_ref().map(|s| s.names()).unwrap_or_default();
    let si: Vec<usize> = series_names.iter().map(|c| col(c)).collect();
    let pi: Vec<usize> = panel_names.iter().map(|c| col(c)).collect();
    let filters: Vec<(usize, &FilterValue)> =
        spec.filter.iter().map(|(c, v)| (col(c), v)).collect();
    let keep = |row: &[String]| {
        filters.iter().all(|(i, v)| match v {
            FilterValue::One(s) => s.matches(&row[*i]),
            FilterValue::Many(l) => l.iter().any(|s| s.matches(&row[*i])),
        })
    };
    // Reference rows for ratios: keyed by every key column but the ratio's
    // (and those that may differ too).
    let also: Vec<usize> = spec
        .ratio_to
        .iter()
        .flat_map(|r| r.also_differ.iter().map(|c| col(c)))
        .collect();
    let ratio_key = |row: &[String], skip: usize| -> Vec<String> {
        let mut k: Vec<String> = table
            .key_columns
            .iter()
            .filter_map(|c| table.column(c))
            .filter(|&i| i != skip && !also.contains(&i))
            .map(|i| row[i].clone())
            .collect();
        if spec.data == PlotData::Timeseries {
            k.push(row[xi].clone());
        }
        k
    };
    let reference = ratio_references(spec, table, yi, &ratio_key)?;
    let mut panels: Vec<Panel> = Vec::new();
    for row in table.rows.iter().filter(|r| keep(r)) {
        let Ok(mut y) = row[yi].parse::<f64>() else {
            continue;
        };
        if !y.is_finite() {
            continue;
        }
        if let Some(r) = &spec.ratio_to {
            match reference.get(&ratio_key(row, col(&r.column))) {
                Some(&base) if base != 0.0 => y /= base,
                _ => continue,
            }
        }
        y *= spec.y_scale.unwrap_or(1.0);
        let plabel = joined(row, &pi, &panel_names, false);
        let slabel = joined(row, &si, &series_names, true);
        series_of(&mut panels, plabel, slabel)
            .points
            .push((row[xi].clone(), y));
    }
    if panels.is_empty() {
        return Err(spec.err("filter", NO_ROWS));
    }
    Ok(panels)
}

/// The y value of every reference row of `spec.ratio_to`, by its key
/// (empty without a ratio).
fn ratio_references(
    spec: &PlotSpec,
    table: &Table,
    yi: usize,
    ratio_key: &dyn Fn(&[String], usize) -> Vec<String>,
) -> Result<BTreeMap<Vec<String>, f64>, PlotError> {
    let mut reference = BTreeMap::new();
    let Some(r) = &spec.ratio_to else {
        return Ok(reference);
    };
    let ri = table.column(&r.column).expect("checked");
    for row in &table.rows {
        if r.value.matches(&row[ri]) {
            if let Ok(y) = row[yi].parse::<f64>() {
                reference.insert(ratio_key(row, ri), y);
            }
        }
    }
    if reference.is_empty() {
        return Err(spec.err(
            "ratio_to.value",
            format!("no row has {} = {:?}", r.column, r.value),
        ));
    }
    Ok(reference)
}

/// The series `slabel` of panel `plabel`, created (in order of first
/// appearance) when missing.
fn series_of(panels: &mut Vec<Panel>, plabel: String, slabel: String) -> &mut Series {
    let p = match panels.iter().position(|p| p.label == plabel) {
        Some(i) => i,
        None => {
            panels.push(Panel {
                label: plabel,
                series: Vec::new(),
            });
            panels.len() - 1
        }
    };
    let series = &mut panels[p].series;
    let s = match series.iter().position(|s| s.label == slabel) {
        Some(i) => i,
        None => {
            series.push(Series {
                label: slabel,
                points: Vec::new(),
            });
            series.len() - 1
        }
    };
    &mut series[s]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        let mut t = Table::new(
            ["load", "policy", "throughput_ops_per_s"]
                .map(String::from)
                .to_vec(),
            ["load", "policy"].map(String::from).to_vec(),
        );
        for (l, p, y) in [
            ("0.5", "classic", "100"),
            ("0.5", "nhc", "110"),
            ("2", "classic", "200"),
            ("2", "nhc", "300"),
        ] {
            t.rows.push(vec![l.into(), p.into(), y.into()]);
        }
        t
    }

    fn spec(extra: &str) -> PlotSpec {
        toml::from_str(&format!(
            "name = \"p\"\nx = \"load\"\ny = \"throughput_ops_per_s\"\nseries = \"policy\"\n{extra}"
        ))
        .unwrap()
    }

    #[test]
    fn groups_rows_into_series() {
        let panels = arrange(&spec(""), &table()).unwrap();
        assert_eq!(panels.len(), 1);
        let s = &panels[0].series;
        assert_eq!(s[1].label, "nhc");
        assert_eq!(
            s[1].points,
            vec![("0.5".to_string(), 110.0), ("2".to_string(), 300.0)]
        );
    }

    #[test]
    fn ratio_divides_by_the_matching_reference_row() {
        let panels = arrange(
            &spec("ratio_to = { column = \"policy\", value = \"classic\" }"),
            &table(),
        )
        .unwrap();
        let nhc = &panels[0].series[1];
        assert!((nhc.points[0].1 - 1.1).abs() < 1e-12);
        assert!((nhc.points[1].1 - 1.5).abs() < 1e-12);
    }

    /// A reference policy run on other devices: without `also_differ`
    /// no row has a reference, with it each row finds its workload's.
    #[test]
    fn a_ratio_may_ignore_columns_that_differ_too() {
        let mut t = Table::new(
            ["trace", "devices", "policy", "y"]
                .map(String::from)
                .to_vec(),
            ["trace", "devices", "policy"].map(String::from).to_vec(),
        );
        for (trace, devices, policy, y) in [
            ("a", "ro+wo", "tica", "8"),
            ("a", "wo+wo", "ucache", "10"),
            ("b", "ro+wo", "tica", "9"),
            ("b", "wo+wo", "ucache", "6"),
        ] {
            t.rows
                .push([trace, devices, policy, y].map(String::from).to_vec());
        }
        let spec = |extra: &str| -> PlotSpec {
            toml::from_str(&format!(
                "name = \"p\"\nx = \"trace\"\ny = \"y\"\nseries = \"policy\"\nratio_to = {{ column = \"policy\", value = \"ucache\"{extra} }}"
            ))
            .unwrap()
        };
        let panels = arrange(&spec(""), &t).unwrap();
        let tica = panels[0].series.iter().find(|s| s.label == "tica");
        assert!(tica.is_none(), "no reference on the same devices");
        let panels = arrange(&spec(", also_differ = [\"devices\"]"), &t).unwrap();
        let tica = panels[0].series.iter().find(|s| s.label == "tica").unwrap();
        assert_eq!(
            tica.points,
            vec![("a".to_string(), 0.8), ("b".to_string(), 1.5)]
        );
        let e = arrange(&spec(", also_differ = [\"colour\"]"), &t).unwrap_err();
        assert_eq!(e.field, "ratio_to.also_differ");
    }

    #[test]
    fn unknown_columns_and_empty_results_are_named() {
        let mut s = spec("");
        s.y = "nope".into();
        let e = arrange(&s, &table()).unwrap_err();
        assert_eq!(e.field, "y");
        assert!(e.to_string().contains("no column 'nope'"), "{e}");
        let mut s = spec("");
        s.filter.insert(
            "policy".into(),
            FilterValue::One(toml_like::Scalar::Str("lbica".into())),
        );
        assert_eq!(arrange(&s, &table()).unwrap_err().field, "filter");
        let e = arrange(
            &spec("ratio_to = { column = \"policy\", value = \"nope\" }"),
            &table(),
        )
        .unwrap_err();
        assert_eq!(e.field, "ratio_to.value");
    }

    #[test]
    fn csv_quotes_cells_with_commas() {
        let mut t = Table::new(vec!["a".into(), "b".into()], vec![]);
        t.rows.push(vec!["x,y".into(), "say \"hi\"".into()]);
        assert_eq!(t.to_csv(), "a,b\n\"x,y\",\"say \"\"hi\"\"\"\n");
    }

    #[test]
    fn csv_reads_back_what_it_writes_and_names_a_ragged_record() {
        let mut t = Table::new(vec!["a".into(), "b".into()], vec![]);
        t.rows.push(vec!["x,\"y\"\r\n".into(), "".into()]);
        t.rows.push(vec!["1".into(), "2".into()]);
        assert_eq!(Table::from_csv(&t.to_csv()).unwrap(), t);
        let e = Table::from_csv("a,b\n1,2\n3\n").unwrap_err();
        assert!(e.to_string().contains("record 2"), "{e}");
    }

    /// Carriage returns and newlines inside a cell are quoted, so the
    /// file still has one record per row.
    #[test]
    fn csv_quotes_line_breaks() {
        let mut t = Table::new(vec!["a".into(), "b".into()], vec![]);
        t.rows.push(vec!["one\rtwo".into(), "three\nfour".into()]);
        t.rows.push(vec!["".into(), "plain".into()]);
        assert_eq!(t.to_csv(), "a,b\n\"one\rtwo\",\"three\nfour\"\n,plain\n");
    }
}
