//! Unit tests of `bpf::btf`; each test says what it proves.

use super::*;

/// A BTF blob: `struct task_struct { int state; union { int a; struct { long x; int pid; }; }; unsigned int flags; }`
/// after an INT type and a forward declaration of the same name.
fn blob() -> Vec<u8> {
    let strings = b"\0int\0task_struct\0state\0a\0x\0pid\0flags\0long\0";
    let name = |s: &str| -> u32 {
        let hay = std::str::from_utf8(strings).expect("ascii");
        hay.find(&format!("\0{s}\0")).expect("string") as u32 + 1
    };
    let mut types: Vec<u32> = Vec::new();
    let info = |kind: u32, vlen: u32| (kind << 24) | vlen;
    // 1: int (INT, 4 bytes + encoding word).
    types.extend([name("int"), info(1, 0), 4, 32]);
    // 2: long.
    types.extend([name("long"), info(1, 0), 8, 64]);
    // 3: struct task_struct; (FWD)
    types.extend([name("task_struct"), info(7, 0), 0]);
    // 4: anonymous struct { long x; int pid; }
    types.extend([0, info(4, 2), 16, name("x"), 2, 0, name("pid"), 1, 64]);
    // 5: anonymous union { int a; struct 4; }
    types.extend([0, info(5, 2), 16, name("a"), 1, 0, 0, 4, 0]);
    // 6: struct task_struct { int state; union 5 (at 8 bytes); unsigned flags (at 24 bytes) }
    types.extend([
        name("task_struct"),
        info(4, 3),
        32,
        name("state"),
        1,
        0,
        0,
        5,
        64,
        name("flags"),
        1,
        192,
    ]);
    let type_bytes: Vec<u8> = types.iter().flat_map(|w| w.to_ne_bytes()).collect();
    let mut out = Vec::new();
    out.extend(MAGIC.to_ne_bytes());
    out.extend([1, 0]);
    for w in [
        24,
        0,
        type_bytes.len() as u32,
        type_bytes.len() as u32,
        strings.len() as u32,
    ] {
        out.extend(w.to_ne_bytes());
    }
    out.extend(type_bytes);
    out.extend(strings);
    out
}

/// Members are found directly and through anonymous unions and structs; the forward
/// declaration is skipped.
#[test]
fn offsets_are_found() {
    let blob = blob();
    let btf = Btf::parse(&blob).expect("parses");
    assert_eq!(btf.member_offset("task_struct", "state"), Ok(0));
    assert_eq!(btf.member_offset("task_struct", "pid"), Ok(16));
    assert_eq!(btf.member_offset("task_struct", "flags"), Ok(24));
    assert_eq!(
        btf.member_offset("task_struct", "tgid"),
        Err(BtfError::NoMember {
            strukt: "task_struct".into(),
            member: "tgid".into()
        })
    );
    assert_eq!(
        btf.member_offset("mm_struct", "pgd"),
        Err(BtfError::NoStruct("mm_struct".into()))
    );
}

/// Truncated or foreign blobs are errors, not panics.
#[test]
fn malformed_blobs_are_errors() {
    let blob = blob();
    for len in [0, 3, 23, 30, blob.len() - 1] {
        assert!(Btf::parse(&blob[..len]).is_err(), "{len} bytes");
    }
    assert!(matches!(Btf::parse(&[0; 64]), Err(BtfError::Malformed("bad magic"))));
}

/// The running kernel's `task_struct` has both fields (where it has BTF).
#[test]
fn this_kernel_has_the_fields() {
    if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        return;
    }
    let task = task_offsets().expect("offsets");
    assert!(task.pid > task.flags && task.pid < 8192, "{task:?}");
}

/// The running kernel's BTF has every member the VMA walker reads, at offsets that fit their
/// structures' layout (6.18 here: `i_mtime_sec`/`i_mtime_nsec`, not a `timespec64`).
#[test]
fn this_kernel_has_the_vma_fields() {
    if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        return;
    }
    let o = vma_offsets().expect("offsets");
    // vm_area_struct begins with vm_start and vm_end (in a union with the RCU head since 6.1).
    assert_eq!((o.vm_start, o.vm_end), (0, 8), "{o:?}");
    assert!(o.vm_file > o.vm_end && o.vm_pgoff > o.vm_end, "{o:?}");
    assert!(
        o.i_mtime_nsec > o.i_mtime_sec || o.i_mtime_nsec == o.i_mtime_sec + 8,
        "{o:?}"
    );
    assert_ne!(o.i_ctime_sec, o.i_mtime_sec, "{o:?}");
    assert_eq!(o.page_shift, 0, "set by the loader");
}
