//! One self-contained HTML page from the results of several experiments:
//! for each, its paper-vs-ours rows, its figures inline and its run table.

use std::fmt::Write;

use crate::svg::esc;
use crate::Table;

/// One experiment's results, as a section of the page.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Section {
    /// The experiment's name (the heading and the anchor).
    pub name: String,
    /// What it reproduces.
    pub description: String,
    /// Where the results were read from.
    pub source: String,
    /// The evaluated `[[paper]]` rows (`paper.csv`), if any.
    pub paper: Option<Table>,
    /// Figures: file name and SVG document.
    pub figures: Vec<(String, String)>,
    /// The run table (`results.csv`).
    pub results: Table,
}

const STYLE: &str =
    "body{font-family:sans-serif;max-width:1300px;margin:2em auto;padding:0 1em;color:#222}\
table{border-collapse:collapse;margin:.5em 0;font-size:13px}\
td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}\
th{background:#f3f3f3}\
.ok{background:#e3f4e3}.bad{background:#fbe3e3}\
figure{margin:1em 0}figcaption{font-size:12px;color:#555}\
details{margin:.5em 0 2em}section{border-top:2px solid #ddd;margin-top:2em}";

/// The whole page: a contents list and one section per experiment.
pub fn page(title: &str, sections: &[Section]) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>\n<h1>{}</h1>\n<ul>\n",
        esc(title),
        esc(title)
    );
    for (i, s) in sections.iter().enumerate() {
        let verdicts = s.paper.as_ref().map(summary).unwrap_or_default();
        let _ = writeln!(
            h,
            "<li><a href=\"#e{i}\">{}</a> {}</li>",
            esc(&s.name),
            esc(&verdicts)
        );
    }
    h.push_str("</ul>\n");
    all_paper_rows(&mut h, sections);
    for (i, s) in sections.iter().enumerate() {
        section(&mut h, i, s);
    }
    h.push_str("</body></html>\n");
    h
}

/// One table of every section's rows from the papers, each with its
/// experiment, before the sections.
fn all_paper_rows(h: &mut String, sections: &[Section]) {
    let mut all: Option<Table> = None;
    for s in sections {
        let Some(p) = &s.paper else { continue };
        let t = all.get_or_insert_with(|| {
            let mut columns = vec!["experiment".to_string()];
            columns.extend(p.columns.iter().cloned());
            Table::new(columns, Vec::new())
        });
        if t.columns[1..] != p.columns[..] {
            continue; // not a paper.csv of this version: shown in its section only
        }
        for r in &p.rows {
            let mut row = vec![s.name.clone()];
            row.extend(r.iter().cloned());
            t.rows.push(row);
        }
    }
    if let Some(t) = all {
        h.push_str("<h2>The papers' values beside ours, every experiment</h2>\n");
        table(h, &t, t.column("verdict"));
    }
}

/// "(3 rows from the papers: 2 meet, 1 below)", counting verdicts.
fn summary(paper: &Table) -> String {
    let Some(vi) = paper.column("verdict") else {
        return String::new();
    };
    let good = paper.rows.iter().filter(|r| is_good(&r[vi])).count();
    let bad = paper.rows.iter().filter(|r| is_bad(&r[vi])).count();
    format!(
        "({} rows from the papers: {good} met or matched, {bad} not)",
        paper.rows.len()
    )
}

fn is_good(verdict: &str) -> bool {
    matches!(verdict, "meets the bar" | "matches")
}

fn is_bad(verdict: &str) -> bool {
    matches!(verdict, "below the bar" | "deviates")
}

fn section(h: &mut String, i: usize, s: &Section) {
    let _ = writeln!(
        h,
        "<section id=\"e{i}\"><h2>{}</h2>\n<p>{}</p>\n<p><small>from {}</small></p>",
        esc(&s.name),
        esc(&s.description),
        esc(&s.source)
    );
    if let Some(p) = &s.paper {
        h.push_str("<h3>The papers' values beside ours</h3>\n");
        table(h, p, p.column("verdict"));
    }
    for (name, svg) in &s.figures {
        let _ = writeln!(
            h,
            "<figure>{svg}<figcaption>{}</figcaption></figure>",
            esc(name)
        );
    }
    let _ = writeln!(
        h,
        "<details><summary>{} runs</summary>",
        s.results.rows.len()
    );
    table(h, &s.results, None);
    h.push_str("</details></section>\n");
}

/// A table; with `verdict`, rows are shaded by that column.
fn table(h: &mut String, t: &Table, verdict: Option<usize>) {
    h.push_str("<table><tr>");
    for c in &t.columns {
        let _ = write!(h, "<th>{}</th>", esc(c));
    }
    h.push_str("</tr>\n");
    for r in &t.rows {
        let class = match verdict.map(|v| r[v].as_str()) {
            Some(v) if is_good(v) => " class=\"ok\"",
            Some(v) if is_bad(v) => " class=\"bad\"",
            _ => "",
        };
        let _ = write!(h, "<tr{class}>");
        for c in r {
            let _ = write!(h, "<td>{}</td>", esc(c));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(columns: &[&str], row: &[&str]) -> Table {
        let mut t = Table::new(columns.iter().map(|c| c.to_string()).collect(), vec![]);
        t.rows.push(row.iter().map(|c| c.to_string()).collect());
        t
    }

    #[test]
    fn the_page_holds_figures_rows_and_escaped_text() {
        let s = Section {
            name: "fig<9>".into(),
            description: "a & b".into(),
            source: "out/fig9".into(),
            paper: Some(one(
                &["source", "what", "paper", "ours", "verdict"],
                &[
                    "MOST Figure 9",
                    "MOST / Colloid",
                    "1.24",
                    "1.0970",
                    "below the bar",
                ],
            )),
            figures: vec![("throughput.svg".into(), "<svg id=\"f\"></svg>".into())],
            results: one(&["policy", "throughput_ops_per_s"], &["most", "786000"]),
        };
        let h = page("tiermux <report>", &[s]);
        assert!(h.starts_with("<!DOCTYPE html>"));
        assert!(h.contains("<h1>tiermux &lt;report&gt;</h1>"));
        assert!(h.contains("<h2>fig&lt;9&gt;</h2>") && h.contains("<p>a &amp; b</p>"));
        assert!(h.contains("<figure><svg id=\"f\"></svg><figcaption>throughput.svg"));
        assert!(h.contains("<tr class=\"bad\"><td>MOST Figure 9</td>"));
        assert!(
            h.contains("<tr class=\"bad\"><td>fig&lt;9&gt;</td><td>MOST Figure 9</td>"),
            "the summary names the experiment"
        );
        assert!(h.contains("(1 rows from the papers: 0 met or matched, 1 not)"));
        assert!(h.contains("<td>786000</td>"));
        assert!(h.ends_with("</html>\n"));
    }
}
