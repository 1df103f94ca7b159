//! Tuning curves as SVG: best GFLOP/s (or a fraction of each task's final
//! best) against trials, one line per series, the legend beside the chart;
//! or a suite's estimated end-to-end latency against trials.
//!
//! Text is written as SVG `<text>` and laid out by the viewer, so no system
//! fonts are needed (plotters is built without its `ttf` feature). The file
//! is written atomically: a temporary file beside it, then a rename.
//!
//! Built with the `cli` feature only (plotters is its dependency): without
//! it the CI job's report draws no curves.

use std::path::{Path, PathBuf};

use plotters::prelude::*;
use thiserror::Error;

use super::scheduler::LatencyPoint;
use super::tuner::CurvePoint;

/// A plot that could not be made.
#[derive(Debug, Error)]
pub enum PlotError {
    /// Drawing failed (a bug, or an absurd size).
    #[error("cannot draw the plot {path}: {reason}")]
    Draw {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The file cannot be written.
    #[error("cannot write the plot {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

const CHART_WIDTH: u32 = 760;
const LEGEND_WIDTH: u32 = 300;
const LEGEND_ROW: u32 = 18;

/// Distinct colours that read on white (Tableau 10, then darker and lighter
/// variants); series beyond 20 reuse them in order.
const COLORS: [(u8, u8, u8); 20] = [
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
    (0, 63, 92),
    (166, 86, 0),
    (0, 100, 0),
    (128, 0, 38),
    (84, 39, 143),
    (90, 50, 40),
    (160, 40, 120),
    (40, 40, 40),
    (110, 110, 0),
    (0, 110, 120),
];

fn color(index: usize) -> RGBColor {
    let (r, g, b) = COLORS[index % COLORS.len()];
    RGBColor(r, g, b)
}

type Points = Vec<(u64, f64)>;

/// Draws best GFLOP/s against trials for each `(label, curve)` into the SVG file `path`.
pub fn plot_curves(
    path: &Path,
    title: &str,
    series: &[(String, Vec<CurvePoint>)],
) -> Result<(), PlotError> {
    let lines: Vec<(String, Points)> = series
        .iter()
        .map(|(label, curve)| {
            let points = curve
                .iter()
                .map(|p| (p.trials as u64, p.best_gflops))
                .collect();
            (label.clone(), points)
        })
        .collect();
    draw(path, title, "best GFLOP/s", &lines)
}

/// Draws each curve as a fraction of its own final best GFLOP/s (so tasks
/// of very different speeds share one axis) against the task's trials.
/// A curve that never found a valid schedule stays at 0.
pub fn plot_normalised_curves(
    path: &Path,
    title: &str,
    series: &[(String, Vec<CurvePoint>)],
) -> Result<(), PlotError> {
    let lines: Vec<(String, Points)> = series
        .iter()
        .map(|(label, curve)| {
            let last = curve.last().map_or(0.0, |p| p.best_gflops);
            let points = curve
                .iter()
                .map(|p| {
                    let y = if last > 0.0 {
                        p.best_gflops / last
                    } else {
                        0.0
                    };
                    (p.trials as u64, y)
                })
                .collect();
            (label.clone(), points)
        })
        .collect();
    draw(path, title, "best GFLOP/s / its final best", &lines)
}

/// Draws a suite run's end-to-end latency curve (milliseconds against
/// trials; `start`, the objective before the first round, at trial 0) as
/// one line labelled `label`. Points with no value (a task without any
/// valid schedule yet) are left out.
pub fn plot_latency_curve(
    path: &Path,
    title: &str,
    label: &str,
    start: Option<f64>,
    curve: &[LatencyPoint],
) -> Result<(), PlotError> {
    let first = start.map(|s| (0, s));
    let points: Points = first
        .into_iter()
        .chain(
            curve
                .iter()
                .filter_map(|p| p.latency_s.map(|s| (p.trials as u64, s))),
        )
        .map(|(trials, s)| (trials, s * 1e3))
        .collect();
    draw(
        path,
        title,
        "estimated end-to-end latency (ms)",
        &[(label.to_string(), points)],
    )
}

/// The best-so-far as a staircase: it holds until the next round's result.
fn steps(points: &[(u64, f64)]) -> Points {
    let mut out = Vec::with_capacity(2 * points.len());
    for (i, &(x, y)) in points.iter().enumerate() {
        if i > 0 {
            out.push((x, points[i - 1].1));
        }
        out.push((x, y));
    }
    out
}

fn draw(
    path: &Path,
    title: &str,
    y_label: &str,
    series: &[(String, Points)],
) -> Result<(), PlotError> {
    let draw_err = |e: &dyn std::fmt::Display| PlotError::Draw {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let height = 480.max(80 + LEGEND_ROW * series.len() as u32);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (CHART_WIDTH + LEGEND_WIDTH, height))
            .into_drawing_area();
        root.fill(&WHITE).map_err(|e| draw_err(&e))?;
        let (chart_area, legend_area) = root.split_horizontally(CHART_WIDTH);
        let x_max = series
            .iter()
            .flat_map(|(_, points)| points.iter().map(|p| p.0))
            .fold(1, u64::max);
        let y_max = series
            .iter()
            .flat_map(|(_, points)| points.iter().map(|p| p.1))
            .filter(|y| y.is_finite())
            .fold(0.0, f64::max);
        let y_max = if y_max > 0.0 { y_max * 1.08 } else { 1.0 };
        let mut chart = ChartBuilder::on(&chart_area)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(42)
            .y_label_area_size(64)
            .build_cartesian_2d(0..x_max, 0.0..y_max)
            .map_err(|e| draw_err(&e))?;
        chart
            .configure_mesh()
            .x_desc("trials")
            .y_desc(y_label)
            .x_labels(x_max.min(10) as usize + 1)
            .label_style(("sans-serif", 13))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(|e| draw_err(&e))?;
        for (index, (_, points)) in series.iter().enumerate() {
            let c = color(index);
            chart
                .draw_series(LineSeries::new(steps(points), c.stroke_width(2)))
                .map_err(|e| draw_err(&e))?;
            chart
                .draw_series(points.iter().map(|&p| Circle::new(p, 2, c.filled())))
                .map_err(|e| draw_err(&e))?;
        }
        for (index, (label, _)) in series.iter().enumerate() {
            let y = 40 + (index as u32 * LEGEND_ROW) as i32;
            legend_area
                .draw(&PathElement::new(
                    vec![(8, y), (32, y)],
                    color(index).stroke_width(3),
                ))
                .map_err(|e| draw_err(&e))?;
            let style = ("sans-serif", 13).into_text_style(&legend_area).pos(
                plotters::style::text_anchor::Pos::new(
                    plotters::style::text_anchor::HPos::Left,
                    plotters::style::text_anchor::VPos::Center,
                ),
            );
            legend_area
                .draw(&Text::new(label.clone(), (40, y), style))
                .map_err(|e| draw_err(&e))?;
        }
        root.present().map_err(|e| draw_err(&e))?;
    }
    write_atomically(path, svg.as_bytes())
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), PlotError> {
    let write_err = |source| PlotError::Write {
        path: path.to_path_buf(),
        source,
    };
    let name = path
        .file_name()
        .map_or("plot".into(), |n| n.to_string_lossy().into_owned());
    let temp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&temp, bytes).map_err(write_err)?;
    std::fs::rename(&temp, path).map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        write_err(e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve(points: &[(usize, f64)]) -> Vec<CurvePoint> {
        points
            .iter()
            .map(|&(trials, best_gflops)| CurvePoint {
                trials,
                secs: trials as f64,
                best_gflops,
            })
            .collect()
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tessera-plot-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    #[test]
    fn curves_are_written_as_svg_with_their_labels() {
        let dir = temp_dir("svg");
        let path = dir.join("curve.svg");
        let series = vec![
            (
                "GMM-1 <b&m>".to_string(),
                curve(&[(0, 1.0), (4, 2.5), (8, 3.0)]),
            ),
            (
                "C2D-2".to_string(),
                curve(&[(0, 0.5), (4, 0.5), (8, 4.0), (12, 4.2)]),
            ),
        ];
        plot_curves(&path, "tuning curves", &series).expect("plots");
        let svg = std::fs::read_to_string(&path).expect("written");
        assert!(
            svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
            "{svg}"
        );
        assert!(svg.contains("tuning curves") && svg.contains("C2D-2"));
        assert!(svg.contains("GMM-1 &lt;b&amp;m&gt;"), "labels are escaped");
        assert!(svg.contains("best GFLOP/s") && svg.contains("trials"));
        assert!(svg.matches("<polyline").count() >= 2, "one line per series");
        assert!(svg.matches("<circle").count() >= 7, "a marker per point");
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .expect("dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(leftovers.len(), 1, "no temporary file left: {leftovers:?}");
        plot_normalised_curves(&path, "suite", &series).expect("replaces the file");
        let svg = std::fs::read_to_string(&path).expect("written");
        assert!(svg.contains("its final best"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_best_so_far_is_drawn_as_a_staircase() {
        let points = [(0, 1.0), (4, 2.0), (8, 2.0), (12, 3.0)];
        assert_eq!(
            steps(&points),
            vec![
                (0, 1.0),
                (4, 1.0),
                (4, 2.0),
                (8, 2.0),
                (8, 2.0),
                (12, 2.0),
                (12, 3.0)
            ]
        );
        assert!(steps(&[]).is_empty());
    }

    #[test]
    fn empty_and_failed_curves_still_plot() {
        let dir = temp_dir("empty");
        let path = dir.join("empty.svg");
        let series = vec![
            ("none".to_string(), Vec::new()),
            ("failed".to_string(), curve(&[(0, 0.0), (4, 0.0)])),
        ];
        plot_normalised_curves(&path, "nothing", &series).expect("plots");
        assert!(
            std::fs::read_to_string(&path)
                .expect("written")
                .contains("failed")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_latency_curve_is_drawn_in_milliseconds_from_its_start() {
        let dir = temp_dir("latency");
        let path = dir.join("latency.svg");
        let point = |trials, latency_s| LatencyPoint {
            trials,
            secs: 0.0,
            latency_s,
        };
        let curve = [
            point(4, None),
            point(8, Some(2e-3)),
            point(12, Some(1.5e-3)),
        ];
        plot_latency_curve(&path, "model m", "tasks of m", Some(3e-3), &curve).expect("plots");
        let svg = std::fs::read_to_string(&path).expect("written");
        assert!(svg.contains("end-to-end latency (ms)") && svg.contains("tasks of m"));
        assert_eq!(
            svg.matches("<circle").count(),
            3,
            "start + two known points"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_unwritable_path_is_an_error_naming_it() {
        let e = plot_curves(Path::new("/nonexistent-dir/x.svg"), "t", &[]).expect_err("fails");
        assert!(e.to_string().contains("/nonexistent-dir/x.svg"), "{e}");
    }
}
