//! UPDATEs judged for what they change: every variable that reads the object is
//! defined again over `oldObject` (`old` + Name, after the others; the API server
//! evaluates a variable only when an expression reads it, so on a CREATE none of them
//! runs), and a validation holds on an UPDATE when it holds on the new object or already
//! failed on the old one. So a controller updating an object admitted before (the
//! garbage collector removing a finalizer, Kueue unsuspending a job it admitted) is
//! never refused, while an UPDATE that brings a new violation is.

use crate::vap::text::rebase;

/// Named CEL expressions: variables, or renames of variables.
pub(crate) type Named = Vec<(String, String)>;

/// The name a variable has over `oldObject`.
fn old_name(name: &str) -> String {
    let mut c = name.chars();
    let first = c.next().map(|f| f.to_ascii_uppercase()).unwrap_or_default();
    format!("old{first}{}", c.as_str())
}

/// `vars` followed by the old object's copies of those that read the object, with the
/// renames that take an expression over to the old object.
pub(crate) fn with_old(vars: Named) -> (Named, Named) {
    let mut renames: Vec<(String, String)> = Vec::new();
    let mut old = Vec::new();
    for (name, expr) in &vars {
        let moved = rebase(expr, "oldObject", &renames);
        if moved != *expr {
            renames.push((name.clone(), old_name(name)));
            old.push((old_name(name), moved));
        }
    }
    let mut all = vars;
    all.extend(old);
    (all, renames)
}

/// `validation` as it holds on an UPDATE.
pub(crate) fn on_update(validation: &str, renames: &[(String, String)]) -> String {
    format!(
        "({validation}) || (request.operation == 'UPDATE' && oldObject != null && !({}))",
        rebase(validation, "oldObject", renames)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_reads_the_object_is_copied_and_constants_are_shared() {
        let vars = vec![
            ("catalog".to_string(), "{'p5': 8}".to_string()),
            ("sites".to_string(), "object.spec.x".to_string()),
            (
                "fires".to_string(),
                "variables.sites.exists(s, s in variables.catalog)".to_string(),
            ),
        ];
        let (all, renames) = with_old(vars);
        let names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["catalog", "sites", "fires", "oldSites", "oldFires"]);
        assert_eq!(
            all[4].1,
            "variables.oldSites.exists(s, s in variables.catalog)"
        );
        assert_eq!(
            on_update("!variables.fires", &renames),
            "(!variables.fires) || (request.operation == 'UPDATE' && oldObject != null && !(!variables.oldFires))"
        );
    }
}
