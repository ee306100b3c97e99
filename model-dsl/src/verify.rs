//! The memory-plan verifier: re-derives from the [`Problem`] alone everything a [`Plan`] claims,
//! and rejects the plan with an internal error (never a user error: a bad plan is a compiler
//! bug) naming the values and steps involved, with the rendered plan appended.
//!
//! It shares no code with the planner except the data types and the renderer, and it computes
//! liveness a different way: the planner takes each value's range from its definition and its
//! uses directly, while the verifier scans the steps backwards keeping the set of live values
//! (an output is live at the end; a read makes a value live; its definition is the earliest step
//! it is live), then reads each value's range off those sets. A live sequence makes every
//! member it holds live at the same step (escape), so freeing an element early shows up as
//! two live values sharing bytes.
//!
//! What is checked, in order:
//! 1. The problem is well formed: every arena value is written at a step `< steps` and read only
//!    at later steps `< steps`; aliases and in-place candidates point to earlier values; an alias
//!    is not defined before its source; scratch belongs to a real step. (External values and
//!    aliases of them are never planned, so their steps are not checked.)
//! 2. Every value that needs arena storage has an arena placement and every external value (or
//!    alias of one) has none; offsets are multiples of [`ALIGN`]; every placement, rounded up to
//!    `ALIGN` (at least one `ALIGN`), lies inside `arena_bytes`; an alias sits at its source's
//!    offset and fits in its source's bytes.
//! 3. No two pieces of storage that are live at the same step share a byte, unless they are the
//!    same storage: an alias class (a value and all aliases of it, live over the union of its
//!    members' ranges, because the bytes must survive until the last view is read), or a legal
//!    in-place reuse — the later class's root lists a member of the earlier class as a candidate,
//!    sits at its offset, is no larger, that member is last read exactly at the root's step, and
//!    the earlier class has no output, no member written at or after that step and no member read
//!    after it. Scratch shares bytes with nothing live at its step.
//! 4. Each placement's root and live range are those of the storage group the verifier derives
//!    (alias classes joined by the in-place reuses found in 3), and `lower_bound` and
//!    `naive_bytes` equal the values recomputed from those groups, with
//!    `lower_bound <= arena_bytes <= naive_bytes`.

use crate::plan::{Placement, Plan, Problem, ValueKind, ValuePlacement, ALIGN};

/// Checks `plan` against `problem`; on failure the error reads `internal error: ...` and ends
/// with the rendered plan.
pub fn verify(problem: &Problem, plan: &Plan) -> Result<(), String> {
    check(problem, plan).map_err(|msg| {
        format!(
            "internal error: invalid memory plan: {msg}\n{}",
            plan.render(problem)
        )
    })
}

/// Bytes a placement of `bytes` occupies: rounded up to `ALIGN`, at least `ALIGN` (the planner
/// gives zero-sized values an address of their own, so they must not overlap either).
fn footprint(bytes: usize) -> Option<usize> {
    let b = bytes.max(1);
    b.checked_add((ALIGN - b % ALIGN) % ALIGN)
}

/// Half-open byte range `[offset, offset + footprint)`.
fn span_of(p: &Placement) -> Result<(usize, usize), String> {
    footprint(p.bytes)
        .and_then(|f| p.offset.checked_add(f))
        .map(|end| (p.offset, end))
        .ok_or_else(|| {
            format!(
                "placement at offset {} of {} bytes overflows",
                p.offset, p.bytes
            )
        })
}

/// Widens the range of every value live at step `s`; steps are visited in decreasing order, so
/// the first visit fixes the end of the range and the last one its start.
fn note(live: &[bool], s: usize, range: &mut [Option<(usize, usize)>]) {
    for (r, _) in range.iter_mut().zip(live).filter(|(_, &l)| l) {
        *r = Some(r.map_or((s, s), |(_, hi)| (s, hi)));
    }
}

fn bytes_meet(a: (usize, usize), b: (usize, usize)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

fn steps_meet(a: (usize, usize), b: (usize, usize)) -> bool {
    a.0 <= b.1 && b.0 <= a.1
}

/// An alias class as the verifier sees it: a value with storage of its own and its aliases.
#[derive(Debug)]
struct Class {
    root: usize,
    members: Vec<usize>,
    /// Inclusive step range over all members.
    live: (usize, usize),
    /// Byte range of the root's placement (members were checked to lie inside it).
    bytes: (usize, usize),
}

fn check(problem: &Problem, plan: &Plan) -> Result<(), String> {
    let values = &problem.values;
    let steps = problem.steps;
    let n = values.len();
    let name = |i: usize| values[i].name.as_str();

    if plan.values.len() != n {
        return Err(format!(
            "{} value placements for {n} values",
            plan.values.len()
        ));
    }
    if plan.scratch.len() != problem.scratch.len() {
        return Err(format!(
            "{} scratch placements for {} scratch requests",
            plan.scratch.len(),
            problem.scratch.len()
        ));
    }

    // 1. Well-formedness, and the alias class of each value (None: external storage).
    let mut owner: Vec<Option<usize>> = Vec::with_capacity(n);
    for (i, v) in values.iter().enumerate() {
        let class = match &v.kind {
            ValueKind::External => None,
            ValueKind::Seq { members } => {
                if let Some(&m) = members.iter().find(|&&m| m >= i) {
                    return Err(format!(
                        "sequence {} holds value #{m}, which is not an earlier value",
                        name(i)
                    ));
                }
                None
            }
            ValueKind::Alias { of } | ValueKind::Member { of, .. } => {
                if *of >= i {
                    return Err(format!(
                        "{} is an alias of value #{of}, which is not an earlier value",
                        name(i)
                    ));
                }
                owner[*of]
            }
            ValueKind::Arena { reuse } => {
                if let Some(&c) = reuse.iter().find(|&&c| c >= i) {
                    return Err(format!(
                        "{} lists value #{c} as an in-place candidate, which is not an earlier value",
                        name(i)
                    ));
                }
                Some(i)
            }
        };
        owner.push(class);
        if class.is_none() {
            continue;
        }
        if v.def >= steps {
            return Err(format!(
                "{} is written at step {} but the model has only {steps} steps",
                name(i),
                v.def
            ));
        }
        if let Some(&u) = v.uses.iter().find(|&&u| u <= v.def || u >= steps) {
            return Err(format!(
                "{} is written at step {} but read at step {u} (reads must follow the write and come before step {steps})",
                name(i),
                v.def
            ));
        }
        if let ValueKind::Alias { of } | ValueKind::Member { of, .. } = v.kind {
            if v.def < values[of].def {
                return Err(format!(
                    "alias {} is defined at step {}, before its source {} (step {})",
                    name(i),
                    v.def,
                    name(of),
                    values[of].def
                ));
            }
        }
    }
    for s in &problem.scratch {
        if s.step >= steps {
            return Err(format!(
                "scratch requested at step {} but the model has only {steps} steps",
                s.step
            ));
        }
    }

    // Liveness by a backward scan over the steps. `live` is the set of values live at the
    // current step; a value's range is read off as the lowest and highest step it was seen at.
    // Sequences are tracked too, though they have no bytes: while a sequence is live, so is
    // every member it holds (escape), whatever the member's own reads say.
    let tracked = |i: usize| owner[i].is_some() || matches!(values[i].kind, ValueKind::Seq { .. });
    for (i, v) in values.iter().enumerate() {
        if let ValueKind::Seq { .. } = v.kind {
            if v.def >= steps || v.uses.iter().any(|&u| u <= v.def || u >= steps) {
                return Err(format!(
                    "sequence {} is written at step {} and read at steps {:?}, outside 0..{steps} or not after its write",
                    name(i),
                    v.def,
                    v.uses
                ));
            }
        }
    }
    let mut written_at: Vec<Vec<usize>> = vec![Vec::new(); steps];
    let mut read_at: Vec<Vec<usize>> = vec![Vec::new(); steps];
    for (i, v) in values.iter().enumerate() {
        if tracked(i) {
            written_at[v.def].push(i);
            for &u in &v.uses {
                read_at[u].push(i);
            }
        }
    }
    let mut live: Vec<bool> = (0..n).map(|i| tracked(i) && values[i].is_output).collect();
    let mut range: Vec<Option<(usize, usize)>> = vec![None; n];
    let hold = |live: &mut [bool]| {
        for (i, v) in values.iter().enumerate() {
            if let (true, ValueKind::Seq { members }) = (live[i], &v.kind) {
                for &m in members {
                    live[m] = true;
                }
            }
        }
    };
    hold(&mut live);
    note(&live, steps, &mut range);
    for s in (0..steps).rev() {
        // Whatever step s + 1 writes did not exist before it.
        if let Some(later) = written_at.get(s + 1) {
            for &i in later {
                live[i] = false;
            }
        }
        for &i in read_at[s].iter().chain(&written_at[s]) {
            live[i] = true;
        }
        hold(&mut live);
        note(&live, s, &mut range);
    }

    // 2. Placements.
    if !plan.arena_bytes.is_multiple_of(ALIGN) {
        return Err(format!(
            "arena size {} is not a multiple of {ALIGN}",
            plan.arena_bytes
        ));
    }
    let within = |what: &str, p: &Placement, member: bool| -> Result<(usize, usize), String> {
        // A member view starts inside its source's bytes, at a multiple of the arena's unit.
        let align = if member { 4 } else { ALIGN };
        if !p.offset.is_multiple_of(align) {
            return Err(format!(
                "{what} is at offset {}, which is not a multiple of {align}",
                p.offset
            ));
        }
        let span = span_of(p).map_err(|e| format!("{what}: {e}"))?;
        if span.1 > plan.arena_bytes {
            return Err(format!(
                "{what} occupies bytes [{}, {}), beyond the arena's {} bytes",
                span.0, span.1, plan.arena_bytes
            ));
        }
        Ok(span)
    };
    let mut placed: Vec<Option<&Placement>> = Vec::with_capacity(n);
    for (i, v) in values.iter().enumerate() {
        let p = match (owner[i], &plan.values[i]) {
            (None, ValuePlacement::External) => None,
            (None, ValuePlacement::Arena(_)) => {
                return Err(format!(
                    "{} lives outside the arena but has an arena placement",
                    name(i)
                ))
            }
            (Some(_), ValuePlacement::External) => {
                return Err(format!(
                    "{} needs arena storage but is planned as external",
                    name(i)
                ))
            }
            (Some(_), ValuePlacement::Arena(p)) => Some(p),
        };
        placed.push(p);
        let Some(p) = p else { continue };
        within(name(i), p, matches!(v.kind, ValueKind::Member { .. }))?;
        if p.bytes != v.bytes {
            return Err(format!(
                "{} is {} bytes but its placement says {}",
                name(i),
                v.bytes,
                p.bytes
            ));
        }
        if let ValueKind::Alias { of } | ValueKind::Member { of, .. } = v.kind {
            let (shift, what) = match v.kind {
                ValueKind::Member { offset, .. } => (offset, "member"),
                _ => (0, "alias"),
            };
            let src = &values[of];
            if shift.checked_add(v.bytes).is_none_or(|end| end > src.bytes) {
                return Err(format!(
                    "{what} {} ({} bytes at byte {shift}) does not fit in its source {} ({} bytes)",
                    name(i),
                    v.bytes,
                    name(of),
                    src.bytes
                ));
            }
            // The source is in the same class, so it was placed above.
            if let Some(q) = placed[of] {
                if q.offset.checked_add(shift) != Some(p.offset) {
                    return Err(format!(
                        "{what} {} is at offset {} but its source {} is at offset {} (+{shift})",
                        name(i),
                        p.offset,
                        name(of),
                        q.offset
                    ));
                }
            }
        }
    }
    let mut scratch_bytes: Vec<(usize, usize)> = Vec::with_capacity(plan.scratch.len());
    for (req, p) in problem.scratch.iter().zip(&plan.scratch) {
        let what = format!("scratch of step {}", req.step);
        scratch_bytes.push(within(&what, p, false)?);
        if p.bytes != req.bytes || p.first != req.step || p.last != req.step || p.root.is_some() {
            return Err(format!("{what} ({} bytes) has placement {p:?}", req.bytes));
        }
    }

    // 3. Alias classes and conflicts between them.
    let mut classes: Vec<Class> = Vec::new();
    let mut class_of: Vec<Option<usize>> = vec![None; n];
    for i in 0..n {
        let (Some(root), Some(p), Some(r)) = (owner[i], placed[i], range[i]) else {
            continue;
        };
        let c = match class_of[root] {
            Some(c) => c,
            None => {
                classes.push(Class {
                    root,
                    members: Vec::new(),
                    live: r,
                    bytes: span_of(p)?,
                });
                classes.len() - 1
            }
        };
        class_of[i] = Some(c);
        let class = &mut classes[c];
        class.members.push(i);
        class.live = (class.live.0.min(r.0), class.live.1.max(r.1));
    }
    // `joined[c]` is the class that class `c` took over in place, if any.
    let mut joined: Vec<Option<usize>> = vec![None; classes.len()];
    for (b, cb) in classes.iter().enumerate() {
        for (a, ca) in classes[..b].iter().enumerate() {
            if steps_meet(ca.live, cb.live) && bytes_meet(ca.bytes, cb.bytes) {
                in_place(problem, &placed, &range, &owner, ca, cb)?;
                // At most one class is taken over: cb lies inside the bytes of the candidate it
                // took over, and any other class live with cb is live with that one too, so it
                // was already checked to be disjoint from them.
                joined[b] = Some(a);
            }
        }
    }
    for (k, (req, sb)) in problem.scratch.iter().zip(&scratch_bytes).enumerate() {
        for c in &classes {
            if steps_meet(c.live, (req.step, req.step)) && bytes_meet(c.bytes, *sb) {
                return Err(format!(
                    "scratch of step {} (bytes [{}, {})) overlaps {} (bytes [{}, {}), live at steps {}..={})",
                    req.step, sb.0, sb.1, name(c.root), c.bytes.0, c.bytes.1, c.live.0, c.live.1
                ));
            }
        }
        for (other, ob) in problem.scratch.iter().zip(&scratch_bytes).skip(k + 1) {
            if other.step == req.step && bytes_meet(*sb, *ob) {
                return Err(format!(
                    "two scratch buffers of step {} overlap (bytes [{}, {}) and [{}, {}))",
                    req.step, sb.0, sb.1, ob.0, ob.1
                ));
            }
        }
    }

    // 4. Storage groups: follow the in-place chain down to the class that owns the bytes. Classes
    // only take over earlier classes, so the walk ends.
    let group_of = |mut c: usize| {
        while let Some(a) = joined[c] {
            c = a;
        }
        c
    };
    let mut group_live: Vec<Option<(usize, usize)>> = vec![None; classes.len()];
    let mut group_size: Vec<usize> = vec![0; classes.len()];
    for (c, class) in classes.iter().enumerate() {
        let g = group_of(c);
        group_live[g] = Some(match group_live[g] {
            None => class.live,
            Some((lo, hi)) => (lo.min(class.live.0), hi.max(class.live.1)),
        });
        for &m in &class.members {
            let size = footprint(values[m].bytes).ok_or("value size overflows")?;
            group_size[g] = group_size[g].max(size);
        }
    }
    for i in 0..n {
        let (Some(p), Some(c)) = (placed[i], class_of[i]) else {
            continue;
        };
        let g = group_of(c);
        let root = classes[g].root;
        let Some(live) = group_live[g] else { continue };
        if p.root != Some(root) || (p.first, p.last) != live {
            return Err(format!(
                "{} is planned as storage of {} live at steps {}..={}, but the verifier derives storage of {} live at steps {}..={}",
                name(i),
                p.root.filter(|&r| r < n).map_or("<none>", name),
                p.first,
                p.last,
                name(root),
                live.0,
                live.1
            ));
        }
    }

    // Bounds, recomputed step by step from the groups.
    let mut peak = 0usize;
    for s in 0..=steps {
        let mut total = 0usize;
        let groups = (0..classes.len()).filter_map(|g| Some((group_live[g]?, group_size[g])));
        let scratch = problem
            .scratch
            .iter()
            .map(|r| ((r.step, r.step), footprint(r.bytes).unwrap_or(usize::MAX)));
        for ((lo, hi), size) in groups.chain(scratch) {
            if lo <= s && s <= hi {
                total = total.checked_add(size).ok_or("lower bound overflows")?;
            }
        }
        peak = peak.max(total);
    }
    let mut naive = 0usize;
    for size in (0..classes.len())
        .filter(|&g| group_live[g].is_some())
        .map(|g| group_size[g])
        .chain(
            problem
                .scratch
                .iter()
                .map(|r| footprint(r.bytes).unwrap_or(usize::MAX)),
        )
    {
        naive = naive.checked_add(size).ok_or("naive size overflows")?;
    }
    if plan.lower_bound != peak {
        return Err(format!(
            "lower bound is {} but the verifier computes {peak}",
            plan.lower_bound
        ));
    }
    if plan.naive_bytes != naive {
        return Err(format!(
            "naive size is {} but the verifier computes {naive}",
            plan.naive_bytes
        ));
    }
    if !(plan.lower_bound <= plan.arena_bytes && plan.arena_bytes <= plan.naive_bytes) {
        return Err(format!(
            "arena of {} bytes is outside [lower bound {}, naive {}]",
            plan.arena_bytes, plan.lower_bound, plan.naive_bytes
        ));
    }
    Ok(())
}

/// Checks that class `b`, which is live at a step where class `a` is and shares bytes with it,
/// legally took over `a`'s storage in place (`a` has the lower root index).
fn in_place(
    problem: &Problem,
    placed: &[Option<&Placement>],
    range: &[Option<(usize, usize)>],
    owner: &[Option<usize>],
    a: &Class,
    b: &Class,
) -> Result<(), String> {
    let values = &problem.values;
    let name = |i: usize| values[i].name.as_str();
    let overlap = format!(
        "{} (live at steps {}..={}, bytes [{}, {})) and {} (live at steps {}..={}, bytes [{}, {}))",
        name(a.root),
        a.live.0,
        a.live.1,
        a.bytes.0,
        a.bytes.1,
        name(b.root),
        b.live.0,
        b.live.1,
        b.bytes.0,
        b.bytes.1
    );
    let reuse: &[usize] = match &values[b.root].kind {
        ValueKind::Arena { reuse } => reuse,
        _ => &[],
    };
    let d = values[b.root].def;
    let candidates: Vec<usize> = reuse
        .iter()
        .copied()
        .filter(|&c| owner[c] == Some(a.root))
        .collect();
    let Some(&first) = candidates.first() else {
        return Err(format!(
            "{overlap} share bytes while both live, but neither is an alias of the other and {} lists no in-place candidate from {}",
            name(b.root),
            name(a.root)
        ));
    };
    for &m in &a.members {
        let v = &values[m];
        if v.is_output {
            return Err(format!(
                "{overlap} share bytes: {} reuses the storage of output {} in place",
                name(b.root),
                name(m)
            ));
        }
        if v.def >= d {
            return Err(format!(
                "{overlap} share bytes: {} reuses {} in place at step {d}, where {} is also written",
                name(b.root),
                name(first),
                name(m)
            ));
        }
        if let Some((_, last)) = range[m] {
            if last > d {
                return Err(format!(
                    "{overlap} share bytes: {} reuses {} in place at step {d}, but {} still reads that storage at step {last}",
                    name(b.root),
                    name(first),
                    name(m)
                ));
            }
        }
    }
    // The op at step d must actually read the candidate there for the takeover to be in place.
    let Some(&cand) = candidates
        .iter()
        .find(|&&c| range[c].is_some_and(|r| r.1 == d))
    else {
        let last = range[first].map_or(d, |r| r.1);
        return Err(format!(
            "{overlap} share bytes: {} takes over {} in place at step {d}, but {} is last read at step {last}",
            name(b.root),
            name(first),
            name(first)
        ));
    };
    let (pb, pc) = (placed[b.root], placed[cand]);
    if pb.map(|p| p.offset) != pc.map(|p| p.offset) {
        return Err(format!(
            "{overlap} share bytes: {} reuses {} in place but is not at its offset",
            name(b.root),
            name(cand)
        ));
    }
    if values[cand].bytes < values[b.root].bytes {
        return Err(format!(
            "{overlap} share bytes: {} ({} bytes) reuses the smaller {} ({} bytes) in place",
            name(b.root),
            values[b.root].bytes,
            name(cand),
            values[cand].bytes
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{plan as make_plan, ScratchReq, ValueReq};

    fn v(name: &str, bytes: usize, def: usize, uses: &[usize], kind: ValueKind) -> ValueReq {
        ValueReq {
            name: name.to_string(),
            bytes,
            def,
            uses: uses.to_vec(),
            is_output: false,
            kind,
        }
    }
    fn own(reuse: &[usize]) -> ValueKind {
        ValueKind::Arena {
            reuse: reuse.to_vec(),
        }
    }

    /// x (input), w (weights) -> conv(x) @0, flattened in the same step (the view is read @3)
    /// -> relu(conv) @1, which would like conv's buffer -> conv(relu) @2 with im2col scratch
    /// -> add(flat, conv) @3 in place over the second conv, output.
    fn sample() -> Problem {
        let mut y = v("%6 add", 256, 3, &[], own(&[5, 2]));
        y.is_output = true;
        Problem {
            steps: 4,
            values: vec![
                v("%0 x", 256, 0, &[0], ValueKind::External),
                v("%1 w", 4096, 0, &[0, 2], ValueKind::External),
                v("%2 conv", 256, 0, &[1], own(&[])),
                v("%3 flat", 256, 0, &[3], ValueKind::Alias { of: 2 }),
                v("%4 relu", 256, 1, &[2], own(&[2])),
                v("%5 conv", 256, 2, &[3], own(&[])),
                y,
            ],
            scratch: vec![ScratchReq {
                step: 2,
                bytes: 1000,
            }],
        }
    }

    fn arena_mut(plan: &mut Plan, i: usize) -> &mut Placement {
        match &mut plan.values[i] {
            ValuePlacement::Arena(p) => p,
            ValuePlacement::External => panic!("value {i} is external"),
        }
    }

    fn expect_err(problem: &Problem, plan: &Plan, needle: &str) {
        match verify(problem, plan) {
            Ok(()) => panic!(
                "corrupted plan accepted (wanted {needle:?}):\n{}",
                plan.render(problem)
            ),
            Err(e) => {
                assert!(e.starts_with("internal error: "), "{e}");
                assert!(e.contains(needle), "wanted {needle:?} in:\n{e}");
            }
        }
    }

    #[test]
    fn sample_plan_verifies() {
        let p = sample();
        let plan = make_plan(&p);
        verify(&p, &plan).unwrap();
        // flat keeps conv's bytes until step 3, so relu cannot take them over in place.
        let relu = match &plan.values[4] {
            ValuePlacement::Arena(q) => q.clone(),
            ValuePlacement::External => panic!(),
        };
        assert_eq!(relu.root, Some(4));
    }

    /// A hand-written plan (not the planner's) for a problem checked by hand: r lists b as an
    /// in-place candidate but b is read again at step 2, so r needs bytes of its own; add takes
    /// over a (its first candidate, last read at step 2). Every size rounds to 128; step 1 holds
    /// a, b and r, so the arena of 384 equals the lower bound and, with one reuse, the naive size.
    #[test]
    fn hand_written_plan_verifies() {
        let mut out = v("%3 add", 100, 2, &[], own(&[0, 2]));
        out.is_output = true;
        let p = Problem {
            steps: 3,
            values: vec![
                v("%0 a", 100, 0, &[1, 2], own(&[])),
                v("%1 b", 100, 0, &[1, 2], own(&[])),
                v("%2 r", 100, 1, &[2], own(&[1])),
                out,
            ],
            scratch: vec![],
        };
        let at = |offset, first, last, root| {
            ValuePlacement::Arena(Placement {
                offset,
                bytes: 100,
                first,
                last,
                root: Some(root),
            })
        };
        let plan = Plan {
            arena_bytes: 384,
            lower_bound: 384,
            naive_bytes: 384,
            values: vec![
                at(0, 0, 3, 0),
                at(128, 0, 2, 1),
                at(256, 1, 2, 2),
                at(0, 0, 3, 0),
            ],
            scratch: vec![],
        };
        verify(&p, &plan).unwrap();
        // The same plan when add does not list a: its bytes now overlap a's illegally.
        let mut q = p.clone();
        q.values[3].kind = own(&[2]);
        expect_err(&q, &plan, "lists no in-place candidate");
        // r forced onto b's bytes: b is still read at step 2.
        let mut bad = plan.clone();
        bad.values[2] = at(128, 0, 2, 1);
        expect_err(&p, &bad, "but %1 b still reads that storage at step 2");
    }

    #[test]
    fn catches_overlap() {
        let p = sample();
        let mut plan = make_plan(&p);
        // %5 conv (live 2..=3) moved onto %4 relu (live 1..=2).
        let relu = arena_mut(&mut plan, 4).offset;
        arena_mut(&mut plan, 5).offset = relu;
        expect_err(&p, &plan, "neither is an alias");
    }

    #[test]
    fn catches_misalignment() {
        let p = sample();
        let mut plan = make_plan(&p);
        arena_mut(&mut plan, 5).offset += 8;
        expect_err(&p, &plan, "not a multiple of 64");
        let mut plan = make_plan(&p);
        plan.scratch[0].offset += 32;
        expect_err(&p, &plan, "scratch of step 2 is at offset");
        let mut plan = make_plan(&p);
        plan.arena_bytes += 1;
        expect_err(&p, &plan, "arena size");
    }

    #[test]
    fn catches_out_of_bounds() {
        let p = sample();
        let mut plan = make_plan(&p);
        plan.arena_bytes -= 64;
        expect_err(&p, &plan, "beyond the arena");
        let mut plan = make_plan(&p);
        let end = plan.arena_bytes;
        arena_mut(&mut plan, 2).offset = end;
        expect_err(&p, &plan, "beyond the arena");
    }

    #[test]
    fn catches_bad_alias() {
        let p = sample();
        let mut plan = make_plan(&p);
        let elsewhere = arena_mut(&mut plan, 4).offset;
        arena_mut(&mut plan, 3).offset = elsewhere;
        expect_err(&p, &plan, "alias %3 flat is at offset");
        // A view larger than what it views.
        let mut q = sample();
        q.values[3].bytes = 300;
        let plan = make_plan(&q);
        expect_err(&q, &plan, "does not fit in its source");
        // An alias of a later value.
        let mut q = sample();
        q.values[3].kind = ValueKind::Alias { of: 5 };
        let plan = make_plan(&q);
        expect_err(&q, &plan, "not an earlier value");
    }

    /// Without the alias's own uses, the verifier would think %2 conv dead after step 1 and let
    /// something else into its bytes while flat still needs them.
    #[test]
    fn catches_reuse_of_aliased_bytes() {
        let p = sample();
        let mut plan = make_plan(&p);
        let conv = arena_mut(&mut plan, 2).offset;
        arena_mut(&mut plan, 5).offset = conv;
        expect_err(&p, &plan, "%2 conv (live at steps 0..=3");
    }

    #[test]
    fn catches_external_mismatch() {
        let p = sample();
        let mut plan = make_plan(&p);
        plan.values[0] = ValuePlacement::Arena(Placement {
            offset: 0,
            bytes: 256,
            first: 0,
            last: 0,
            root: Some(0),
        });
        expect_err(&p, &plan, "%0 x lives outside the arena");
        let mut plan = make_plan(&p);
        plan.values[5] = ValuePlacement::External;
        expect_err(&p, &plan, "%5 conv needs arena storage");
    }

    #[test]
    fn catches_illegal_in_place() {
        // relu lists conv, but the view of conv is read at step 3: conv's storage is still
        // needed, so forcing relu onto it must be rejected.
        let p = sample();
        let mut plan = make_plan(&p);
        let conv = arena_mut(&mut plan, 2).clone();
        let relu = arena_mut(&mut plan, 4);
        relu.offset = conv.offset;
        relu.root = Some(2);
        relu.first = conv.first;
        expect_err(&p, &plan, "but %3 flat still reads that storage at step 3");

        // The candidate is an output.
        let mut q = sample();
        q.values[2].is_output = true;
        let mut plan = make_plan(&q);
        let conv = arena_mut(&mut plan, 2).offset;
        arena_mut(&mut plan, 4).offset = conv;
        expect_err(&q, &plan, "reuses the storage of output %2 conv");

        // The candidate is smaller.
        let mut q = sample();
        q.values[3].kind = own(&[]);
        q.values[3].uses = vec![2];
        q.values[4].bytes = 320;
        let mut plan = make_plan(&q);
        let conv = arena_mut(&mut plan, 2).offset;
        arena_mut(&mut plan, 4).offset = conv;
        expect_err(&q, &plan, "reuses the smaller %2 conv");
    }

    /// A view of a that is created at step 1 (and never read) lives in a's class; r, also
    /// written at step 1, must not take a's bytes even though a is last read there.
    #[test]
    fn catches_in_place_over_storage_written_at_the_same_step() {
        let mut r = v("%2 r", 256, 1, &[], own(&[0]));
        r.is_output = true;
        let p = Problem {
            steps: 2,
            values: vec![
                v("%0 a", 256, 0, &[1], own(&[])),
                v("%1 view", 256, 1, &[], ValueKind::Alias { of: 0 }),
                r,
            ],
            scratch: vec![],
        };
        let mut plan = make_plan(&p);
        verify(&p, &plan).unwrap();
        let a = arena_mut(&mut plan, 0).clone();
        let r = arena_mut(&mut plan, 2);
        (r.offset, r.root, r.first) = (a.offset, a.root, a.first);
        expect_err(&p, &plan, "where %1 view is also written");
    }

    #[test]
    fn catches_in_place_at_wrong_offset() {
        // The hand-checked plan of `hand_written_plan_verifies` has add (value 3) in place over
        // a at offset 0; shifted by 64 it half-overlaps a.
        let mut out = v("%3 add", 100, 2, &[], own(&[0, 2]));
        out.is_output = true;
        let p = Problem {
            steps: 3,
            values: vec![
                v("%0 a", 100, 0, &[1, 2], own(&[])),
                v("%1 b", 100, 0, &[1, 2], own(&[])),
                v("%2 r", 100, 1, &[2], own(&[1])),
                out,
            ],
            scratch: vec![],
        };
        let mut plan = make_plan(&p);
        verify(&p, &plan).unwrap();
        let a = arena_mut(&mut plan, 0).offset;
        arena_mut(&mut plan, 3).offset = a + 64;
        expect_err(
            &p,
            &plan,
            "%3 add reuses %0 a in place but is not at its offset",
        );
    }

    #[test]
    fn catches_scratch_overlap() {
        let p = sample();
        let mut plan = make_plan(&p);
        // %4 relu is read at step 2, the step the scratch belongs to. Everything is live at step
        // 2, so the scratch bytes hold nothing else and relu overlaps only the scratch there.
        arena_mut(&mut plan, 4).offset = plan.scratch[0].offset;
        expect_err(&p, &plan, "scratch of step 2 (bytes");
    }

    #[test]
    fn catches_wrong_bookkeeping() {
        let p = sample();
        let mut plan = make_plan(&p);
        plan.lower_bound += 64;
        expect_err(&p, &plan, "lower bound is");
        let mut plan = make_plan(&p);
        plan.naive_bytes += 64;
        expect_err(&p, &plan, "naive size is");
        let mut plan = make_plan(&p);
        arena_mut(&mut plan, 4).last += 1;
        expect_err(
            &p,
            &plan,
            "%4 relu is planned as storage of %4 relu live at steps 1..=3",
        );
        let mut plan = make_plan(&p);
        arena_mut(&mut plan, 3).root = Some(3);
        expect_err(&p, &plan, "%3 flat is planned as storage of %3 flat");
        let mut plan = make_plan(&p);
        plan.scratch.pop();
        expect_err(&p, &plan, "0 scratch placements for 1");
    }

    #[test]
    fn catches_malformed_problem() {
        let mut p = sample();
        p.values[5].uses = vec![2];
        let plan = make_plan(&p);
        expect_err(&p, &plan, "%5 conv is written at step 2 but read at step 2");
        let mut p = sample();
        p.values[6].def = 4;
        let plan = make_plan(&p);
        expect_err(&p, &plan, "only 4 steps");
        let mut p = sample();
        p.scratch[0].step = 7;
        let plan = make_plan(&p);
        expect_err(&p, &plan, "scratch requested at step 7");
        let mut p = sample();
        p.values[4].kind = own(&[6]);
        let plan = make_plan(&p);
        expect_err(&p, &plan, "not an earlier value");
    }

    /// Another xorshift, driving a generator that builds problems the way a compiler would:
    /// op by op, each reading earlier tensors (so uses follow definitions by construction).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn pick(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    fn random_graph(rng: &mut Rng) -> Problem {
        let steps = 1 + rng.pick(14);
        let mut values: Vec<ValueReq> = Vec::new();
        for k in 0..1 + rng.pick(3) {
            let bytes = 64 * rng.pick(8) + rng.pick(3) * 4;
            values.push(v(&format!("%{k} in"), bytes, 0, &[], ValueKind::External));
        }
        let mut scratch = Vec::new();
        for step in 0..steps {
            let a = rng.pick(values.len());
            let b = rng.pick(values.len());
            let next = values.len();
            match rng.pick(6) {
                // Unary elementwise: in place over its input when possible.
                0 | 1 => {
                    values[a].uses.push(step);
                    let bytes = values[a].bytes;
                    values.push(v(&format!("%{next} unary"), bytes, step, &[], own(&[a])));
                }
                // Binary elementwise, either input may be taken over.
                2 => {
                    values[a].uses.push(step);
                    values[b].uses.push(step);
                    let bytes = values[a].bytes.min(values[b].bytes);
                    values.push(v(&format!("%{next} add"), bytes, step, &[], own(&[a, b])));
                }
                // Reshape: sometimes an op of its own, sometimes folded into its source's step.
                3 => {
                    let bytes = values[a].bytes;
                    let def = if rng.pick(2) == 0 {
                        values[a].uses.push(step);
                        step
                    } else {
                        values[a].def
                    };
                    values.push(v(
                        &format!("%{next} view"),
                        bytes,
                        def,
                        &[],
                        ValueKind::Alias { of: a },
                    ));
                }
                // Two outputs from one op, both wanting the same input's buffer.
                4 => {
                    values[a].uses.push(step);
                    let bytes = values[a].bytes;
                    values.push(v(&format!("%{next} lo"), bytes, step, &[], own(&[a])));
                    values.push(v(&format!("%{} hi", next + 1), bytes, step, &[], own(&[a])));
                }
                // A general op with a new size and maybe scratch.
                _ => {
                    values[a].uses.push(step);
                    let bytes = rng.pick(900);
                    values.push(v(&format!("%{next} op"), bytes, step, &[], own(&[])));
                    if rng.pick(2) == 0 {
                        scratch.push(ScratchReq {
                            step,
                            bytes: rng.pick(3000),
                        });
                    }
                }
            }
        }
        // Some values are outputs; the last one always is.
        let last = values.len() - 1;
        for (i, x) in values.iter_mut().enumerate() {
            x.is_output = i == last || rng.pick(8) == 0;
        }
        // A reshape folded into its source's step may precede reads of the same step: drop any
        // read that does not follow the definition (a compiler would never emit it).
        for x in &mut values {
            let def = x.def;
            if !matches!(x.kind, ValueKind::External) {
                x.uses.retain(|&u| u > def);
            }
        }
        Problem {
            steps,
            values,
            scratch,
        }
    }

    /// Property: the planner's plans for random graphs verify and respect the bounds; moving
    /// one value onto the bytes of another value it is live with is always caught.
    #[test]
    fn random_graphs_verify_and_corruptions_are_caught() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut corrupted = 0;
        for case in 0..400 {
            let p = random_graph(&mut rng);
            let good = make_plan(&p);
            if let Err(e) = verify(&p, &good) {
                panic!("case {case}: {e}\n{p:#?}");
            }
            assert!(good.lower_bound <= good.arena_bytes && good.arena_bytes <= good.naive_bytes);

            // Pick two arena values of different storage groups whose own live ranges meet.
            let own_range = |i: usize| {
                let x = &p.values[i];
                let last = if x.is_output {
                    p.steps
                } else {
                    x.uses.iter().copied().max().unwrap_or(x.def)
                };
                (x.def, last)
            };
            let arena: Vec<(usize, Placement)> = good
                .values
                .iter()
                .enumerate()
                .filter_map(|(i, q)| match q {
                    ValuePlacement::Arena(q) => Some((i, q.clone())),
                    ValuePlacement::External => None,
                })
                .collect();
            let mut pairs = Vec::new();
            for (i, qi) in &arena {
                for (j, qj) in &arena {
                    let (ri, rj) = (own_range(*i), own_range(*j));
                    if qi.root != qj.root && ri.0 <= rj.1 && rj.0 <= ri.1 {
                        pairs.push((*i, qj.offset));
                    }
                }
            }
            if pairs.is_empty() {
                continue;
            }
            let (i, offset) = pairs[rng.pick(pairs.len())];
            let mut bad = good.clone();
            arena_mut(&mut bad, i).offset = offset;
            assert!(
                verify(&p, &bad).is_err(),
                "case {case}: moving {} to offset {offset} was accepted:\n{}",
                p.values[i].name,
                bad.render(&p)
            );
            corrupted += 1;
        }
        assert!(corrupted > 200, "only {corrupted} corruptions tried");
    }

    /// Garbage in, no panic out: random (mostly malformed) problems and randomly scribbled plans
    /// go through the planner, the verifier and the renderer.
    #[test]
    fn never_panics_on_garbage() {
        let mut rng = Rng(0xdead_beef_cafe_f00d);
        let mut rejected = 0;
        for _ in 0..2000 {
            let steps = rng.pick(6);
            let n = rng.pick(8);
            let any = |rng: &mut Rng| rng.pick(n + 3);
            let values = (0..n)
                .map(|i| {
                    let kind = match rng.pick(3) {
                        0 => ValueKind::External,
                        1 => ValueKind::Alias { of: any(&mut rng) },
                        _ => own(&[any(&mut rng), any(&mut rng)]),
                    };
                    let mut x = v(
                        &format!("%{i}"),
                        rng.pick(300),
                        rng.pick(steps + 2),
                        &[],
                        kind,
                    );
                    x.uses = (0..rng.pick(3)).map(|_| rng.pick(steps + 2)).collect();
                    x.is_output = rng.pick(4) == 0;
                    x
                })
                .collect();
            let scratch = (0..rng.pick(3))
                .map(|_| ScratchReq {
                    step: rng.pick(steps + 2),
                    bytes: rng.pick(500),
                })
                .collect();
            let p = Problem {
                steps,
                values,
                scratch,
            };
            let mut plan = make_plan(&p);
            let good = verify(&p, &plan).is_ok();
            // Scribble on one field of one placement.
            let k = rng.pick(plan.values.len() + 1);
            if let Some(ValuePlacement::Arena(q)) = plan.values.get_mut(k) {
                match rng.pick(5) {
                    0 => q.offset = rng.pick(1000),
                    1 => q.root = Some(rng.pick(n + 3)),
                    2 => q.first = rng.pick(steps + 3),
                    3 => q.last = usize::MAX,
                    _ => q.bytes = usize::MAX - rng.pick(3),
                }
            } else if let Some(slot) = plan.values.get_mut(k) {
                *slot = ValuePlacement::Arena(Placement {
                    offset: usize::MAX - 63,
                    bytes: 1,
                    first: 0,
                    last: 0,
                    root: None,
                });
            } else {
                plan.arena_bytes = rng.pick(2000);
            }
            if verify(&p, &plan).is_err() || !good {
                rejected += 1;
            }
            let _ = plan.render(&p);
        }
        assert!(rejected > 1000, "only {rejected} rejections");
    }

    /// `a = op(x)` @0, `s = seq_construct(a)` @1, `z = op(x)` @2, `y = op(s, z)` @3 (say a
    /// `concat_from_seq`): `a`'s last own read is @1, but the sequence holding it is read @3.
    fn escaping(members: &[usize]) -> Problem {
        let mut y = v("%4 y", 256, 3, &[], own(&[]));
        y.is_output = true;
        Problem {
            steps: 4,
            values: vec![
                v("%0 x", 256, 0, &[0, 2], ValueKind::External),
                v("%1 a", 256, 0, &[1], own(&[])),
                v(
                    "%2 s",
                    0,
                    1,
                    &[3],
                    ValueKind::Seq {
                        members: members.to_vec(),
                    },
                ),
                v("%3 z", 256, 2, &[3], own(&[])),
                y,
            ],
            scratch: vec![],
        }
    }

    /// Escape: the planner keeps a sequence's member alive until the sequence's last use, and
    /// the verifier rejects a plan that frees it at its own last read (here, one made without
    /// the membership, which lets `z` take `a`'s bytes while `s` still holds `a`).
    #[test]
    fn sequence_members_escape() {
        let real = escaping(&[1]);
        let plan = make_plan(&real);
        verify(&real, &plan).unwrap();
        let ValuePlacement::Arena(a) = &plan.values[1] else {
            panic!("a is in the arena")
        };
        assert_eq!((a.first, a.last), (0, 3), "{}", plan.render(&real));
        assert!(plan
            .render(&real)
            .contains("sequence, holds %1 a (kept live)"));

        let mut early = make_plan(&escaping(&[]));
        let (ValuePlacement::Arena(a), ValuePlacement::Arena(z)) =
            (&early.values[1], &early.values[3])
        else {
            panic!("a and z are in the arena")
        };
        assert_eq!(a.offset, z.offset, "without escape, z reuses a's bytes");
        expect_err(&real, &early, "share bytes while both live");
        // Stretching a's recorded range alone does not help: z still shares its bytes.
        if let ValuePlacement::Arena(a) = &mut early.values[1] {
            a.last = 3;
        }
        expect_err(&real, &early, "");
        // A sequence must hold earlier values only.
        let mut bad = escaping(&[1]);
        bad.values[2].kind = ValueKind::Seq { members: vec![3] };
        expect_err(&bad, &make_plan(&bad), "not an earlier value");
    }

    /// Zero-size tensors: a 0-byte value (and a 0-byte alias of it, and a 0-byte member at the
    /// very end of a buffer) is planned like any other, with an address of its own that nothing
    /// live at the same time may take.
    #[test]
    fn zero_byte_values_have_an_address() {
        let mut y = v("%4 y", 256, 0, &[], own(&[]));
        y.is_output = true;
        let p = Problem {
            steps: 2,
            values: vec![
                v("%0 x", 256, 0, &[0], ValueKind::External),
                v("%1 e", 0, 0, &[1], own(&[])),
                v("%2 r", 0, 0, &[1], ValueKind::Alias { of: 1 }),
                y,
                v("%3 m", 0, 0, &[1], ValueKind::Member { of: 3, offset: 256 }),
            ],
            scratch: vec![],
        };
        let plan = make_plan(&p);
        verify(&p, &plan).unwrap();
        let mut copy = plan.clone();
        let (e, y) = (
            arena_mut(&mut copy, 1).clone(),
            arena_mut(&mut copy, 3).clone(),
        );
        assert_eq!(e.bytes, 0, "{}", plan.render(&p));
        assert_ne!(e.offset, y.offset, "{}", plan.render(&p));
        // e (and its alias) moved into y's bytes while both are live at step 1: an empty
        // value still may not sit inside another live one.
        let mut bad = plan.clone();
        arena_mut(&mut bad, 1).offset = y.offset;
        arena_mut(&mut bad, 2).offset = y.offset;
        expect_err(&p, &bad, "share bytes");
    }
}
