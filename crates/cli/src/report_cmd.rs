//! `tiermux report`: one HTML page from the output directories of
//! `tiermux sim` (results.json, results.csv, paper.csv, the figures).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use tiermux_report::{Section, Table};

/// Renders the result directories `dirs` into `out`. A directory without
/// `results.csv` stands for the result directories directly inside it.
pub fn run(dirs: &[PathBuf], out: &Path, title: &str) -> Result<()> {
    let mut sections = Vec::new();
    for d in dirs {
        for r in result_dirs(d)? {
            sections.push(section(&r)?);
        }
    }
    if sections.is_empty() {
        bail!("no result directories (with results.csv) among the arguments");
    }
    let html = tiermux_report::page(title, &sections);
    std::fs::write(out, html).with_context(|| format!("writing {}", out.display()))?;
    let figures: usize = sections.iter().map(|s| s.figures.len()).sum();
    let rows: usize = sections
        .iter()
        .map(|s| s.paper.as_ref().map_or(0, |p| p.rows.len()))
        .sum();
    outln!(
        "{} experiments, {figures} figures, {rows} rows from the papers -> {}",
        sections.len(),
        out.display()
    );
    Ok(())
}

/// `dir` itself when it holds results, else its subdirectories that do,
/// sorted by name.
fn result_dirs(dir: &Path) -> Result<Vec<PathBuf>> {
    if dir.join("results.csv").is_file() {
        return Ok(vec![dir.to_path_buf()]);
    }
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("reading directory {}", dir.display()))?;
    let mut found = Vec::new();
    for e in entries {
        let p = e?.path();
        if p.join("results.csv").is_file() {
            found.push(p);
        }
    }
    if found.is_empty() {
        bail!(
            "{}: no results.csv in it or in a directory inside it (is it an output of `tiermux sim`?)",
            dir.display()
        );
    }
    found.sort();
    Ok(found)
}

fn read_table(path: &Path) -> Result<Table> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Table::from_csv(&text).with_context(|| format!("{}: not a results table", path.display()))
}

/// One directory's section: the name and description from results.json
/// (the directory's name when it is missing), the tables and the figures.
fn section(dir: &Path) -> Result<Section> {
    let mut s = Section {
        name: dir
            .file_name()
            .map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into()),
        source: dir.display().to_string(),
        results: read_table(&dir.join("results.csv"))?,
        ..Section::default()
    };
    let json = dir.join("results.json");
    if json.is_file() {
        let text = std::fs::read_to_string(&json)?;
        let v: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("{}: not JSON", json.display()))?;
        if let Some(n) = v["experiment"].as_str() {
            s.name = n.to_string();
        }
        s.description = v["description"].as_str().unwrap_or_default().to_string();
    }
    let paper = dir.join("paper.csv");
    if paper.is_file() {
        s.paper = Some(read_table(&paper)?);
    }
    let mut svgs: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "svg"))
        .collect();
    svgs.sort();
    for p in svgs {
        let svg =
            std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
        let body = svg.trim_start();
        let body = match body.strip_prefix("<?xml") {
            Some(rest) => rest.split_once("?>").map_or("", |(_, b)| b).trim_start(),
            None => body,
        };
        if !body.starts_with("<svg") {
            bail!("{}: not an SVG document", p.display());
        }
        let name = p.file_name().expect("a file").to_string_lossy().into();
        s.figures.push((name, body.to_string()));
    }
    Ok(s)
}
