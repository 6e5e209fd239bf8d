//! `tiermux sim` puts the papers' values beside ours (`paper.csv`), and
//! `tiermux report` gathers result directories into one HTML page with
//! their figures, those rows and the runs.

use std::path::Path;

use tiermux_report::Table;

use crate::common::cli;
use cli::{ok, tiermux, Scratch};

const EXPERIMENT: &str = r#"
name = "tiny-nhc"
description = "NHC beside classic caching on Optane+Flash, short runs <for the report test>"

[base]
devices = ["optane-905p", "flash-970pro"]
policy = "classic"
block_size = 65536
cache_blocks = 2048
duration_s = 0.4
warmup_s = 0.1

[base.workload]
working_set_blocks = 2560

[base.client]
workers = 32

[[sweep]]
policy = ["classic", "nhc"]

[[plot]]
name = "throughput"
kind = "bars"
x = "policy"
y = "throughput_ops_per_s"

[[paper]]
source = "Orthus Figure 9"
what = "NHC / classic throughput"
paper = 1.46
y = "throughput_ops_per_s"
filter = { policy = "nhc" }
ratio_to = { column = "policy", value = "classic" }
at_least = 0.0

[[paper]]
source = "a made-up table"
what = "classic caching's throughput, a value it cannot reach"
paper = 1e12
y = "throughput_ops_per_s"
filter = { policy = "classic" }
within_pct = 5.0
"#;

fn column(t: &Table, row: usize, name: &str) -> String {
    t.rows[row][t.column(name).unwrap()].clone()
}

fn read(path: &Path) -> Table {
    Table::from_csv(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn sim_computes_the_paper_rows_and_report_gathers_figures_and_rows() {
    let s = Scratch::new("page");
    let file = s.path().join("tiny.toml");
    std::fs::write(&file, EXPERIMENT).unwrap();
    let out = s.path().join("out").join("tiny-nhc");
    let printed = ok(&[
        "sim",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--png",
    ]);
    assert!(
        printed.contains("Orthus Figure 9: NHC / classic throughput: paper 1.46"),
        "{printed}"
    );
    // With --png each figure is also a PNG, at twice the SVG's size.
    let png = std::fs::read(out.join("throughput.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let svg_width: u32 = {
        let svg = std::fs::read_to_string(out.join("throughput.svg")).unwrap();
        let w = svg.split("width=\"").nth(1).unwrap();
        w[..w.find('"').unwrap()].parse().unwrap()
    };
    let png_width = u32::from_be_bytes(png[16..20].try_into().unwrap());
    assert_eq!(png_width, 2 * svg_width);

    // Ours is computed from the run table: NHC's throughput over classic's.
    let runs = read(&out.join("results.csv"));
    let tput = |r: usize| {
        column(&runs, r, "throughput_ops_per_s")
            .parse::<f64>()
            .unwrap()
    };
    assert_eq!(column(&runs, 0, "policy"), "classic");
    let ratio = tput(1) / tput(0);
    let paper = read(&out.join("paper.csv"));
    assert_eq!(paper.rows.len(), 2);
    let ours: f64 = column(&paper, 0, "ours").parse().unwrap();
    assert!((ours - ratio).abs() < 1e-4, "{ours} vs {ratio}");
    assert_eq!(column(&paper, 0, "verdict"), "meets the bar");
    assert_eq!(column(&paper, 1, "verdict"), "deviates");
    assert_eq!(column(&paper, 1, "rows"), "1");

    // The page, from the directory that holds the result directories.
    let html_path = s.path().join("report.html");
    let printed = ok(&[
        "report",
        s.path().join("out").to_str().unwrap(),
        "--out",
        html_path.to_str().unwrap(),
    ]);
    assert!(
        printed.starts_with("1 experiments, 1 figures, 2 rows from the papers"),
        "{printed}"
    );
    let html = std::fs::read_to_string(&html_path).unwrap();
    let svg = std::fs::read_to_string(out.join("throughput.svg")).unwrap();
    assert!(html.contains(&svg), "the figure is inline");
    assert!(html.contains("<h2>tiny-nhc</h2>"));
    assert!(html.contains("short runs &lt;for the report test&gt;"));
    assert!(html.contains(&format!(
        "<tr class=\"ok\"><td>Orthus Figure 9</td><td>NHC / classic throughput</td><td>1.46</td><td>{}</td>",
        column(&paper, 0, "ours")
    )));
    assert!(html.contains("<tr class=\"bad\"><td>a made-up table</td>"));
    assert!(html.contains(&format!(
        "<td>{}</td>",
        column(&runs, 1, "throughput_ops_per_s")
    )));
}

#[test]
fn bad_paper_rows_and_directories_are_refused_by_name() {
    let s = Scratch::new("bad");
    let file = s.path().join("bad.toml");
    let bad = EXPERIMENT.replace(
        "filter = { policy = \"nhc\" }",
        "filter = { colour = \"nhc\" }",
    );
    std::fs::write(&file, bad).unwrap();
    let out = tiermux(&[
        "sim",
        file.to_str().unwrap(),
        "--out",
        s.path().to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("paper[0].filter") && err.contains("no column 'colour'"),
        "{err}"
    );

    let out = tiermux(&["report", s.path().to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("no results.csv"), "{err}");
}

/// `&`, `<` and `>` as the page writes them.
fn escaped(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Every experiment file in `experiments/` (simulator experiments and
/// trace sweeps; `experiments/bench` is `tiermux bench`'s) runs cut short
/// (0.05 simulated seconds, at most 5,000 keys, 5,000 trace requests), and `tiermux report` renders them all into one page with
/// each file's section, every figure it names inline and every row from
/// the papers it names. The numbers of such short runs mean little; that
/// every file runs, draws and reports is what is checked.
#[test]
fn every_experiment_renders_into_one_page() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let s = Scratch::new("every-experiment");
    let out = s.path().join("out");
    let mut expected = Vec::new();
    for sub in ["", "kv", "traces"] {
        let mut files: Vec<_> = std::fs::read_dir(root.join(sub))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        for file in files {
            let spec: toml::Value =
                toml::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
            let name = spec["name"].as_str().unwrap().to_string();
            let dir = out.join(&name);
            let (f, d) = (file.to_str().unwrap(), dir.to_str().unwrap());
            if sub == "traces" {
                ok(&["trace", "sweep", f, "--out", d, "--max-requests", "5000"]);
            } else {
                let cut = ["--max-duration-s", "0.05", "--max-keys", "5000"];
                ok(&[&["sim", f, "--out", d, "--threads", "2"][..], &cut[..]].concat());
            }
            expected.push((name, dir, spec));
        }
    }
    assert!(expected.len() >= 20, "{} experiment files", expected.len());
    let html_path = s.path().join("report.html");
    let printed = ok(&[
        "report",
        out.to_str().unwrap(),
        "--out",
        html_path.to_str().unwrap(),
    ]);
    assert!(
        printed.starts_with(&format!("{} experiments,", expected.len())),
        "{printed}"
    );
    let html = std::fs::read_to_string(&html_path).unwrap();
    let (mut figures, mut rows) = (0, 0);
    for (name, dir, spec) in &expected {
        assert!(
            html.contains(&format!("<h2>{name}</h2>")),
            "no section for {name}"
        );
        let list = |key: &str| {
            spec.get(key)
                .and_then(|v| v.as_array())
                .cloned()
                .unwrap_or_default()
        };
        for plot in list("plot") {
            let file = dir.join(format!("{}.svg", plot["name"].as_str().unwrap()));
            let svg = std::fs::read_to_string(&file)
                .unwrap_or_else(|_| panic!("{name}: no {}", file.display()));
            assert!(
                html.contains(&svg),
                "{name}: {} is not on the page",
                file.display()
            );
            figures += 1;
        }
        for row in list("paper") {
            let what = row["what"].as_str().unwrap();
            assert!(
                html.contains(&escaped(what)),
                "{name}: the paper row '{what}' is not on the page"
            );
            rows += 1;
        }
    }
    assert!(figures >= 40 && rows >= 5, "{figures} figures, {rows} rows");
}
