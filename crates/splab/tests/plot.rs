//! `splab plot`: figures from real reports, in SVG and PNG, and its errors.

mod common;
use common::{assert_error_line, assert_success, splab};

/// Two small reports (one a seq(...) run with a phase boundary) and a comparison of two.
fn reports(dir: &std::path::Path) -> (String, String, String) {
    let a = dir.join("a.json").display().to_string();
    let b = dir.join("b.json").display().to_string();
    let c = dir.join("c.json").display().to_string();
    for (path, policy, workload) in [
        (&a, "navarro", "seq(seq:size=4M,op=write,seeker:count=2)"),
        (&b, "base", "seq:size=4M,op=write"),
    ] {
        let out = splab()
            .args([
                "run",
                "-q",
                "-m",
                "alpha21264",
                "-p",
                policy,
                "-w",
                workload,
                "--json",
                path,
            ])
            .output()
            .unwrap();
        assert_success(&out, workload);
    }
    let out = splab()
        .args([
            "compare",
            "-q",
            "-m",
            "alpha21264",
            "-p",
            "base,navarro",
            "-w",
            "seq:size=4M,op=write",
            "--json",
            &c,
        ])
        .output()
        .unwrap();
    assert_success(&out, "compare");
    (a, b, c)
}

#[test]
fn plots_reports_as_svg_and_png() {
    let dir = tempfile_dir("plot");
    let (a, b, c) = reports(&dir);
    let svg = dir.join("fig.svg").display().to_string();
    let out = splab()
        .args([
            "plot",
            &a,
            &b,
            "-y",
            "contiguity",
            "-o",
            &svg,
            "--title",
            "t & <x>",
        ])
        .output()
        .unwrap();
    assert_success(&out, "plot svg");
    let text = std::fs::read_to_string(&svg).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("the SVG is XML");
    let polylines = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline"))
        .count();
    assert_eq!(polylines, 2);
    // One dotted phase line (the seq run's second component) and the legends.
    let dashed = doc
        .descendants()
        .filter(|n| n.attribute("stroke-dasharray").is_some())
        .count();
    assert_eq!(dashed, 1);
    assert!(text.contains(">navarro<") && text.contains(">base<"));

    // A comparison holds two reports: two lines, labelled as asked.
    let png = dir.join("fig.png").display().to_string();
    let out = splab()
        .args([
            "plot",
            &c,
            "-y",
            "superpage_bytes",
            "-o",
            &png,
            "--label",
            "one",
            "--label",
            "two",
        ])
        .output()
        .unwrap();
    assert_success(&out, "plot png");
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(&bytes[12..16], b"IHDR");
    let w = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
    let h = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
    assert_eq!((w, h), (800, 500));
}

#[test]
fn plot_errors_are_one_line() {
    let dir = tempfile_dir("plot-errors");
    let svg = dir.join("x.svg").display().to_string();
    let missing = dir.join("missing.json").display().to_string();
    let out = splab()
        .args(["plot", &missing, "-o", &svg])
        .output()
        .unwrap();
    assert_error_line(&out, 2, "missing", &["cannot read", "missing.json"]);

    let not_json = dir.join("n.txt");
    std::fs::write(&not_json, "hello").unwrap();
    let out = splab()
        .args(["plot", not_json.to_str().unwrap(), "-o", &svg])
        .output()
        .unwrap();
    assert_error_line(&out, 2, "not json", &["not JSON"]);

    let other = dir.join("o.json");
    std::fs::write(&other, r#"{"schema":"something.else"}"#).unwrap();
    let out = splab()
        .args(["plot", other.to_str().unwrap(), "-o", &svg])
        .output()
        .unwrap();
    assert_error_line(&out, 2, "not a report", &["not a splab report"]);

    let no_series = dir.join("s.json");
    std::fs::write(&no_series, r#"{"schema":"splab.report.v2","series":{}}"#).unwrap();
    let out = splab()
        .args(["plot", no_series.to_str().unwrap(), "-o", &svg])
        .output()
        .unwrap();
    assert_error_line(&out, 2, "no series", &["no series 'contiguity'"]);

    let out = splab()
        .args([
            "plot",
            no_series.to_str().unwrap(),
            "-o",
            &dir.join("f.gif").display().to_string(),
        ])
        .output()
        .unwrap();
    assert_error_line(&out, 2, "format", &[".svg or .png"]);

    // Nothing to draw: an empty figure was written, exit status 0.
    let empty_cmp = dir.join("ec.json");
    std::fs::write(&empty_cmp, r#"{"schema":"splab.compare.v2","reports":[]}"#).unwrap();
    let out = splab()
        .args(["plot", empty_cmp.to_str().unwrap(), "-o", &svg])
        .output()
        .unwrap();
    assert_error_line(
        &out,
        2,
        "empty comparison",
        &["ec.json", "holds no reports"],
    );
    let empty_series = dir.join("es.json");
    std::fs::write(
        &empty_series,
        r#"{"schema":"splab.report.v2","series":{"t":[],"contiguity":[]}}"#,
    )
    .unwrap();
    let out = splab()
        .args(["plot", empty_series.to_str().unwrap(), "-o", &svg])
        .output()
        .unwrap();
    assert_error_line(&out, 2, "empty series", &["es.json", "series.t is empty"]);

    // A figure path that cannot be created is bad input (exit status 2, README "Exit status"),
    // found before the reports are read; it was a write error, exit status 1, after them.
    let report = dir.join("r.json");
    std::fs::write(
        &report,
        r#"{"schema":"splab.report.v2","series":{"t":[0.0,1.0],"contiguity":[1.0,0.5]}}"#,
    )
    .unwrap();
    let out = splab()
        .args([
            "plot",
            report.to_str().unwrap(),
            "-o",
            "/no/such/folder/f.svg",
        ])
        .output()
        .unwrap();
    assert_error_line(
        &out,
        2,
        "unwritable",
        &["-o /no/such/folder/f.svg", "cannot create"],
    );
    // None of the failures above left a figure or a temporary file behind.
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("svg") || n.contains("gif"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A sweep: one point per report, x from --x-values, y from a JSON path; the reports of one
/// line are consecutive.
#[test]
fn plots_a_sweep_of_reports() {
    let dir = tempfile_dir("plot-sweep");
    let mut paths = Vec::new();
    for (i, (policy, misses)) in [
        ("a", 10),
        ("a", 20),
        ("a", 40),
        ("b", 5),
        ("b", 5),
        ("b", 6),
    ]
    .iter()
    .enumerate()
    {
        let p = dir.join(format!("r{i}.json"));
        std::fs::write(
            &p,
            format!(
                r#"{{"schema":"splab.report.v2","config":{{"policy":"{policy}","machine":"core2-64"}},"tlb":{{"levels":[{{"misses":{misses}}}]}}}}"#
            ),
        )
        .unwrap();
        paths.push(p.display().to_string());
    }
    let svg = dir.join("sweep.svg").display().to_string();
    let mut args = vec!["plot".to_string()];
    args.extend(paths.iter().cloned());
    args.extend(
        [
            "-y",
            "tlb.levels.0.misses",
            "--x-values",
            "50,100,150",
            "--x-label",
            "N",
            "-o",
            &svg,
        ]
        .map(String::from),
    );
    let out = splab().args(&args).output().unwrap();
    assert_success(&out, "plot sweep");
    let text = std::fs::read_to_string(&svg).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("the SVG is XML");
    let lines: Vec<Vec<(f64, f64)>> = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline"))
        .map(|n| {
            n.attribute("points")
                .unwrap()
                .split_whitespace()
                .map(|p| {
                    let (x, y) = p.split_once(',').unwrap();
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect()
        })
        .collect();
    assert_eq!(lines.len(), 2);
    assert!(lines.iter().all(|l| l.len() == 3));
    // Same x positions on both lines, increasing; line a rises (SVG y falls), b stays low.
    assert_eq!(
        lines[0].iter().map(|p| p.0).collect::<Vec<_>>(),
        lines[1].iter().map(|p| p.0).collect::<Vec<_>>()
    );
    assert!(lines[0][0].0 < lines[0][1].0 && lines[0][1].0 < lines[0][2].0);
    assert!(lines[0][0].1 > lines[0][1].1 && lines[0][1].1 > lines[0][2].1);
    assert_eq!(lines[1][0].1, lines[1][1].1);
    assert!(lines[1][2].1 < lines[1][1].1 && lines[1][2].1 > lines[0][2].1);
    assert!(text.contains(">N<") && text.contains(">a<") && text.contains(">b<"));

    // Five reports cannot be split into lines of three.
    let out = splab()
        .args(
            [&paths[0], &paths[1], &paths[2], &paths[3], &paths[4]]
                .iter()
                .fold(vec!["plot".to_string()], |mut v, p| {
                    v.push(p.to_string());
                    v
                }),
        )
        .args([
            "-y",
            "tlb.levels.0.misses",
            "--x-values",
            "1,2,3",
            "-o",
            &svg,
        ])
        .output()
        .unwrap();
    assert_error_line(&out, 2, "count", &["5 reports for 3 x values"]);
    let out = splab()
        .args([
            "plot",
            &paths[0],
            "-y",
            "tlb.levels.1.misses",
            "--x-values",
            "1",
            "-o",
            &svg,
        ])
        .output()
        .unwrap();
    assert_error_line(&out, 2, "path", &["no number at 'tlb.levels.1.misses'"]);
    // Negative x values are values, not flags (a sweep over log2 sizes, say), as
    // `--x-values -2,-1,0` and as `--x-values=-2,-1,0`.
    for args in [vec!["--x-values", "-2,-1,0"], vec!["--x-values=-2,-1,0"]] {
        let out = splab()
            .args([&paths[0], &paths[1], &paths[2]].iter().fold(
                vec!["plot".to_string()],
                |mut v, p| {
                    v.push(p.to_string());
                    v
                },
            ))
            .args(["-y", "tlb.levels.0.misses", "-o", &svg])
            .args(&args)
            .output()
            .unwrap();
        assert_success(&out, &args);
    }
    // An x that is not a finite number has no place on the axis: bad input, not a figure with
    // NaN coordinates.
    for xs in ["1,NaN,3", "1,inf,3", "2,3,-inf"] {
        let out = splab()
            .args([&paths[0], &paths[1], &paths[2]].iter().fold(
                vec!["plot".to_string()],
                |mut v, p| {
                    v.push(p.to_string());
                    v
                },
            ))
            .args(["-y", "tlb.levels.0.misses", "--x-values", xs, "-o", &svg])
            .output()
            .unwrap();
        assert_error_line(&out, 2, xs, &["--x-values", "finite"]);
    }
}

/// A fresh directory under the target dir for one test's files.
fn tempfile_dir(name: &str) -> std::path::PathBuf {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
