//! What a new user meets in the first minutes (issue 31): each refusal said once, in the
//! words of what really failed; durations with units; outputs owned by the user who ran
//! `sudo`; a doctor that gives its verdict first; an empty or cut profile that says why.

mod diagnosis;
mod errors;
mod go;
mod owners;
mod whole_host;
