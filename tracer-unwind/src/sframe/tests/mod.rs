//! Unit tests of the SFrame reader, on sections written by a small test-only builder: the
//! worked example's golden bytes in both byte orders, the meaning of rows per ABI and FDE
//! type, and every error kind with its offset.

mod build;
mod errors;
mod golden;
mod rules;
