//! "Did you mean ...?" for names a user mistyped: a model, source, pipeline, reference or
//! configuration key close to one that exists.

/// The candidate closest to `typed`, when one is close enough to be a likely typo: at most
/// one edit for short names, a third of the name's length for longer ones (an edit is an
/// insertion, deletion, substitution or swap of neighbours). Ties go to the first candidate
/// in sorted order, so the answer never depends on iteration order.
#[must_use]
pub fn closest<'a, I>(typed: &str, candidates: I) -> Option<String>
where
    I: IntoIterator<Item = &'a str>,
{
    let allowed = (typed.chars().count() / 3).max(1);
    let mut sorted: Vec<&str> = candidates.into_iter().filter(|c| *c != typed).collect();
    sorted.sort_unstable();
    sorted.dedup();
    sorted
        .into_iter()
        .map(|candidate| {
            let distance =
                strsim::damerau_levenshtein(&typed.to_lowercase(), &candidate.to_lowercase());
            (distance, candidate)
        })
        .filter(|(distance, _)| *distance <= allowed)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate.to_owned())
}

/// `"did you mean 'x'? "` for the closest candidate, or nothing: a prefix for a hint.
#[must_use]
pub fn did_you_mean<'a, I>(typed: &str, candidates: I) -> String
where
    I: IntoIterator<Item = &'a str>,
{
    closest(typed, candidates).map_or_else(String::new, |name| format!("did you mean '{name}'? "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_finds_the_name_and_a_stranger_finds_nothing() {
        let names = ["paid_orders", "order_events", "customer_revenue"];
        assert_eq!(closest("paid_order", names).as_deref(), Some("paid_orders"));
        assert_eq!(
            closest("oredr_events", names).as_deref(),
            Some("order_events")
        );
        assert_eq!(
            closest("Paid_Orders", names).as_deref(),
            Some("paid_orders")
        );
        assert_eq!(closest("inventory", names), None);
        assert_eq!(
            closest("x", ["y", "xy"]).as_deref(),
            Some("xy"),
            "one edit for short names"
        );
        assert_eq!(
            did_you_mean("paid_ordrs", names),
            "did you mean 'paid_orders'? "
        );
        assert_eq!(did_you_mean("zzz", names), "");
    }

    #[test]
    fn ties_are_broken_by_name() {
        assert_eq!(closest("ab", ["ac", "aa"]).as_deref(), Some("aa"));
    }
}
