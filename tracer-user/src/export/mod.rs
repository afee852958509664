//! Output formats. Each writes a [`model::Resolved`] profile (or, for streaming formats, one
//! event at a time); symbolization happens before, in `trace::symbolize`.

pub mod model;
