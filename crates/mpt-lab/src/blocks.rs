//! The lab's blocks in a document: what stands between `<!-- mpt-lab KEY -->` and
//! `<!-- /mpt-lab KEY -->` is written by the lab (`--write-results`, `mpt-lab results`).

/// `doc` with the block of `key` replaced by `block`, or, without one, a section of it added
/// at the end.
pub fn splice(doc: &str, key: &str, block: &str) -> String {
    let open = format!("<!-- mpt-lab {key} -->");
    let close = format!("<!-- /mpt-lab {key} -->");
    if let (Some(a), Some(b)) = (doc.find(&open), doc.find(&close)) {
        if a < b {
            return format!("{}{open}\n{block}{}", &doc[..a], &doc[b..]);
        }
    }
    let mut out = doc.trim_end().to_owned();
    if !out.is_empty() {
        out.push_str("\n\n");
    }
    out.push_str(&format!("## {key}\n\n{open}\n{block}{close}\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_results_section_is_replaced_in_place_or_added_at_the_end() {
        let doc =
            "# R\n\n## T2\n\n<!-- mpt-lab table2 -->\nold\n<!-- /mpt-lab table2 -->\n\ntail\n";
        let out = splice(doc, "table2", "new\n");
        assert_eq!(
            out,
            "# R\n\n## T2\n\n<!-- mpt-lab table2 -->\nnew\n<!-- /mpt-lab table2 -->\n\ntail\n"
        );
        let added = splice(&out, "bench compare", "rows\n");
        assert!(added.starts_with(out.trim_end()));
        assert!(added.ends_with(
            "\n\n## bench compare\n\n<!-- mpt-lab bench compare -->\nrows\n<!-- /mpt-lab bench compare -->\n"
        ));
        // written again: in place, nothing added
        assert_eq!(splice(&added, "bench compare", "rows\n"), added);
        assert_eq!(
            splice("", "x", "y\n"),
            "## x\n\n<!-- mpt-lab x -->\ny\n<!-- /mpt-lab x -->\n"
        );
    }
}
