//! Compile-time behaviour of `op!`: valid definitions compile and run
//! (`pass/`), and each kind of mistake is a compile error at the offending
//! tokens (`fail/`, with the expected messages in the `.stderr` files).

#[test]
fn op_macro() {
    let t = trybuild::TestCases::new();
    t.pass("tests/pass/*.rs");
    t.compile_fail("tests/fail/*.rs");
}
