//! Writes every golden vector to a directory, one file each, as a seed
//! corpus for the fuzzer: `cargo run --example write_seeds -- DIR`.

use rpcrdma_proto::proto::golden::VECTORS;

fn main() -> std::io::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "fuzz/corpus/decode_header".into());
    std::fs::create_dir_all(&dir)?;
    for v in VECTORS {
        std::fs::write(format!("{dir}/golden-{}", v.name), v.bytes)?;
    }
    println!("wrote {} seeds to {dir}", VECTORS.len());
    Ok(())
}
