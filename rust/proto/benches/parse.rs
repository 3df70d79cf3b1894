// SPDX-License-Identifier: GPL-2.0

//! Microbenchmark: ns per private-data parse and per negotiation.
//! `cargo bench` prints a table: median and min-max of 15 runs of 200k iterations.

use rpcrdma_proto::negotiate::{negotiate, Role};
use rpcrdma_proto::pvt_data::{parse, PrivateData};
use rpcrdma_proto::vectors::{place, LINUX_CLIENT, LINUX_SERVER, REP_PVT_LEN};
use std::hint::black_box;
use std::time::Instant;

const ITERS: u32 = 200_000;
const RUNS: usize = 15;

fn measure(name: &str, mut f: impl FnMut()) {
    let mut ns: Vec<f64> = (0..RUNS)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..ITERS {
                f();
            }
            t.elapsed().as_nanos() as f64 / f64::from(ITERS)
        })
        .collect();
    ns.sort_by(f64::total_cmp);
    println!(
        "| {name:<44} | {:>8.1} | {:>8.1} - {:<8.1} |",
        ns[RUNS / 2],
        ns[0],
        ns[RUNS - 1]
    );
}

fn main() {
    let short = LINUX_CLIENT;
    let id_at_end: [u8; REP_PVT_LEN] = place(0, REP_PVT_LEN - 8, &LINUX_SERVER);
    let id_at_start: [u8; REP_PVT_LEN] = place(0, 0, &LINUX_SERVER);
    let zeros = [0u8; REP_PVT_LEN];
    let ours = PrivateData::new(true, 16384, 16384).unwrap();
    let peer = parse(&id_at_start);

    println!(
        "| {:<44} | {:>8} | {:^19} |",
        "operation", "ns med", "ns min - max"
    );
    println!("|{:-<46}|{:->10}|{:-<21}|", "", "", "");
    measure("parse 8 B (id at 0)", || {
        black_box(parse(black_box(&short)));
    });
    measure("parse 196 B, id at offset 0", || {
        black_box(parse(black_box(&id_at_start)));
    });
    measure("parse 196 B, id at the end (offset 188)", || {
        black_box(parse(black_box(&id_at_end)));
    });
    measure("parse 196 B, no id (all zero: absent)", || {
        black_box(parse(black_box(&zeros)));
    });
    measure("negotiate (parsed peer)", || {
        black_box(negotiate(Role::Client, black_box(&ours), black_box(&peer)));
    });
    measure("parse 196 B (id at end) + negotiate", || {
        let p = parse(black_box(&id_at_end));
        black_box(negotiate(Role::Server, black_box(&ours), &p));
    });
}
