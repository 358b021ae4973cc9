//! Does a query aggregate? Aggregated rows cannot be replayed by position: a model that
//! groups is not a replay anchor.

use crate::lexer::{Kind, lex};

/// ClickHouse aggregate and window functions (lower-case), without combinators.
const AGGREGATES: &[&str] = &[
    "aggthrow",
    "any",
    "anyheavy",
    "anylast",
    "anyvalue",
    "approx_top_count",
    "approx_top_k",
    "approx_top_sum",
    "argmax",
    "argmin",
    "array_agg",
    "avg",
    "avgweighted",
    "boundingratio",
    "categoricalinformationvalue",
    "contingency",
    "corr",
    "corrmatrix",
    "corrstable",
    "count",
    "covarpop",
    "covarpopmatrix",
    "covarpopstable",
    "covarsamp",
    "covarsampmatrix",
    "covarsampstable",
    "cramersv",
    "cramersvbiascorrected",
    "cume_dist",
    "deltasum",
    "deltasumtimestamp",
    "dense_rank",
    "entropy",
    "exponentialmovingaverage",
    "exponentialtimedecayedavg",
    "exponentialtimedecayedcount",
    "exponentialtimedecayedmax",
    "exponentialtimedecayedsum",
    "first_value",
    "flamegraph",
    "grouparray",
    "grouparrayinsertat",
    "grouparraylast",
    "grouparraymovingavg",
    "grouparraymovingsum",
    "grouparraysample",
    "grouparraysorted",
    "grouparrayintersect",
    "groupbitand",
    "groupbitmap",
    "groupbitmapand",
    "groupbitmapor",
    "groupbitmapxor",
    "groupbitor",
    "groupbitxor",
    "groupconcat",
    "groupuniqarray",
    "histogram",
    "intervallengthsum",
    "kolmogorovsmirnovtest",
    "kurtpop",
    "kurtsamp",
    "lag",
    "laginframe",
    "largesttrianglethreebuckets",
    "last_value",
    "lead",
    "leadinframe",
    "mannwhitneyutest",
    "max",
    "maxintersections",
    "maxintersectionsposition",
    "maxmap",
    "meanztest",
    "median",
    "mediandeterministic",
    "medianexact",
    "medianexacthigh",
    "medianexactlow",
    "medianexactweighted",
    "mediantdigest",
    "mediantdigestweighted",
    "mediantiming",
    "mediantimingweighted",
    "min",
    "minmap",
    "nonnegativederivative",
    "nth_value",
    "ntile",
    "percent_rank",
    "quantile",
    "quantilebfloat16",
    "quantilebfloat16weighted",
    "quantiledd",
    "quantiledeterministic",
    "quantileexact",
    "quantileexacthigh",
    "quantileexactlow",
    "quantileexactweighted",
    "quantilegk",
    "quantileinterpolatedweighted",
    "quantiles",
    "quantilesexact",
    "quantilestdigest",
    "quantiletdigest",
    "quantiletdigestweighted",
    "quantiletiming",
    "quantiletimingweighted",
    "rank",
    "rankcorr",
    "retention",
    "row_number",
    "sequencecount",
    "sequencematch",
    "sequencenextnode",
    "simplelinearregression",
    "singlevalueornull",
    "skewpop",
    "skewsamp",
    "sparkbar",
    "stddevpop",
    "stddevpopstable",
    "stddevsamp",
    "stddevsampstable",
    "stochasticlinearregression",
    "stochasticlogisticregression",
    "studentttest",
    "sum",
    "sumcount",
    "sumkahan",
    "summap",
    "summapfiltered",
    "summapwithoverflow",
    "sumwithoverflow",
    "theilsu",
    "topk",
    "topkweighted",
    "uniq",
    "uniqcombined",
    "uniqcombined64",
    "uniqexact",
    "uniqhll12",
    "uniqthetasketch",
    "uniqupto",
    "varpop",
    "varpopstable",
    "varsamp",
    "varsampstable",
    "welchttest",
    "windowfunnel",
    "finalizeaggregation",
    "initializeaggregation",
];

/// Combinator suffixes, stripped repeatedly (`sumIfOrNull` -> `sum`).
const COMBINATORS: &[&str] = &[
    "mergestate",
    "simplestate",
    "resample",
    "ordefault",
    "distinct",
    "foreach",
    "ornull",
    "merge",
    "state",
    "array",
    "map",
    "if",
];

pub(crate) fn is_aggregate(name: &str) -> bool {
    let mut name = name.to_ascii_lowercase();
    loop {
        if AGGREGATES.contains(&name.as_str()) {
            return true;
        }
        let Some(stripped) = COMBINATORS.iter().find_map(|suffix| {
            name.strip_suffix(suffix)
                .filter(|rest| !rest.is_empty())
                .map(str::to_owned)
        }) else {
            return false;
        };
        name = stripped;
    }
}

/// True when the query groups anywhere or calls an aggregate or window function.
#[must_use]
pub fn has_aggregate_semantics(sql: &str) -> bool {
    let Ok(tokens) = lex(sql) else { return false };
    let tokens: Vec<_> = tokens.into_iter().filter(|t| !t.is_trivia()).collect();
    tokens.windows(2).any(|pair| {
        (pair[0].is_keyword("GROUP") && pair[1].is_keyword("BY"))
            || (pair[0].kind == Kind::Word && pair[1].is_punct("(") && is_aggregate(pair[0].text))
    })
}

/// Engines whose merges combine rows.
#[must_use]
pub fn is_aggregating_engine(engine: &str) -> bool {
    let name = engine
        .split('(')
        .next()
        .unwrap_or(engine)
        .trim()
        .to_ascii_lowercase();
    let name = name.strip_prefix("replicated").unwrap_or(&name);
    name == "summingmergetree" || name == "aggregatingmergetree"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregates_are_recognised() {
        assert!(has_aggregate_semantics("SELECT a FROM t GROUP BY a"));
        assert!(has_aggregate_semantics(
            "SELECT sumIf(x, y)::Int64 AS s FROM t"
        ));
        assert!(has_aggregate_semantics(
            "SELECT uniqExactStateOrNull(x) AS s FROM t"
        ));
        assert!(has_aggregate_semantics(
            "SELECT row_number() OVER (ORDER BY a) AS n FROM t"
        ));
        assert!(has_aggregate_semantics(
            "SELECT x FROM (SELECT count() AS x FROM t)"
        ));
        assert!(!has_aggregate_semantics(
            "SELECT lower(a)::String AS a, if(b, 1, 0) AS c FROM t"
        ));
        assert!(!has_aggregate_semantics(
            "SELECT 'group by' AS s, sum_col AS x FROM t -- count(*)"
        ));
    }

    #[test]
    fn aggregating_engines() {
        assert!(is_aggregating_engine("SummingMergeTree(amount)"));
        assert!(is_aggregating_engine(
            "ReplicatedAggregatingMergeTree('/p', 'r')"
        ));
        assert!(!is_aggregating_engine("ReplacingMergeTree(v)"));
    }
}
