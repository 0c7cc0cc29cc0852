//! `expand(compress(names)) == set(names)` on random name sets (prefixes, widths, gaps).

use std::collections::BTreeSet;

use fabric_slurm::hostlist::{compress, expand};
use proptest::prelude::*;

fn name() -> impl Strategy<Value = String> {
    (
        prop::sample::select(vec!["node", "n", "gpu-", "r1n", "login", "sw.a", "x_"]),
        prop::option::of((0u64..2500, 0usize..5)),
    )
        .prop_map(|(p, num)| match num {
            Some((v, w)) => format!("{p}{v:0w$}"),
            None => p.to_string(),
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn expand_of_compress_is_the_set(names in prop::collection::vec(name(), 0..200)) {
        let text = compress(names.iter().map(String::as_str));
        let back: BTreeSet<String> = expand(&text).unwrap().into_iter().collect();
        let want: BTreeSet<String> = names.into_iter().collect();
        prop_assert_eq!(back, want, "{}", text);
    }

    #[test]
    fn compress_is_stable(names in prop::collection::vec(name(), 0..100)) {
        let once = compress(names.iter().map(String::as_str));
        let again = compress(expand(&once).unwrap().iter().map(String::as_str));
        prop_assert_eq!(once, again);
    }
}
