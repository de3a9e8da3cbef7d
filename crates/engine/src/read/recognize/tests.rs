use std::borrow::Cow;

use serde_json::json;

use super::launchers::{rendezvous, size};
use super::{EXPANDED_LIMIT, Env, JobSize};

fn env(vars: &[(&str, &str)]) -> serde_json::Value {
    let env: Vec<_> = vars
        .iter()
        .map(|(n, v)| json!({"name": n, "value": v}))
        .collect();
    json!({ "env": env })
}

#[test]
fn command_lines_say_how_many_nodes() {
    let none = env(&[]);
    let e = Env::of(&none);
    let cases = [
        (
            "torchrun --nnodes=4 --nproc_per_node=8 train.py",
            Some(JobSize::Pods(4)),
        ),
        ("torchrun --nnodes 4 train.py", Some(JobSize::Pods(4))),
        ("torchrun --nnodes=2:8 train.py", Some(JobSize::Pods(8))),
        ("torchrun --nnodes=$NNODES train.py", Some(JobSize::Several)),
        (
            "bash -c \"deepspeed --num_nodes 2 train.py\"",
            Some(JobSize::Pods(2)),
        ),
        ("mpirun -np 16 python train.py", Some(JobSize::Pods(2))),
        ("python serve.py --n 4", None),
        // torchrun's default (one node) leaves the trainer's env to speak.
        ("torchrun train.py", None),
        // argparse prefixes.
        ("torchrun --nnode 4 train.py", Some(JobSize::Pods(4))),
        ("torchrun --nn=3 train.py", Some(JobSize::Pods(3))),
        (
            "python -m torch.distributed.launch --nnodes 2 t.py",
            Some(JobSize::Pods(2)),
        ),
        (
            "python3 -m torch.distributed.run --nnodes=1 t.py",
            Some(JobSize::Pods(1)),
        ),
        // The script's own flags are not the launcher's.
        ("torchrun train.py --nnodes 4", None),
        // Standalone is one node, however many it says.
        (
            "torchrun --standalone --nnodes=4 t.py",
            Some(JobSize::Pods(1)),
        ),
        (
            "pip install x && torchrun --nnodes 4 t.py",
            Some(JobSize::Pods(4)),
        ),
        ("deepspeed --num_n 3 t.py", Some(JobSize::Pods(3))),
        ("deepspeed --force_multi t.py", Some(JobSize::Several)),
        ("deepspeed --include a@b@c t.py", Some(JobSize::Pods(3))),
        ("deepspeed t.py", None),
        (
            "accelerate launch --num_machines 2 t.py",
            Some(JobSize::Pods(2)),
        ),
        (
            "accelerate launch --num_processes 16 t.py",
            Some(JobSize::Pods(2)),
        ),
        (
            "horovodrun -np 32 -H a:8,b:8,c:8,d:8 python t.py",
            Some(JobSize::Pods(4)),
        ),
        ("mpiexec -n 8 -N 1 python t.py", Some(JobSize::Pods(8))),
        ("srun --nodes=2 python t.py", Some(JobSize::Pods(2))),
    ];
    for (line, want) in cases {
        assert_eq!(size(line, &e, 8), want, "{line}");
    }
}

#[test]
fn the_launcher_reads_its_env_when_the_flag_is_absent_and_the_flag_wins() {
    let c = env(&[("PET_NNODES", "4")]);
    let e = Env::of(&c);
    assert_eq!(size("torchrun t.py", &e, 8), Some(JobSize::Pods(4)));
    assert_eq!(
        size("torchrun --nnodes 1 t.py", &e, 8),
        Some(JobSize::Pods(1))
    );
    let c = env(&[("N", "6")]);
    assert_eq!(
        size("torchrun --nnodes=${N} t.py", &Env::of(&c), 8),
        Some(JobSize::Pods(6))
    );
}

#[test]
fn a_process_count_spreads_over_the_pods_real_accelerators() {
    let none = env(&[]);
    let e = Env::of(&none);
    // 8 processes per node on a 1-GPU pod cannot be: one per GPU.
    assert_eq!(
        size("mpirun -np 4 -N 8 python t.py", &e, 1),
        Some(JobSize::Pods(4))
    );
}

#[test]
fn env_is_read_as_the_kubelet_builds_it() {
    let c = json!({"env": [
        {"name": "NNODES", "value": "1"},
        {"name": "NNODES", "value": "4"},
    ]});
    let e = Env::of(&c);
    assert_eq!(e.literal("NNODES"), Some("4"));
    assert_eq!(
        e.expand("torchrun --nnodes=$(NNODES) $(OTHER) $$(NNODES)"),
        "torchrun --nnodes=4 $(OTHER) $(NNODES)"
    );
}

#[test]
fn references_expand_by_the_kubelets_rules() {
    let c = json!({"env": [
        {"name": "N", "value": "4"},
        {"name": "REF", "value": "$(N)"},
        {"name": "FROM", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]});
    let e = Env::of(&c);
    let cases = [
        // A value is put in as it is, never expanded again.
        ("$(REF)", "$(N)"),
        ("$$$(N)", "$4"),
        ("$$(N)", "$(N)"),
        ("a$b$", "a$b$"),
        ("$(FROM)-$(N)", "$(FROM)-4"),
        // An unclosed reference stays, and so does every one after it.
        ("$(N)$($(N", "4$($(N"),
        ("$(N $(N)", "$(N $(N)"),
        ("é$é$(N)", "é$é4"),
    ];
    for (text, expanded) in cases {
        assert_eq!(e.expand(text), expanded, "{text}");
    }
}

#[test]
fn a_long_line_of_references_grows_by_the_limit_at_most() {
    // Every reference would add 4 KiB: the line may grow by 128 KiB in all, wherever
    // the references are, and its buffer is never twice the line.
    let c = json!({"env": [{"name": "BIG", "value": "x".repeat(4096)}]});
    let e = Env::of(&c);
    let line = "$(BIG) ".repeat(100_000);
    let out = e.expand(&line);
    assert!(
        out.len() <= line.len() + EXPANDED_LIMIT,
        "{} bytes",
        out.len()
    );
    assert!(out.ends_with("$(BIG) "), "the rest stays as written");
    let Cow::Owned(out) = out else {
        panic!("expanded");
    };
    assert!(
        out.capacity() <= line.len() + EXPANDED_LIMIT,
        "{} bytes held",
        out.capacity()
    );
}

#[test]
fn expansion_stops_at_its_limit_and_leaves_the_rest_as_written() {
    let c = json!({"env": [{"name": "BIG", "value": "x".repeat(40 * 1024)}, {"name": "N", "value": "4"}]});
    let e = Env::of(&c);
    let line = format!("--nnodes=$(N) {}", "$(BIG)".repeat(10));
    let out = e.expand(&line);
    assert!(out.len() <= line.len() + EXPANDED_LIMIT, "{}", out.len());
    assert!(out.starts_with("--nnodes=4 xxx"), "{}", &out[..20]);
    // Three copies fit in 128 KiB; the fourth reference and the rest stay as written.
    assert!(
        out.ends_with(&"$(BIG)".repeat(7)),
        "{}",
        &out[out.len() - 50..]
    );
    assert_eq!(out.matches('x').count(), 3 * 40 * 1024);
}

#[test]
fn rendezvous_endpoints_tie_pods_together_unless_local() {
    let none = env(&[]);
    let e = Env::of(&none);
    assert_eq!(
        rendezvous("torchrun --rdzv-endpoint=job-0.job:29400 t.py", &e).as_deref(),
        Some("job-0.job:29400")
    );
    assert_eq!(
        rendezvous("torchrun --rdzv_endpoint localhost:0 t.py", &e),
        None
    );
    let c = env(&[("MASTER_ADDR", "w-0.svc")]);
    assert_eq!(
        rendezvous("python t.py", &Env::of(&c)).as_deref(),
        Some("w-0.svc")
    );
}

#[test]
fn a_command_line_sets_env_for_what_follows() {
    use super::launchers::assignments;
    let got: Vec<_> =
        assignments("bash -c \"export PET_NNODES=4 X=1; WORLD_SIZE=8 python t.py --lr=3\"")
            .collect();
    assert_eq!(
        got,
        vec![("PET_NNODES", "4"), ("X", "1"), ("WORLD_SIZE", "8")]
    );
    let none = env(&[("PET_NNODES", "1")]);
    let e = Env::of(&none).with_assignments("export PET_NNODES=4; torchrun t.py");
    assert_eq!(
        size("export PET_NNODES=4; torchrun t.py", &e, 8),
        Some(JobSize::Pods(4))
    );
}
