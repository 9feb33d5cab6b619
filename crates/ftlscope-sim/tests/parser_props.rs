//! Property tests of the configuration parser: whatever a person types, it answers with a configuration or
//! one line naming what is wrong, and never panics.

use ftlscope_sim::parse::{parse_device, to_toml};
use ftlscope_sim::presets;
use proptest::prelude::*;

/// Text a mutation inserts: TOML punctuation, units, numbers at the edges, keys of other sections.
const TOKENS: &[&str] = &[
    "\"",
    "=",
    "[",
    "]",
    "{",
    "}",
    ",",
    "\n",
    "#",
    ".",
    "-",
    "0",
    "1",
    "-1",
    "1e400",
    "nan",
    "inf",
    "\"inf\"",
    "18446744073709551616",
    "9223372036854775807",
    "\"0B\"",
    "\"-5us\"",
    "\"5.5ns\"",
    "\"1TiB\"",
    "\"1e3MB/s\"",
    "KiB",
    "us",
    "MB/s",
    "true",
    "[hdd]",
    "[device]",
    "kind = \"hdd\"",
    "capacity = \"0B\"",
    "µs",
    "\u{0}",
    "ü",
    "[noise]",
    "[thermal]",
    "[faults]",
    "latency_cv = 3",
    "rpm = 0",
    "page_pattern = \"4L 2H\"",
    "\"128KiB:L, 2M 2H\"",
];

#[derive(Clone, Debug)]
enum Mutation {
    Delete {
        at: usize,
        len: usize,
    },
    Insert {
        at: usize,
        token: usize,
    },
    /// Replace the value of the n-th `key = value` line with a token.
    Revalue {
        line: usize,
        token: usize,
    },
    DropLine {
        line: usize,
    },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1usize..12).prop_map(|(at, len)| Mutation::Delete { at, len }),
        (any::<usize>(), 0..TOKENS.len()).prop_map(|(at, token)| Mutation::Insert { at, token }),
        (any::<usize>(), 0..TOKENS.len()).prop_map(|(line, token)| Mutation::Revalue { line, token }),
        any::<usize>().prop_map(|line| Mutation::DropLine { line }),
    ]
}

/// The nearest char boundary at or before `at` (modulo the text's length).
fn boundary(text: &str, at: usize) -> usize {
    let mut i = at % (text.len() + 1);
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn apply(text: &str, m: &Mutation) -> String {
    match *m {
        Mutation::Delete { at, len } => {
            let start = boundary(text, at);
            let end = boundary(text, (start + len).min(text.len()));
            format!("{}{}", &text[..start], &text[end.max(start)..])
        }
        Mutation::Insert { at, token } => {
            let i = boundary(text, at);
            format!("{}{}{}", &text[..i], TOKENS[token], &text[i..])
        }
        Mutation::Revalue { line, token } => {
            let lines: Vec<&str> = text.lines().collect();
            let n = line % lines.len().max(1);
            lines
                .iter()
                .enumerate()
                .map(|(i, l)| match l.split_once(" = ") {
                    Some((k, _)) if i == n => format!("{k} = {}", TOKENS[token]),
                    _ => l.to_string(),
                })
                .collect::<Vec<_>>()
                .join("\n")
        }
        Mutation::DropLine { line } => {
            let lines: Vec<&str> = text.lines().collect();
            let n = line % lines.len().max(1);
            lines.iter().enumerate().filter(|(i, _)| *i != n).map(|(_, l)| *l).collect::<Vec<_>>().join("\n")
        }
    }
}

/// Every preset, as written by `ftlscope sim show` (every key present) and as shipped.
fn sources() -> &'static [String] {
    static SOURCES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    SOURCES.get_or_init(|| {
        let mut out = Vec::new();
        for name in presets::names() {
            let text = presets::get(name).expect("listed");
            out.push(text.to_string());
            out.push(to_toml(&parse_device(text).expect("presets parse")));
        }
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn mutated_configs_parse_or_fail_in_one_line(
        source in any::<prop::sample::Index>(),
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let all = sources();
        let mut text = all[source.index(all.len())].clone();
        for m in &mutations {
            text = apply(&text, m);
        }
        match parse_device(&text) {
            Ok(cfg) => {
                // Whatever parsed writes back to the same configuration.
                let written = to_toml(&cfg);
                prop_assert_eq!(parse_device(&written).expect("its own output parses"), cfg);
            }
            Err(e) => {
                let msg = e.to_string();
                prop_assert!(!msg.contains('\n') && !msg.is_empty(), "not one line: {:?}", msg);
            }
        }
    }
}
