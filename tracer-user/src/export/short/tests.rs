//! Unit tests of `export::short`; each test says what it proves.

use super::short;

/// C++ and Rust names lose their parameter lists, template and generic arguments and hash;
/// operators, qualified paths and names that are not C++ or Rust keep what makes them read.
#[test]
fn names_are_shortened() {
    for (full, shortened) in [
        (
            "std::vector<int, std::allocator<int> >::push_back(int const&)",
            "std::vector::push_back",
        ),
        ("foo::bar(std::map<int, int> const&) const", "foo::bar"),
        (
            "<alloc::vec::Vec<T> as core::ops::drop::Drop>::drop",
            "<alloc::vec::Vec as core::ops::drop::Drop>::drop",
        ),
        (
            "core::ptr::drop_in_place<alloc::string::String>",
            "core::ptr::drop_in_place",
        ),
        ("app::main::h0123456789abcdef", "app::main"),
        ("std::ostream::operator<<(int)", "std::ostream::operator<<"),
        ("Foo::operator()(int) const", "Foo::operator()"),
        ("Foo::operator->()", "Foo::operator->"),
        ("Foo::operator<=(Foo const&)", "Foo::operator<="),
        ("main", "main"),
        ("[libx.so+0x1234]", "[libx.so+0x1234]"),
        ("[truncated: zero_ra]", "[truncated: zero_ra]"),
        ("a<b", "a<b"),
        ("f)", "f)"),
        ("(", "("),
        ("", ""),
    ] {
        assert_eq!(short(full), shortened, "{full}");
    }
}
