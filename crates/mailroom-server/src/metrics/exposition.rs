//! The two text formats `/metrics` answers in: OpenMetrics 1.0, which
//! `prometheus-client` writes, for scrapers that ask for it, and the Prometheus text
//! format 0.0.4, derived from it, for everything else (`promtool`, older scrapers,
//! `curl`).
//!
//! The formats differ where it matters to a parser: OpenMetrics names a counter family
//! without its `_total` suffix (`# TYPE mailroom_publishes counter` over samples named
//! `mailroom_publishes_total`), while 0.0.4 wants `# HELP` and `# TYPE` under the
//! sample's own name, and knows neither `# UNIT` nor `# EOF`.

/// The `Content-Type` of an OpenMetrics answer.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The `Content-Type` of a Prometheus text 0.0.4 answer.
pub const PROMETHEUS_TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Whether a scraper's `Accept` header asks for OpenMetrics (Prometheus sends
/// `application/openmetrics-text;version=1.0.0,...;q=0.5,text/plain;...`); anything
/// else, no header included, gets the 0.0.4 text.
///
/// ```
/// use mailroom_server::metrics::exposition::wants_openmetrics;
/// assert!(wants_openmetrics(Some("application/openmetrics-text;version=1.0.0,text/plain;q=0.5")));
/// assert!(!wants_openmetrics(Some("text/plain")));
/// assert!(!wants_openmetrics(None));
/// ```
pub fn wants_openmetrics(accept: Option<&str>) -> bool {
    accept.is_some_and(|accept| {
        accept.split(',').any(|choice| {
            let mut parts = choice.split(';');
            let media = parts.next().unwrap_or("").trim();
            // A choice refused with q=0 is not asked for.
            let refused = parts.any(|parameter| {
                let parameter = parameter.trim().replace(' ', "");
                parameter == "q=0" || parameter == "q=0.0" || parameter == "q=0.00"
            });
            media.eq_ignore_ascii_case("application/openmetrics-text") && !refused
        })
    })
}

/// Rewrites OpenMetrics text as Prometheus text 0.0.4: counter families are described
/// under their `_total` sample name, `# UNIT` and `# EOF` lines are dropped, and the
/// types 0.0.4 lacks become `gauge` (`info`, `stateset`) or `untyped` (`unknown`).
///
/// ```
/// use mailroom_server::metrics::exposition::to_prometheus_text;
/// let open = "# HELP jobs Jobs done.\n# TYPE jobs counter\njobs_total 3\n# EOF\n";
/// assert_eq!(
///     to_prometheus_text(open),
///     "# HELP jobs_total Jobs done.\n# TYPE jobs_total counter\njobs_total 3\n",
/// );
/// ```
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let mut text = String::with_capacity(openmetrics.len());
    // A family's HELP line comes before its TYPE, which says whether to rename it.
    let mut help: Option<(&str, &str)> = None;
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            flush_help(&mut text, help.take(), None);
            let (name, words) = rest.split_once(' ').unwrap_or((rest, ""));
            help = Some((name, words));
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let (name, kind) = match kind {
                "counter" if !name.ends_with("_total") => {
                    flush_help(&mut text, help.take(), Some("_total"));
                    (format!("{name}_total"), "counter")
                }
                other => {
                    flush_help(&mut text, help.take(), None);
                    let kind = match other {
                        "info" | "stateset" => "gauge",
                        "unknown" => "untyped",
                        known => known,
                    };
                    (name.to_owned(), kind)
                }
            };
            text.push_str(&format!("# TYPE {name} {kind}\n"));
        } else if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        } else {
            flush_help(&mut text, help.take(), None);
            text.push_str(line);
            text.push('\n');
        }
    }
    flush_help(&mut text, help, None);
    text
}

fn flush_help(text: &mut String, help: Option<(&str, &str)>, suffix: Option<&str>) {
    if let Some((name, words)) = help {
        let suffix = suffix.unwrap_or("");
        text.push_str(&format!("# HELP {name}{suffix} {words}\n"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves histograms and gauges pass through, units go, and a refused OpenMetrics
    // choice is not taken as asked for.
    #[test]
    fn other_families_and_refusals() {
        let open = "# HELP lag Lag.\n# TYPE lag gauge\nlag{g=\"a\"} 2\n\
                    # HELP wait Waits.\n# TYPE wait histogram\n# UNIT wait seconds\n\
                    wait_bucket{le=\"+Inf\"} 1\nwait_sum 0.5\nwait_count 1\n# EOF\n";
        let text = to_prometheus_text(open);
        assert_eq!(
            text,
            "# HELP lag Lag.\n# TYPE lag gauge\nlag{g=\"a\"} 2\n\
             # HELP wait Waits.\n# TYPE wait histogram\n\
             wait_bucket{le=\"+Inf\"} 1\nwait_sum 0.5\nwait_count 1\n"
        );
        assert!(!wants_openmetrics(Some(
            "application/openmetrics-text;q=0, text/plain"
        )));
        assert!(wants_openmetrics(Some(
            "Application/OpenMetrics-Text; version=1.0.0"
        )));
    }
}
