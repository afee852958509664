//! The size of each of V8's bytecodes at each operand scale, which baseline (Sparkplug) code's
//! instructions are mapped to bytecodes with (`super::code::baseline_map`). Node.js 20's `node`
//! exports V8's table (`Bytecodes::kBytecodeSizes`, read from the file); Node.js 24's `libnode`
//! does not, and its V8 13.6's is below: the only three rows of 208 bytes in its read-only data
//! whose first bytecodes' sizes are those V8 11 exports and whose rows grow with the scale,
//! checked against a running node 24 in baseline code (every bytecode array of its frames'
//! baseline code decoded with it to its exact length, and to as many bytecodes as that code
//! keeps instruction sizes for). A V8 13 whose bytecodes differ is caught the same way, per
//! code object: its baseline frames then have no line.

/// V8 13.6's `Bytecodes::kBytecodeSizes`: 208 bytecodes at operand scales 1, 2 and 4.
#[rustfmt::skip]
pub const V8_13_SIZES: [u8; 3 * 208] = [
    1, 1, 1, 1, 1, 2, 3, 4, 5, 5, 6, 2, 1, 2, 1, 1, 1, 1, 1, 2, 4, 4, 4, 2, 2, 2,
    2, 3, 2, 2, 2, 1, 1, 1, 2, 3, 3, 3, 4, 2, 4, 2, 2, 4, 4, 4, 2, 4, 4, 4, 3, 4,
    4, 3, 5, 3, 3, 4, 4, 4, 5, 4, 5, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
    3, 3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 2, 2, 2, 2, 4, 5, 5, 4, 5, 6, 5,
    3, 4, 5, 5, 5, 6, 4, 4, 5, 5, 3, 3, 3, 3, 3, 3, 3, 3, 3, 1, 2, 2, 2, 1, 1, 5,
    4, 1, 2, 4, 1, 4, 3, 4, 2, 3, 3, 3, 3, 1, 1, 1, 4, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 4, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 4, 4, 2, 3, 5, 2, 1, 1, 1, 1, 2, 1,
    1, 2, 4, 5, 4, 4, 1, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 3, 5, 7, 9, 7, 9, 3, 1, 3, 1, 1, 1, 1, 1, 3, 7, 7, 7, 3, 3, 3,
    3, 5, 3, 3, 3, 1, 1, 1, 2, 5, 5, 5, 7, 3, 7, 3, 3, 7, 7, 7, 3, 7, 7, 7, 4, 7,
    7, 5, 9, 5, 5, 7, 7, 7, 8, 7, 8, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5,
    5, 5, 5, 5, 5, 5, 5, 5, 5, 3, 3, 3, 3, 1, 1, 3, 3, 3, 3, 7, 9, 9, 7, 9, 11, 9,
    5, 7, 9, 9, 7, 9, 6, 6, 9, 9, 5, 5, 5, 5, 5, 5, 5, 5, 5, 1, 3, 3, 3, 1, 1, 7,
    6, 1, 3, 6, 1, 6, 5, 6, 3, 5, 5, 5, 5, 1, 1, 1, 7, 3, 3, 3, 3, 3, 3, 3, 3, 3,
    3, 7, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 7, 7, 3, 5, 9, 3, 1, 1, 1, 1, 3, 1,
    1, 3, 7, 9, 7, 7, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 5, 9, 13, 17, 11, 15, 5, 1, 5, 1, 1, 1, 1, 1, 5, 13, 13, 13, 5, 5, 5,
    5, 9, 5, 5, 5, 1, 1, 1, 2, 9, 9, 9, 13, 5, 13, 5, 5, 13, 13, 13, 5, 13, 13, 13, 6, 13,
    13, 9, 17, 9, 9, 13, 13, 13, 14, 13, 14, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9,
    9, 9, 9, 9, 9, 9, 9, 9, 9, 5, 5, 5, 5, 1, 1, 5, 5, 5, 5, 13, 17, 17, 13, 17, 21, 17,
    9, 13, 17, 17, 11, 15, 10, 10, 17, 17, 9, 9, 9, 9, 9, 9, 9, 9, 9, 1, 5, 5, 5, 1, 1, 11,
    10, 1, 5, 10, 1, 10, 9, 10, 5, 9, 9, 9, 9, 1, 1, 1, 13, 5, 5, 5, 5, 5, 5, 5, 5, 5,
    5, 13, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 13, 13, 5, 9, 17, 5, 1, 1, 1, 1, 5, 1,
    1, 5, 13, 17, 13, 13, 1, 5, 5, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
];
