//! The numbers of the live view, folded from a symbolized profile: per function the samples in
//! which it was the innermost frame (self) and those in which it was anywhere on the stack
//! (total, counted once per stack however often recursion repeats it), and the distinct stacks
//! by command name and frame names. Pure: no terminal, no symbolization.

use std::{
    cmp::Reverse,
    collections::{HashMap, HashSet},
};

use crate::export::model::Resolved;

/// What the rows are ordered by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SortKey {
    /// Self samples, most first (stacks: their count).
    #[default]
    SelfCount,
    /// Total samples, most first (stacks: their count).
    Total,
    /// Name, alphabetically (stacks: the stack's text).
    Name,
}

impl SortKey {
    pub fn name(self) -> &'static str {
        match self {
            SortKey::SelfCount => "self",
            SortKey::Total => "total",
            SortKey::Name => "name",
        }
    }
}

/// One function: a name in an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionRow {
    pub name: String,
    /// The object's short name (`None` for code in no known object).
    pub object: Option<String>,
    pub self_count: u64,
    pub total_count: u64,
}

/// One distinct stack, merged over processes and threads with the same command name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackRow {
    /// `comm;outermost;...;innermost`, as the folded format writes it.
    pub text: String,
    pub count: u64,
}

/// Everything the view shows of a profile.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Table {
    /// Samples in the profile: the 100% of every percentage.
    pub samples: u64,
    pub functions: Vec<FunctionRow>,
    pub stacks: Vec<StackRow>,
}

impl Table {
    /// Fold `resolved`, sorted by `sort`.
    pub fn new(resolved: &Resolved, sort: SortKey) -> Table {
        // (name, object index) -> (self, total).
        let mut functions: HashMap<(String, Option<usize>), (u64, u64)> = HashMap::new();
        let mut stacks: HashMap<String, u64> = HashMap::new();
        let mut seen = HashSet::new();
        let mut samples = 0;
        for stack in &resolved.stacks {
            samples += stack.count;
            seen.clear();
            for (i, frame) in stack.frames.iter().enumerate() {
                let key = (frame.name(&resolved.objects).into_owned(), frame.object);
                // Recursion: a function counts once per stack towards its total.
                if !seen.insert(key.clone()) {
                    continue;
                }
                let (self_count, total_count) = functions.entry(key).or_default();
                if i == 0 {
                    *self_count += stack.count;
                }
                *total_count += stack.count;
            }
            let mut text = stack.comm.clone();
            for frame in stack.frames.iter().rev() {
                text.push(';');
                text.push_str(&frame.name(&resolved.objects));
            }
            *stacks.entry(text).or_default() += stack.count;
        }
        let object_name = |i: Option<usize>| Some(resolved.objects.get(i?)?.name.clone());
        let mut table = Table {
            samples,
            functions: functions
                .into_iter()
                .map(|((name, object), (self_count, total_count))| FunctionRow {
                    name,
                    object: object_name(object),
                    self_count,
                    total_count,
                })
                .collect(),
            stacks: stacks
                .into_iter()
                .map(|(text, count)| StackRow { text, count })
                .collect(),
        };
        table.sort(sort);
        table
    }

    /// Order the functions and stacks by `key`; ties by the other counts, then by name.
    pub fn sort(&mut self, key: SortKey) {
        let by_name = |a: &FunctionRow, b: &FunctionRow| (&a.name, &a.object).cmp(&(&b.name, &b.object));
        match key {
            SortKey::SelfCount => self.functions.sort_by(|a, b| {
                (Reverse(a.self_count), Reverse(a.total_count))
                    .cmp(&(Reverse(b.self_count), Reverse(b.total_count)))
                    .then_with(|| by_name(a, b))
            }),
            SortKey::Total => self.functions.sort_by(|a, b| {
                (Reverse(a.total_count), Reverse(a.self_count))
                    .cmp(&(Reverse(b.total_count), Reverse(b.self_count)))
                    .then_with(|| by_name(a, b))
            }),
            SortKey::Name => self.functions.sort_by(by_name),
        }
        match key {
            SortKey::SelfCount | SortKey::Total => self
                .stacks
                .sort_by(|a, b| (Reverse(a.count), &a.text).cmp(&(Reverse(b.count), &b.text))),
            SortKey::Name => self.stacks.sort_by(|a, b| a.text.cmp(&b.text)),
        }
    }

    /// `count` as a percentage of the samples (0 without samples).
    pub fn percent(&self, count: u64) -> f64 {
        if self.samples == 0 {
            0.0
        } else {
            count as f64 * 100.0 / self.samples as f64
        }
    }
}

#[cfg(test)]
mod tests;
