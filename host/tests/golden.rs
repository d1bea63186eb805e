//! Golden vectors: every vector passes, and each is also checked on its own
//! so a failure names the vector.

use rpcrdma_proto::proto::golden;

#[test]
fn run_all_passes() {
    let n = golden::run_all().expect("golden vectors");
    assert_eq!(n, golden::VECTORS.len());
    assert!(n >= 20);
}

#[test]
fn each_vector() {
    for v in golden::VECTORS {
        if let Err(f) = golden::check(v) {
            panic!("{}: {}", f.name, f.reason);
        }
    }
}
