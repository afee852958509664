//! Unit tests of the report: its summary line, cleanliness and finding format.

use super::*;

/// A finding prints as `address: kind: message`.
#[test]
fn finding_display() {
    let f = Finding {
        kind: FindingKind::CfaMismatch,
        address: 0x401004,
        message: "details".into(),
    };
    assert_eq!(f.to_string(), "0x401004: cfa-mismatch: details");
}

/// The summary names the counts, the CFI source and each skip reason.
#[test]
fn report_summary() {
    let mut report = Report {
        functions: 3,
        rows: 10,
        compared: 7,
        addresses: 9,
        cfi: vec![CfiSource::EhFrameHdr, CfiSource::DebugFrame],
        ..Report::default()
    };
    report.skip(reason::PLT_EXPRESSION, 2);
    report.skip(reason::NO_FDE, 1);
    report.skip(reason::NO_FDE, 0);
    assert!(report.is_clean());
    assert_eq!(
        report.to_string(),
        "3 functions, 10 rows; 7 rows compared with .eh_frame (via .eh_frame_hdr) then .debug_frame at 9 addresses; \
         skipped: 2 in PC-mask (PLT) functions whose CFI CFA is an expression, 1 outside every CFI FDE; 0 findings"
    );
    report.finding(FindingKind::Overlap, 1, "x".into());
    assert!(!report.is_clean());
    assert!(report.to_string().ends_with("; 1 finding"));
}

/// Error chains are flattened onto one line.
#[test]
fn error_chain_joins_sources() {
    let e = CfiError::Lookup {
        section: ".eh_frame",
        pc: 0x10,
        source: gimli::Error::UnexpectedEof(gimli::ReaderOffsetId(0)),
    };
    let text = error_chain(&e);
    assert!(
        text.starts_with(".eh_frame: cannot find the FDE for pc 0x10: "),
        "{text}"
    );
}

/// Notes are printed with the summary, once each, and do not make the report unclean.
#[test]
fn notes_do_not_make_the_report_unclean() {
    let mut report = Report::default();
    report.note(UNSUPPORTED_CFI_NOTE);
    report.note(UNSUPPORTED_CFI_NOTE);
    assert!(report.is_clean());
    assert_eq!(report.notes.len(), 1);
    assert!(
        report
            .to_string()
            .ends_with(&format!("0 findings; note: {UNSUPPORTED_CFI_NOTE}")),
        "{report}"
    );
}
