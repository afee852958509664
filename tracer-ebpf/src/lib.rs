//! Empty library target: lets `tracer-user` declare a build-dependency on this crate so cargo
//! rebuilds the embedded program when it changes. The program itself is `main.rs`.
#![no_std]
