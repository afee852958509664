extern crate std;

use std::collections::HashMap;

use super::*;

/// A V8 frame at `fp`: context, function, and the function's shared part.
fn memory(fp: u64, context: u64, function: u64, shared: u64) -> HashMap<u64, u64> {
    let mut words = HashMap::new();
    words.insert(fp - 8, context);
    words.insert(fp - 16, function);
    words.insert(function - 1 + 24, shared);
    words
}

#[test]
fn a_javascript_frame_gives_its_shared_function_info() {
    let words = memory(0x7ffc_0000_1000, 0x1_0000_0009, 0x2_0000_0041, 0x3_0000_0081);
    let word = word(
        v8_config(8, 16, 24, 0),
        0x7ffc_0000_1000,
        |a| words.get(&a).copied(),
        |a| words.get(&a).copied(),
    );
    assert_eq!(word, Some(FRAME_WORD_BIT | 0x3_0000_0081));
    assert!(is_frame_word(word.unwrap()));
}

#[test]
fn frames_of_v8_s_own_and_bad_pointers_give_nothing() {
    let fp = 0x7ffc_0000_1000;
    let config = v8_config(8, 16, 24, 0);
    // A frame-type marker (a Smi) where the context would be.
    let words = memory(fp, 24 << 32, 0x2_0000_0041, 0x3_0000_0081);
    assert_eq!(
        word(config, fp, |a| words.get(&a).copied(), |a| words.get(&a).copied()),
        None
    );
    // A function that is no heap object, a shared part that is not, or past user space.
    for (function, shared) in [
        (0x2_0000_0040, 0x3_0000_0081),
        (0x2_0000_0041, 0x3_0000_0080),
        (0x2_0000_0041, 1 << 60 | 1),
    ] {
        let words = memory(fp, 0x1_0000_0009, function, shared);
        assert_eq!(
            word(config, fp, |a| words.get(&a).copied(), |a| words.get(&a).copied()),
            None,
            "{function:#x} {shared:#x}"
        );
    }
    // Unreadable slots.
    assert_eq!(word(config, fp, |_| None, |_| None), None);
}

#[test]
fn only_v8_words_are_v8_words() {
    assert!(!is_frame_word(0x7f00_0000_1234));
    assert!(!is_frame_word(FP_FRAME_BIT | 0x7f00_0000_1234));
    assert!(!is_frame_word(crate::python::PY_RUN_END));
    assert!(!is_frame_word(PY_CODE_BIT | FRAME_WORD_BIT | 5));
    assert_ne!(v8_config(0, 0, 0, 0), 0);
}

#[test]
fn a_slot_config_takes_the_slot_as_it_is() {
    let fp = 0x7ffc_0000_1000;
    let config = slot_config(24);
    let word = |w: u64| word(config, fp, |a| (a == fp - 24).then_some(w), |_| panic!("no heap read"));
    assert_eq!(word(0x7f00_1234_5678), Some(FRAME_WORD_BIT | 0x7f00_1234_5678));
    // Null, unaligned, past user space.
    assert_eq!(word(0), None);
    assert_eq!(word(0x7f00_1234_5679), None);
    assert_eq!(word(1 << 60), None);
}

/// With the bytecode pointer's slot and the method's layout, the word also holds the bytecode
/// index plus one (the pointer's distance from the bytecodes after the `ConstMethod`); a
/// pointer before them, too far past them, or a `ConstMethod` that cannot be read: 0 there.
#[test]
fn a_slot_config_with_bci_keeps_where_the_frame_is() {
    let fp = 0x7ffc_0000_1000;
    let method = 0x7f00_1234_5678;
    let constants = 0x7f00_2000_0000;
    let config = slot_config_with_bci(24, 64, 8, 48);
    let word = |bcp: u64, heap_ok: bool| {
        word(
            config,
            fp,
            |a| match a {
                a if a == fp - 24 => Some(method),
                a if a == fp - 64 => Some(bcp),
                _ => None,
            },
            |a| (heap_ok && a == method + 8).then_some(constants),
        )
    };
    let bci = |w: Option<u64>| w.map(|w| (w >> BCI_SHIFT) & BCI_MASK);
    assert_eq!(word(constants + 48 + 7, true).map(|w| w & WORD_ADDR_MASK), Some(method));
    assert_eq!(bci(word(constants + 48 + 7, true)), Some(8));
    assert_eq!(bci(word(constants + 48, true)), Some(1));
    assert_eq!(bci(word(constants + 40, true)), Some(0));
    assert_eq!(bci(word(constants + 48 + BCI_MASK, true)), Some(0));
    assert_eq!(bci(word(constants + 48, false)), Some(0));
    assert!(word(constants + 48 + 7, true).is_some_and(is_frame_word));
    // The bits do not overlap the address's, nor the word's own.
    assert_eq!((BCI_MASK << BCI_SHIFT) & (WORD_ADDR_MASK | FRAME_WORD_BIT), 0);
}

/// With the bytecode offset's slot, a V8 word also holds the slot's Smi plus one (whatever
/// the frame: userspace decides whether it is an interpreted frame's offset); a slot that
/// holds no Smi, one too large, or cannot be read: 0 there, the shared part still given.
#[test]
fn a_javascript_frame_gives_its_bytecode_offset_when_asked() {
    let fp = 0x7ffc_0000_1000;
    let shared = 0x3_0000_0081;
    let config = v8_config(8, 16, 24, 40);
    let with = |slot: Option<u64>| {
        let mut words = memory(fp, 0x1_0000_0009, 0x2_0000_0041, shared);
        if let Some(slot) = slot {
            words.insert(fp - 40, slot);
        }
        word(config, fp, |a| words.get(&a).copied(), |a| words.get(&a).copied())
    };
    assert_eq!(with(Some(75 << 32)), Some(FRAME_WORD_BIT | 76 << BCI_SHIFT | shared));
    assert_eq!(with(Some(0)), Some(FRAME_WORD_BIT | 1 << BCI_SHIFT | shared));
    for slot in [Some(0x4_0000_0011), Some(BCI_MASK << 32), None] {
        assert_eq!(with(slot), Some(FRAME_WORD_BIT | shared), "{slot:?}");
    }
    // Without the slot asked for, nothing is read there.
    let words = memory(fp, 0x1_0000_0009, 0x2_0000_0041, shared);
    let config = v8_config(8, 16, 24, 0);
    let read = |a: u64| {
        assert_ne!(a, fp - 40, "the offset's slot is not read");
        words.get(&a).copied()
    };
    assert_eq!(
        word(config, fp, read, |a| words.get(&a).copied()),
        Some(FRAME_WORD_BIT | shared)
    );
}
