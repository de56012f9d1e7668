//! `rocelab report RESULTS.json [--out FILE] [--format html|md]`: render a
//! run's results as a self-contained HTML page (SVG plots, side-by-side
//! variants, explanation) or as Markdown (table and explanation).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Output format of `rocelab report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One HTML page with inline SVG plots.
    Html,
    /// Markdown: summary table and explanation.
    Md,
}

/// Arguments of `rocelab report`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The results.json written by `rocelab run`.
    pub results: PathBuf,
    /// Output file (default: report.html or report.md next to the results).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Html)]
    pub format: Format,
}

/// Render the report; the exit status says whether it was written.
pub fn run(args: &Args) -> ExitCode {
    let doc = match reports::render::load(&args.results) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The narrative and thresholds `rocelab run` saved beside the results.
    let dir = args.results.parent().unwrap_or(Path::new("."));
    let ctx = match reports::render::load_context(dir) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (text, name) = match args.format {
        Format::Html => (reports::render::html_with(&doc, &ctx), "report.html"),
        Format::Md => (reports::render::markdown_with(&doc, &ctx), "report.md"),
    };
    let out = args.out.clone().unwrap_or_else(|| {
        args.results
            .parent()
            .map_or_else(|| PathBuf::from(name), |d| d.join(name))
    });
    if let Err(e) = std::fs::write(&out, text.as_bytes()) {
        eprintln!("error: writing {}: {e}", out.display());
        return ExitCode::FAILURE;
    }
    println!("wrote {} ({} bytes)", out.display(), text.len());
    ExitCode::SUCCESS
}
