//! The shape of `--summary-format json` (`docs/schemas/summary.json`), drawn from the summary
//! of an empty session and of one with an OTLP export and a diagnosis (see
//! [`tracer_unwind::schema`]), so that the page says which fields may be null.

use std::time::Duration;

use tracer_common::walk::StopReason;

use super::Summary;
use crate::export::otlp::{Destination, ExportReport};
use crate::profile::Profile;
use crate::registry::Catalog;
use tracer_unwind::schema;

/// The page.
pub fn schema() -> String {
    let catalog = Catalog::default();
    let profile = Profile::default();
    let report = Destination::parse("http://localhost:4317", None)
        .ok()
        .map(|destination| ExportReport {
            destination,
            sent: 1,
            sent_samples: 2,
            queue_full: 0,
            failed: 1,
            unsent: 0,
            lost_samples: 0,
            retries: 0,
            rejected_profiles: 0,
            failed_by_reason: [("tls-unknown-issuer", 1)].into(),
        });
    let failed = ["out.folded: No space left on device".to_owned()];
    let examples = [
        (None, Vec::new()),
        (report.as_ref(), vec!["no samples: ...".to_owned()]),
    ]
    .map(|(otlp, diagnosis): (Option<&ExportReport>, Vec<String>)| {
        let summary = Summary {
            elapsed: Duration::from_millis(1500),
            why: "the duration ended",
            profile: &profile,
            catalog: &catalog,
            counters: Vec::new(),
            stops: vec![(StopReason::Outermost, 1), (StopReason::ZeroRa, 1)],
            copies: Default::default(),
            call_entries: Default::default(),
            table_bytes: 0,
            table_capacity_bytes: 0,
            follow: Default::default(),
            failed_outputs: &failed,
            otlp,
            python: Default::default(),
            diagnosis,
        };
        serde_json::to_value(summary.figures()).unwrap_or_default()
    });
    schema::page(&schema::shape(&examples.iter().collect::<Vec<_>>()))
}
