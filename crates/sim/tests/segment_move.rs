//! A 2 MiB segment (512 blocks of 4 KiB) moves between two devices as one
//! background job while clients read and write its blocks. The job holds
//! the lock of all 512 blocks, so writes wait for the move and then go to
//! the segment's new device; the simulator's version checker fails the run
//! on any read that returns an older version than the last acknowledged
//! write (a lost write).

use tiermux_core::policy::{Ctx, TickCtx};
use tiermux_core::{Access, Entry, Job, Observation, Outcome, Policy, Purpose};
use tiermux_sim::sim::Simulator;
use tiermux_sim::workload::WorkloadSpec;
use tiermux_sim::{ClientSpec, SimConfig};

const SEGMENT_BLOCKS: u32 = 512;
const SEGMENTS: u64 = 4;
const JOB_MOVE: u8 = 7;

/// Tiering by whole segments: a block lives on device 0 or device 1 (its
/// home) at its own block number; every tick moves the next segment to the
/// other device.
struct SegmentTiering {
    volume_blocks: u64,
    next_segment: u64,
    moves: u64,
    moved_blocks: u64,
}

impl SegmentTiering {
    fn device_of(e: &Entry) -> u8 {
        if e.valid_on(0) {
            0
        } else {
            1
        }
    }
}

impl Policy for SegmentTiering {
    fn name(&self) -> &str {
        "segment-tiering-test"
    }
    fn address_space(&self, _device: usize) -> u64 {
        self.volume_blocks
    }
    fn decide(&mut self, access: Access, ctx: &mut Ctx<'_>) -> Outcome {
        let dev = Self::device_of(&ctx.map.get(access.block));
        ctx.plan.client(dev, access.op, access.block);
        Outcome::NotApplicable
    }
    fn start_job(&mut self, job: Job, ctx: &mut Ctx<'_>) {
        assert_eq!((job.kind, job.blocks), (JOB_MOVE, SEGMENT_BLOCKS));
        let target = 1 - Self::device_of(&ctx.map.get(job.block));
        for b in job.block..job.block + job.blocks as u64 {
            let e = ctx.map.get(b);
            let src = Self::device_of(&e);
            if src == target {
                continue;
            }
            ctx.plan
                .copy(None, (src, b), (target, b), Purpose::Migrate, false);
            ctx.map.set(
                b,
                Entry {
                    present: 1 << target,
                    ..Entry::default()
                },
            );
            self.moved_blocks += 1;
        }
    }
    fn finish_job(&mut self, _job: Job, _ctx: &mut TickCtx<'_>) {
        self.moves += 1;
    }
    fn tick_interval_ns(&self) -> Option<u64> {
        Some(4_000_000)
    }
    fn on_tick(&mut self, _obs: &Observation, ctx: &mut TickCtx<'_>) {
        let s = self.next_segment % SEGMENTS;
        self.next_segment += 1;
        ctx.jobs.push(Job {
            block: s * SEGMENT_BLOCKS as u64,
            blocks: SEGMENT_BLOCKS,
            kind: JOB_MOVE,
        });
    }
    fn controller_state(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("moves", self.moves as f64),
            ("moved_blocks", self.moved_blocks as f64),
        ]
    }
}

#[test]
fn a_segment_moves_as_one_job_under_concurrent_writes() {
    let volume_blocks = SEGMENTS * SEGMENT_BLOCKS as u64;
    let cfg = SimConfig {
        devices: vec!["optane-905p".into(), "flash-970pro".into()],
        policy: "passthrough".into(),
        cache_blocks: volume_blocks,
        volume_blocks: Some(volume_blocks),
        workload: WorkloadSpec {
            working_set_blocks: Some(volume_blocks),
            write_ratio: 0.5,
            request_blocks: 4,
            ..WorkloadSpec::default()
        },
        client: ClientSpec {
            workers: Some(16),
            ..ClientSpec::default()
        },
        duration_s: 0.2,
        warmup_s: 0.0,
        prefill: false,
        ..SimConfig::default()
    };
    let r = cfg.resolve().unwrap();
    let sim = Simulator::with_policy(
        r,
        Box::new(SegmentTiering {
            volume_blocks,
            next_segment: 0,
            moves: 0,
            moved_blocks: 0,
        }),
    )
    .unwrap();
    let res = sim.run().expect("no read returned a stale version");
    let state = |name: &str| {
        res.controller
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
            .unwrap()
    };
    let moves = state("moves");
    println!(
        "{moves} segment moves, {} blocks moved, {} reads checked, {} requests",
        state("moved_blocks"),
        res.reads_checked,
        res.requests
    );
    assert!(moves >= 20.0, "only {moves} moves");
    // Every move after the first of each segment moves all 512 blocks.
    assert!(state("moved_blocks") >= (moves - SEGMENTS as f64) * SEGMENT_BLOCKS as f64);
    assert!(res.reads_checked > 10_000, "{} reads", res.reads_checked);
    let migrated: u64 = res.devices.iter().map(|d| d.migrated_bytes).sum();
    assert_eq!(migrated as f64, state("moved_blocks") * 4096.0);
}
