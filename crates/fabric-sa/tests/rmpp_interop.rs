//! The SA's RMPP sender (`rmpp::sender::Transfer`) against the client's receiver
//! (`rmpp::receiver::Receiver`) over a simulated channel that loses, duplicates and reorders
//! MADs in both directions. Time is simulated: `now` only moves when nothing is in flight and
//! the sender's deadline is due, so the elapsed simulated time counts the timeouts taken.

use std::time::{Duration, Instant};

use fabric_sa::rmpp::receiver::{Progress, Receiver, ReceiverConfig};
use fabric_sa::rmpp::segment_count;
use fabric_sa::rmpp::sender::{SenderParams, Transfer, TransferEnd};
use fabric_sa::wire::{self, SaHeader, MAD_SIZE};
use fabric_sa::SaResponse;
use proptest::prelude::*;

const TIMEOUT: Duration = Duration::from_millis(200);

fn answer(len: usize) -> SaResponse {
    SaResponse {
        header: SaHeader {
            class_version: 2,
            method: wire::METHOD_GET_TABLE_RESP,
            tid: 0x0000_0077_0000_0001,
            attr_id: wire::attr::PATH_RECORD,
            attr_offset: 8,
            ..SaHeader::default()
        },
        data: (0..len).map(|i| (i * 13 + i / 199) as u8).collect(),
    }
}

/// The channel's faults, in percent per MAD.
#[derive(Clone, Copy, Debug)]
struct Faults {
    loss: u64,
    dup: u64,
    /// Chance that a batch in flight is shuffled.
    reorder: u64,
}

const CLEAN: Faults = Faults {
    loss: 0,
    dup: 0,
    reorder: 0,
};

/// What one transfer did.
#[derive(Debug)]
struct Outcome {
    sender_end: Option<TransferEnd>,
    received: Option<Vec<u8>>,
    header: Option<SaHeader>,
    /// Simulated time from the first segment to the sender's end.
    elapsed: Duration,
    /// DATA segments put on the wire (first sends and resends).
    segments_sent: u64,
    /// Timeouts the sender took.
    timeouts: u32,
}

fn run(len: usize, window: u32, seed: u64, faults: Faults) -> Outcome {
    let t0 = Instant::now();
    let mut now = t0;
    let params = SenderParams {
        timeout: TIMEOUT,
        retries: 50,
    };
    let (mut tx, first) = Transfer::start(answer(len), params, t0).expect("GetTableResp is RMPP");
    let mut rx = Receiver::new(
        ReceiverConfig {
            window,
            ..ReceiverConfig::default()
        },
        t0,
    );
    let mut x = seed | 1;
    let mut rnd = move |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m.max(1)
    };
    let mut segments_sent = first.send.len() as u64;
    let mut to_rx: Vec<Box<[u8; MAD_SIZE]>> = first.send;
    let mut received = None;
    let mut header = None;
    let mut timeouts = 0;
    for _ in 0..100_000 {
        if tx.end().is_some() {
            break;
        }
        // Sender -> receiver.
        let mut batch = Vec::new();
        for m in to_rx.drain(..) {
            let r = rnd(100);
            if r < faults.loss {
                continue;
            }
            if r < faults.loss + faults.dup {
                batch.push(m.clone());
            }
            batch.push(m);
        }
        if batch.len() > 1 && rnd(100) < faults.reorder {
            for i in (1..batch.len()).rev() {
                let j = rnd(i as u64 + 1) as usize;
                batch.swap(i, j);
            }
        }
        // Receiver -> sender.
        let mut to_tx = Vec::new();
        for m in batch {
            let step = rx.on_mad(now, &m[..]);
            if let Some(reply) = step.reply {
                let r = rnd(100);
                if r >= faults.loss {
                    if r < faults.loss + faults.dup {
                        to_tx.push(reply.clone());
                    }
                    to_tx.push(reply);
                }
            }
            match step.progress {
                Progress::Complete(t) => {
                    assert!(received.is_none(), "the receiver completed twice");
                    header = Some(t.header);
                    received = Some(t.data);
                }
                Progress::Failed(e) => panic!("receiver failed: {e}"),
                Progress::Receiving => {}
            }
        }
        if to_tx.len() > 1 && rnd(100) < faults.reorder {
            to_tx.reverse();
        }
        for a in to_tx {
            let s = tx.on_mad(&a[..], now);
            segments_sent += s.send.len() as u64;
            to_rx.extend(s.send);
        }
        if to_rx.is_empty() && tx.end().is_none() {
            // Nothing in flight: only the sender's timer moves the transfer on.
            now = tx.deadline().expect("a running transfer has a deadline");
            timeouts += 1;
            assert_eq!(rx.on_tick(now), None, "the receiver gave up while the sender retried");
            let s = tx.on_timer(now);
            segments_sent += s.send.len() as u64;
            to_rx.extend(s.send);
        }
    }
    Outcome {
        sender_end: tx.end(),
        received,
        header,
        elapsed: now - t0,
        segments_sent,
        timeouts,
    }
}

#[test]
fn a_lossless_transfer_never_waits_for_a_timeout() {
    // Sizes around segment boundaries, windows from 1 to above the transfer.
    for len in [0usize, 1, 64, 199, 200, 201, 640, 1000, 6400, 12_345, 64_000] {
        for window in [1u32, 2, 5, 16, 64, 1000] {
            let o = run(len, window, 1, CLEAN);
            let want = answer(len).data;
            assert_eq!(
                o.sender_end,
                Some(TransferEnd::Completed),
                "{len} bytes, window {window}"
            );
            assert_eq!(o.received.as_ref(), Some(&want), "{len} bytes, window {window}");
            // The receiver ACKs segment 1 at once and the sender answers every ACK with the
            // window it opens: no simulated time passes and nothing is sent twice.
            assert_eq!(o.timeouts, 0, "{len} bytes, window {window}: stalled");
            assert_eq!(o.elapsed, Duration::ZERO, "{len} bytes, window {window}");
            assert_eq!(
                o.segments_sent,
                u64::from(segment_count(len)),
                "{len} bytes, window {window}: resends without loss"
            );
        }
    }
}

#[test]
fn the_reassembled_header_is_the_answer_s() {
    let o = run(1000, 4, 7, CLEAN);
    let h = o.header.expect("complete");
    let want = answer(1000).header;
    assert_eq!(
        (h.method, h.tid, h.attr_id, h.attr_offset, h.status),
        (want.method, want.tid, want.attr_id, want.attr_offset, want.status)
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn any_answer_reassembles_exactly_through_loss_duplication_and_reordering(
        len in 0usize..8000,
        window in 1u32..20,
        seed in any::<u64>(),
        loss in 0u64..25,
        dup in 0u64..10,
        reorder in 0u64..50,
    ) {
        let o = run(len, window, seed, Faults { loss, dup, reorder });
        prop_assert_eq!(o.sender_end, Some(TransferEnd::Completed));
        prop_assert_eq!(o.received, Some(answer(len).data));
        // Bounded: every timeout is one sender timeout of simulated time, and the sender
        // never waits longer than its timeout between two steps.
        prop_assert!(o.elapsed <= TIMEOUT * o.timeouts);
        prop_assert!(o.timeouts < 2_000, "{} timeouts", o.timeouts);
        if loss == 0 && dup == 0 {
            // Reordering alone may cost resends (go-back-N) but the first segment is always
            // ACKed at once.
            prop_assert!(o.segments_sent >= u64::from(segment_count(len)));
        }
    }
}
