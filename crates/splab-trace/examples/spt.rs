//! A tiny command line over the library, for trying traces by hand until the CLI has
//! `splab record` / `splab trace info|cat` (which call the same functions):
//!   cargo run --release -p splab-trace --example spt -- record OUT.spt CMD ARGS...
//!   cargo run --release -p splab-trace --example spt -- info FILE.spt
//!   cargo run --release -p splab-trace --example spt -- cat FILE.spt [N]
//!   cargo run --release -p splab-trace --example spt -- import-champsim IN.xz OUT.spt
use std::io::Write;
use std::path::Path;

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let out = &mut std::io::stdout().lock();
    let res: Result<(), Box<dyn std::error::Error>> = match a.first().map(String::as_str) {
        Some("record") if a.len() >= 3 => {
            let opts = splab_trace::RecordOptions::default();
            splab_trace::record(&opts, &a[2..], Path::new(&a[1]), |p| {
                eprint!("\r{}   ", p.line())
            })
            .map(|s| eprintln!("\n{s}"))
            .map_err(Into::into)
        }
        Some("info") if a.len() == 2 => {
            splab_trace::info(Path::new(&a[1]), out).map_err(Into::into)
        }
        Some("cat") if a.len() >= 2 => {
            let n = a.get(2).and_then(|n| n.parse().ok());
            splab_trace::cat(Path::new(&a[1]), out, n).map_err(Into::into)
        }
        Some("import-champsim") if a.len() == 3 => {
            splab_trace::import_champsim(Path::new(&a[1]), Path::new(&a[2]), &Default::default())
                .map(|s| eprintln!("{s:?}"))
                .map_err(Into::into)
        }
        _ => Err(
            "usage: spt record OUT CMD... | info FILE | cat FILE [N] | import-champsim IN OUT"
                .into(),
        ),
    };
    let _ = out.flush();
    if let Err(e) = res {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
