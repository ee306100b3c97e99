//! Diagnostics that know nothing of where a model came from.
//!
//! Passes report a [`Diag`] at a [`Loc`]: an index into a location table that the *front end*
//! owns. The DSL front end fills it with `proc_macro2::Span`s (so the macro reports at the
//! user's token); a model-file front end would store `file:line:col`, an ONNX importer a node
//! name. The IR and every pass below the front end carry only `Loc`s, the way naga keeps spans in
//! a side table. This module imports nothing from the rest of the crate.

/// A place in the model's source, as an index into the front end's location table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Loc(pub u32);

/// One problem with the model, at one place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diag {
    pub at: Loc,
    pub msg: String,
}

/// Diagnostics collected across a pass (or several): every error found before the pipeline has
/// to stop, in the order found.
#[derive(Clone, Debug, Default)]
pub struct Errors(Vec<Diag>);

impl Errors {
    pub fn push(&mut self, at: Loc, msg: impl std::fmt::Display) {
        self.0.push(Diag {
            at,
            msg: msg.to_string(),
        });
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn iter(&self) -> impl Iterator<Item = &Diag> {
        self.0.iter()
    }
    /// Appends `suffix` to the message of every diagnostic after the first `from` (to say which
    /// precompiled shape a batch of errors came from).
    pub fn annotate_from(&mut self, from: usize, suffix: &str) {
        for d in self.0.iter_mut().skip(from) {
            d.msg.push_str(suffix);
        }
    }
    pub fn into_vec(self) -> Vec<Diag> {
        self.0
    }
}

/// The known name closest to `name` (edit distance at most 2), for "did you mean" hints.
pub fn closest<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    // Ties go to the longest common prefix (a slip is rarely in the first letters: `conv2` is
    // `conv2d` rather than `conv`), then to the alphabetical first.
    let prefix = |k: &str| {
        name.chars()
            .zip(k.chars())
            .take_while(|(a, b)| a == b)
            .count()
    };
    known
        .iter()
        .map(|k| (edit_distance(name, k), std::cmp::Reverse(prefix(k)), *k))
        .filter(|(d, _, _)| *d <= 2)
        .min()
        .map(|(_, _, k)| k)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// `1 channel`, `3 channels`.
pub fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closest_finds_typos_only() {
        assert_eq!(closest("conv2", &["conv2d", "dense"]), Some("conv2d"));
        assert_eq!(closest("conv2", &["conv", "conv2d"]), Some("conv2d"));
        assert_eq!(closest("xyzzy", &["conv2d", "dense"]), None);
    }

    #[test]
    fn plural_counts() {
        assert_eq!(plural(1, "channel"), "1 channel");
        assert_eq!(plural(0, "channel"), "0 channels");
    }
}
