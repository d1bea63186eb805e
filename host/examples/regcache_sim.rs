// SPDX-License-Identifier: GPL-2.0
//! Trace-driven simulation of the client registration cache's replacement
//! policies (src/proto/regcache_policy.rs): LRU against MRRC's MRE, the
//! comparison of Ou et al. section 7 on the I/O patterns an NFS client
//! sees. Prints, per trace, cache size and policy, the hit ratio (requests
//! served entirely from the cache), partial hits, pages registered, batches
//! of invalidations, and the registration cost by the paper's model
//! (registration 0.77 us per page + 7.42 us, deregistration 0.22 us per
//! page + 1.1 us per batch).
//!
//!     cargo run --release --example regcache_sim
//!
//! Deterministic (fixed seeds): the same table on every run. A cache holds
//! at most one registration per page of its size and at most 8192.

use rpcrdma_proto::proto::regcache_policy::{Cache, Entry, Lookup, PageRun, Policy};

/// xorshift64*: enough randomness for traces, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

const MIB_PAGES: u64 = 256;

/// A named trace of page runs.
struct Trace {
    name: &'static str,
    what: &'static str,
    runs: Vec<PageRun>,
}

fn run(first: u64, pages: u64) -> PageRun {
    PageRun {
        first,
        pages: pages as u32,
    }
}

fn traces() -> Vec<Trace> {
    let n = 10_000;
    let mut out = Vec::new();

    // Buffered sequential I/O through the page cache: fresh pages each time.
    out.push(Trace {
        name: "sequential-1m",
        what: "1 MiB requests over 10 GiB of new page-cache pages",
        runs: (0..n).map(|i| run(i * MIB_PAGES, MIB_PAGES)).collect(),
    });

    // fio with O_DIRECT: iodepth 16 buffers of 1 MiB, reused in random order.
    let mut r = Rng(1);
    out.push(Trace {
        name: "fio-direct-1m",
        what: "1 MiB O_DIRECT, 16 reused buffers",
        runs: (0..n)
            .map(|_| run(1_000_000 + r.below(16) * 4 * MIB_PAGES, MIB_PAGES))
            .collect(),
    });

    // 4 KiB random reads over a 64 MiB working set (page cache pages).
    let mut r = Rng(2);
    out.push(Trace {
        name: "random-4k",
        what: "4 KiB random over a 64 MiB set",
        runs: (0..n).map(|_| run(r.below(64 * MIB_PAGES), 1)).collect(),
    });

    // A database: 8 KiB pages, 80% of accesses to a hot 10% of a 128 MiB
    // buffer pool, mixed with 256 KiB scans through a 4 GiB table.
    let mut r = Rng(3);
    let pool = 128 * MIB_PAGES / 2; // 8 KiB pages in the pool
    let mut scan = 0u64;
    out.push(Trace {
        name: "database",
        what: "8 KiB skewed pool + 256 KiB scans",
        runs: (0..n)
            .map(|_| {
                if r.below(10) == 0 {
                    scan = (scan + 64) % (4096 * MIB_PAGES);
                    run(10_000_000 + scan, 64)
                } else {
                    let page = if r.below(10) < 8 {
                        r.below(pool / 10)
                    } else {
                        r.below(pool)
                    };
                    run(page * 2, 2)
                }
            })
            .collect(),
    });

    // The paper's HTTPD-like mix: whole-file reads of 1..32 pages, files
    // reused with a skew.
    let mut r = Rng(4);
    out.push(Trace {
        name: "httpd",
        what: "1-32 page files, skewed reuse",
        runs: (0..n)
            .map(|_| {
                let file = if r.below(10) < 7 {
                    r.below(200)
                } else {
                    r.below(20_000)
                };
                let pages = 1 + (file * 7919) % 32;
                run(50_000_000 + file * 32, pages)
            })
            .collect(),
    });
    out
}

#[derive(Default)]
struct Outcome {
    hits: u64,
    partial: u64,
    registered_pages: u64,
    registrations: u64,
    evicted_pages: u64,
    batches: u64,
}

/// Registrations a cache may hold: one per page of its size, at most
/// `MAX_SLOTS` (a kernel cache bounds its MRs too).
const MAX_SLOTS: u64 = 8192;

fn simulate(trace: &[PageRun], cap_pages: u64, policy: Policy) -> Outcome {
    let slots = cap_pages.min(MAX_SLOTS) as usize;
    let mut storage = vec![Entry::default(); slots];
    let mut positions = vec![0u32; slots];
    let mut cache = Cache::new(&mut storage[..], &mut positions[..], cap_pages, policy);
    let mut victims = vec![Entry::default(); slots];
    let mut o = Outcome::default();
    for &req in trace {
        let missing: Vec<PageRun> = match cache.lookup(req) {
            Lookup::Hit(_) => {
                o.hits += 1;
                continue;
            }
            Lookup::Partial { covered, .. } => {
                o.partial += 1;
                let mut rest = Vec::new();
                if covered.first > req.first {
                    rest.push(run(req.first, covered.first - req.first));
                }
                let (ce, re) = (covered.end().unwrap(), req.end().unwrap());
                if re > ce {
                    rest.push(run(ce, re - ce));
                }
                rest
            }
            Lookup::Miss => vec![req],
        };
        for m in missing {
            o.registrations += 1;
            o.registered_pages += u64::from(m.pages);
            if let Ok(ins) = cache.insert(m, &mut victims) {
                let n = ins.evicted;
                if n > 0 {
                    o.batches += 1;
                    o.evicted_pages += victims[..n]
                        .iter()
                        .map(|v| u64::from(v.run.pages))
                        .sum::<u64>();
                }
            }
        }
    }
    o
}

fn main() {
    let policies = [("lru", Policy::Lru), ("mre", Policy::MRE)];
    println!(
        "{:<14} {:>6} {:<4} {:>7} {:>8} {:>10} {:>9} {:>8} {:>9}",
        "trace", "MiB", "pol", "hit%", "partial", "reg_pages", "regs", "batches", "cost_ms"
    );
    for t in traces() {
        println!("# {}: {}", t.name, t.what);
        for mib in [16u64, 64, 256] {
            for (pname, p) in policies {
                let o = simulate(&t.runs, mib * MIB_PAGES, p);
                let cost_us = 0.77 * o.registered_pages as f64
                    + 7.42 * o.registrations as f64
                    + 0.22 * o.evicted_pages as f64
                    + 1.1 * o.batches as f64;
                println!(
                    "{:<14} {:>6} {:<4} {:>6.1}% {:>8} {:>10} {:>9} {:>8} {:>9.1}",
                    t.name,
                    mib,
                    pname,
                    100.0 * o.hits as f64 / t.runs.len() as f64,
                    o.partial,
                    o.registered_pages,
                    o.registrations,
                    o.batches,
                    cost_us / 1000.0
                );
            }
        }
    }
}
