//! PathRecord answers on 648- and 3 456-node fat-trees (RLFT of 36- and 24-port switches,
//! LMC 1), routed by Dmodc: the whole-fabric table (every end port to every end port, over the
//! LMC ranges: streamed, not held), the table of one source, single Gets, and the snapshot
//! update of one acknowledged LFT block; the whole table again with partitions (every port
//! full member of the default partition and of one of two tenant partitions: the P_Key of
//! each pair is looked up); a multicast send-only join + leave through the service.
//! Throughput is in records (criterion's elements/s), or requests for the joins.

use std::hint::black_box;
use std::time::{Duration, SystemTime};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use fabric_ranking::{rank, RankOptions};
use fabric_routing::{assign_lids, route_all_checked, EngineKind, Guid2Lid, RoutingContext, IB_MAX_UNICAST_LID};
use fabric_sa::mcast::join_state;
use fabric_sa::partitions::PkeyTables;
use fabric_sa::records::{Gid, McMemberRecord, Record};
use fabric_sa::registry::Registry;
use fabric_sa::subnet::{from_model, Escape, SmData};
use fabric_sa::wire::{self, attr, SaHeader, MAD_SIZE, SA_HEADER_SIZE};
use fabric_sa::{path, Partitions, Request, Requester, SaService, Subnet};
use fabric_topology::gen::generate_str;

fn subnet(spec: &str) -> (Subnet, Vec<(u64, u16)>) {
    let f = generate_str(spec, None).unwrap();
    let ranking = rank(&f, &RankOptions::default());
    let lids = assign_lids(&f, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).unwrap();
    let ctx = RoutingContext {
        fabric: &f,
        ranking: &ranking,
        lids: &lids,
    };
    let (r, _) = route_all_checked(&ctx, EngineKind::Dmodc, None).unwrap();
    let eps = f
        .end_port_ids()
        .map(|e| (f.end_port(e).port_guid, lids.base_lid(e) as u16))
        .collect();
    let s = from_model(&f, &lids, &r.lfts, SmData::default(), Some(Escape { sl: 1 }));
    (s, eps)
}

fn request(method: u8, mask: u64, template: &[u8; 64]) -> [u8; MAD_SIZE] {
    let h = SaHeader {
        class_version: wire::SA_CLASS_VERSION,
        method,
        attr_id: attr::PATH_RECORD,
        component_mask: mask,
        ..SaHeader::default()
    };
    let mut b = [0u8; MAD_SIZE];
    h.encode(&mut b);
    b[SA_HEADER_SIZE..SA_HEADER_SIZE + 64].copy_from_slice(template);
    b
}

fn ask(s: &Subnet, mad: &[u8; MAD_SIZE]) -> usize {
    let req = Request {
        header: SaHeader::decode(mad).unwrap(),
        data: &mad[SA_HEADER_SIZE..],
        from: Requester::default(),
        now: SystemTime::UNIX_EPOCH,
        trusted: false,
    };
    path::answer(s, &req).data.len() / 64
}

fn bench(c: &mut Criterion) {
    for (name, spec) in [("648", "RLFT(2;36;1,1)"), ("3456", "RLFT(3;24;1,1,1)")] {
        let (s, eps) = subnet(spec);
        let mut g = c.benchmark_group(format!("path_table/{name}"));
        g.sample_size(10);
        g.measurement_time(Duration::from_secs(if name == "648" { 5 } else { 20 }));
        g.warm_up_time(Duration::from_secs(1));

        let whole = path::for_each_record(&s, &[0; 64], 0, &mut |_| {}).unwrap();
        g.throughput(Throughput::Elements(u64::from(whole)));
        g.bench_function("whole_fabric", |b| {
            b.iter(|| {
                let mut sum = 0u64;
                let n = path::for_each_record(&s, &[0; 64], 0, &mut |r| sum += u64::from(r[41])).unwrap();
                black_box((n, sum))
            });
        });

        // The same with partitions: half the ports in tenant 1, half in tenant 2, all in the
        // default partition as limited members but the switches' port 0 (full).
        let parts = Partitions {
            tables: s
                .ports
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let sw = s.nodes[p.node as usize].is_switch();
                    (
                        p.guid,
                        if sw {
                            vec![0xffff]
                        } else {
                            vec![0x7fff, 0x8001 + (i % 2) as u16]
                        },
                    )
                })
                .collect(),
            ipoib_groups: Vec::new(),
        };
        let pk = PkeyTables::new(Some(&parts));
        let split = path::for_each_record_in(&s, pk, &[0; 64], 0, &mut |_| {}).unwrap();
        g.throughput(Throughput::Elements(u64::from(split)));
        g.bench_function("whole_fabric_partitioned", |b| {
            b.iter(|| {
                let mut sum = 0u64;
                let n = path::for_each_record_in(&s, pk, &[0; 64], 0, &mut |r| sum += u64::from(r[51])).unwrap();
                black_box((n, sum))
            });
        });

        // All paths from one source (SGID given), the answer built as the transport gets it.
        let mut t = [0u8; 64];
        t[24..32].copy_from_slice(&0xfe80_0000_0000_0000u64.to_be_bytes());
        t[32..40].copy_from_slice(&eps[0].0.to_be_bytes());
        let q = request(wire::METHOD_GET_TABLE, 1 << 3, &t);
        g.throughput(Throughput::Elements(ask(&s, &q) as u64));
        g.bench_function("one_source", |b| b.iter(|| black_box(ask(&s, &q))));

        // Single Gets by SLID/DLID, 1 000 pairs spread over the fabric.
        let qs: Vec<_> = (0..1000)
            .map(|i| {
                let (a, b) = (eps[(i * 7919) % eps.len()].1, eps[(i * 104_729 + 13) % eps.len()].1);
                let mut t = [0u8; 64];
                t[40..42].copy_from_slice(&b.to_be_bytes());
                t[42..44].copy_from_slice(&a.to_be_bytes());
                request(wire::METHOD_GET, (1 << 4) | (1 << 5), &t)
            })
            .collect();
        g.throughput(Throughput::Elements(qs.len() as u64));
        g.bench_function("get_1000_pairs", |b| {
            b.iter(|| qs.iter().map(|q| ask(&s, q)).sum::<usize>());
        });

        // One acknowledged LFT block recorded in the service's snapshot (copy-on-write).
        let guid = s
            .nodes
            .iter()
            .find(|n| n.is_switch())
            .map(fabric_sa::subnet::Node::guid)
            .unwrap();
        let sa = SaService::new(Registry::default(), None);
        sa.publish(s.clone());
        g.throughput(Throughput::Elements(1));
        g.bench_function("apply_one_lft_block", |b| {
            b.iter(|| sa.apply_lft_blocks(&[(guid, 0, [1; 64])]));
        });

        // A send-only member joins a group (one full member) and leaves: two requests.
        sa.set_serving(true);
        let (a, b) = (eps[0], eps[1]);
        let mut mgid = [0u8; 16];
        mgid[..2].copy_from_slice(&[0xff, 0x15]);
        mgid[15] = 1;
        let rec = |guid: u64, state: u8| McMemberRecord {
            mgid: Gid(mgid),
            port_gid: Gid::new(0xfe80_0000_0000_0000, guid),
            qkey: 0x0b1b,
            pkey: 0xffff,
            join_state: state,
            ..Default::default()
        };
        let mc = |method: u8, mask: u64, r: &McMemberRecord| {
            let h = SaHeader {
                class_version: wire::SA_CLASS_VERSION,
                method,
                attr_id: attr::MC_MEMBER_RECORD,
                component_mask: mask,
                ..SaHeader::default()
            };
            let mut m = [0u8; MAD_SIZE];
            h.encode(&mut m);
            r.encode(&mut m[SA_HEADER_SIZE..]);
            m
        };
        let from = |lid: u16| Requester {
            lid,
            qpn: 1,
            ..Default::default()
        };
        let create = mc(wire::METHOD_SET, 0x1_30c7, &rec(a.0, join_state::FULL));
        let r = sa.handle(&create, &from(a.1), SystemTime::UNIX_EPOCH).unwrap();
        assert_eq!(r.header.status, 0);
        let join = mc(wire::METHOD_SET, 0x1_0003, &rec(b.0, join_state::SEND_ONLY_NON));
        let leave = mc(wire::METHOD_DELETE, 0x1_0003, &rec(b.0, join_state::SEND_ONLY_NON));
        g.throughput(Throughput::Elements(2));
        g.bench_function("mcast_send_only_join_leave", |bn| {
            bn.iter(|| {
                let j = sa.handle(&join, &from(b.1), SystemTime::UNIX_EPOCH).unwrap();
                let l = sa.handle(&leave, &from(b.1), SystemTime::UNIX_EPOCH).unwrap();
                black_box((j.header.status, l.header.status))
            });
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
