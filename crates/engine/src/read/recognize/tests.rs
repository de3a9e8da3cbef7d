use std::borrow::Cow;

use serde_json::json;

use super::launchers::{rendezvous, shell_text, size};
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
        rendezvous("torchrun --rdzv-endpoint=job-0.job:29400 t.py", &e, "ml").as_deref(),
        Some("job-0.job")
    );
    assert_eq!(
        rendezvous("torchrun --rdzv_endpoint localhost:0 t.py", &e, "ml"),
        None
    );
    let c = env(&[("MASTER_ADDR", "w-0.svc")]);
    assert_eq!(
        rendezvous("python t.py", &Env::of(&c), "ml").as_deref(),
        Some("w-0")
    );
}

/// Ranks that write their rendezvous host differently meet at one host, so they are one
/// job (one-Job-per-rank jobs split by spelling were held apart).
#[test]
fn every_spelling_of_a_rendezvous_host_is_one_rendezvous() {
    let none = env(&[]);
    let e = Env::of(&none);
    // A Service in the pod's own namespace, and a pod under a headless Service.
    for (host, one) in [
        ("llm-rank-0", "llm-rank-0"),
        ("trainer-0.trainer", "trainer-0.trainer"),
    ] {
        for spelling in [
            format!("{host}:29400"),
            format!("{host}.team-a:29400"),
            format!("{host}.team-a.svc"),
            format!("{}.team-a.svc.cluster.local:29400", host.to_uppercase()),
            format!("{host}.team-a.svc.cluster.local."),
        ] {
            let line = format!("torchrun --rdzv-endpoint={spelling} t.py");
            assert_eq!(
                rendezvous(&line, &e, "team-a").as_deref(),
                Some(one),
                "{line}"
            );
        }
    }
    // torchrun takes a bracketed host as the host.
    assert_eq!(
        rendezvous(
            "torchrun --rdzv-endpoint=[trainer-0.trainer]:29400 t.py",
            &e,
            "team-a"
        )
        .as_deref(),
        Some("trainer-0.trainer")
    );
    // Another namespace's Service stays that namespace's.
    assert_eq!(
        rendezvous(
            "torchrun --rdzv-endpoint=master.team-b:29400 t.py",
            &e,
            "team-a"
        )
        .as_deref(),
        Some("master.team-b")
    );
}

#[test]
fn a_command_line_sets_env_for_what_follows() {
    use super::launchers::assignments;
    let got: Vec<_> =
        assignments("bash -c \"export PET_NNODES=4 X=1; WORLD_SIZE=8 python t.py --lr=3\"")
            .map(|a| (a.name, a.value, a.certain))
            .collect();
    assert_eq!(
        got,
        vec![
            ("PET_NNODES", "4", true),
            ("X", "1", true),
            ("WORLD_SIZE", "8", true)
        ]
    );
    let none = env(&[("PET_NNODES", "1")]);
    let e = Env::of(&none).with_assignments("export PET_NNODES=4; torchrun t.py");
    assert_eq!(
        size("export PET_NNODES=4; torchrun t.py", &e, 8),
        Some(JobSize::Pods(4))
    );
}

/// A command line read as a container's is: the shell's rewriting, then the launchers
/// with the line's own assignments.
fn read(line: &str, container: &serde_json::Value, per_pod: u32) -> Option<JobSize> {
    let line = shell_text(line);
    let env = Env::of(container).with_assignments(&line);
    size(&line, &env, per_pod)
}

#[test]
fn the_shell_joins_continued_lines_before_reading_words() {
    let none = env(&[]);
    let cases = [
        "torchrun \\\n  --nnodes=4 --nproc-per-node=1 \\\n  train.py\n",
        "torchrun \\\r\n  --nnodes=4 \\\r\n  train.py",
        // A continuation inside a word joins it.
        "torchrun --nn\\\nodes=4 train.py",
        "bash -c 'torchrun \\\n --nnodes 4 \\\n train.py'",
        "set -e\ncd /w\ntorchrun \\\n  --rdzv-backend=c10d \\\n  --nnodes=4 \\\n  t.py",
    ];
    for line in cases {
        assert_eq!(read(line, &none, 1), Some(JobSize::Pods(4)), "{line:?}");
    }
    // Without the backslash the next line is a command of its own: its flags are not
    // torchrun's.
    assert_eq!(read("torchrun train.py\n--nnodes=4", &none, 1), None);
}

#[test]
fn the_shell_removes_quotes_and_backslashes_inside_a_word() {
    let none = env(&[]);
    let cases = [
        "torch\"run\" --nnodes=4 t.py",
        "'torchrun' --nnodes=4 t.py",
        "torch''run --nnodes=4 t.py",
        "torchrun --nn\\odes=4 t.py",
        "torchrun \"--nnodes\"=4 t.py",
        "torchrun --nnodes=\"4\" t.py",
        "torchrun $'--nnodes=4' t.py",
        "torchrun $\"--nnodes\" 4 t.py",
        "\\torchrun --nnodes=4 t.py",
        // A nested shell string is still read as the commands it holds.
        "bash -c \"torchrun --nnodes=4 t.py\"",
        "sh -c \"bash -c \\\"torchrun --nnodes=4 t.py\\\"\"",
        "bash -lc 'export X=1; torchrun --nnodes=4 t.py'",
    ];
    for line in cases {
        assert_eq!(read(line, &none, 1), Some(JobSize::Pods(4)), "{line:?}");
    }
}

#[test]
fn shell_rewriting_copies_only_a_line_it_changes() {
    for line in [
        "torchrun --nnodes=4 t.py",
        "bash -c \"torchrun --nnodes=4 t.py\"",
        "sh -c 'echo a'",
    ] {
        assert!(matches!(shell_text(line), Cow::Borrowed(_)), "{line}");
    }
    let cases = [
        ("a \\\nb", "a b"),
        ("a\\\r\nb", "ab"),
        ("torch\"run\" x", "torchrun\" x"),
        ("\\\\x", "\\x"),
        ("\\\"a\"", "\"a\""),
        ("$'x'", "'x'"),
        // Multi-byte characters around what is removed stay whole.
        ("é\\é\"é\"", "ééé\""),
        ("end\\", "end"),
    ];
    for (line, want) in cases {
        assert_eq!(shell_text(line), want, "{line:?}");
    }
}

#[test]
fn subshells_substitutions_and_groups_hold_commands() {
    let none = env(&[]);
    let cases = [
        "(torchrun --nnodes=4 --nproc-per-node=1 train.py) || exit 1",
        "echo done: $(torchrun --nnodes=4 train.py)",
        "out=`torchrun --nnodes=4 train.py`",
        "{ torchrun --nnodes=4 train.py; }",
        "( cd /w && (torchrun --nnodes=4 train.py) )",
        // A substitution for the program: the command goes on after it.
        "$(which torchrun) --nnodes=4 train.py",
    ];
    for line in cases {
        assert_eq!(read(line, &none, 1), Some(JobSize::Pods(4)), "{line:?}");
    }
}

#[test]
fn an_unexpanded_reference_or_substitution_is_several_pods_not_one() {
    // A `$(VAR)` the kubelet left as written (undefined, or from `valueFrom`) and a
    // `$(...)` substitution: the shell derives the count, trainplace cannot.
    let none = env(&[]);
    for line in [
        "torchrun --nnodes=$(NNODES) --nproc-per-node=1 t.py",
        "torchrun --nnodes $(NNODES) t.py",
        "torchrun --nnodes=$(cat /etc/nnodes) t.py",
        "torchrun --nnodes=$((N * 2)) t.py",
        "srun -N$(NODES) python t.py",
    ] {
        assert_eq!(read(line, &none, 1), Some(JobSize::Several), "{line}");
    }
}

#[test]
fn a_variable_can_name_the_launcher() {
    let none = env(&[]);
    let cases = [
        "LAUNCH=torchrun; $LAUNCH --nnodes=4 train.py",
        "export LAUNCH=torchrun\n${LAUNCH} --nnodes=4 train.py",
        "L=/opt/conda/bin/torchrun; exec \"$L\" --nnodes=4 train.py",
    ];
    for line in cases {
        assert_eq!(read(line, &none, 1), Some(JobSize::Pods(4)), "{line:?}");
    }
    // From the container's env, several words: `python -m torch.distributed.run`.
    let c = env(&[("LAUNCH", "python -m torch.distributed.run")]);
    assert_eq!(
        read("$LAUNCH --nnodes=4 train.py", &c, 1),
        Some(JobSize::Pods(4))
    );
    // A variable that names no launcher is only a word.
    let c = env(&[("APP", "python")]);
    assert_eq!(read("$APP train.py --nnodes=4", &c, 1), None);
    assert_eq!(read("$UNSET --nnodes=4 train.py", &none, 1), None);
}

#[test]
fn python_runs_a_launcher_module_however_it_is_named() {
    let none = env(&[]);
    let cases = [
        "python -mtorch.distributed.run --nnodes=4 train.py",
        "python3 -umtorch.distributed.run --nnodes=4 train.py",
        "python -u -B -mtorch.distributed.run --nnodes=4 train.py",
        "python -mtorch.distributed.launch --nnodes=4 --use-env train.py",
        "python /usr/local/lib/python3.11/site-packages/torch/distributed/run.py --nnodes=4 t.py",
        "python3 /opt/venv/lib/python3.10/site-packages/torch/distributed/launch.py --nnodes 4 t.py",
        "python /x/site-packages/deepspeed/launcher/runner.py --num_nodes 4 t.py",
        "python -mdeepspeed.launcher.runner --num_nodes=4 t.py",
        "python /x/site-packages/accelerate/commands/launch.py --num_machines 4 t.py",
        "python -m accelerate.commands.launch --num_machines=4 --machine_rank=1 t.py",
        "python -m accelerate.commands.accelerate_cli launch --num_machines 4 t.py",
        "accelerate-launch --num_machines 4 t.py",
        "python -m horovod.runner.launch -np 4 python t.py",
    ];
    for line in cases {
        assert_eq!(read(line, &none, 1), Some(JobSize::Pods(4)), "{line:?}");
    }
    // Not a launcher: a value-taking switch before `m`, a user's own launch.py, the
    // script's own flags.
    for line in [
        "python -Wmtorch.distributed.run --nnodes=4 t.py",
        "python -cmtorch.distributed.run --nnodes=4",
        "python launch.py --nnodes=4",
        "python /app/run.py --nnodes=4",
        "python train.py --nnodes=4",
        "python -m mypkg.train --nnodes=4",
    ] {
        assert_eq!(read(line, &none, 1), None, "{line}");
    }
}

#[test]
fn srun_reads_its_options_as_getopt_does() {
    let none = env(&[]);
    let cases = [
        (
            "srun -N4 --ntasks-per-node=1 python train.py",
            JobSize::Pods(4),
        ),
        ("srun -N 4 python train.py", JobSize::Pods(4)),
        ("srun --nodes 4 python train.py", JobSize::Pods(4)),
        ("srun --nodes=2-4 python train.py", JobSize::Pods(4)),
        ("srun -lN4 python train.py", JobSize::Pods(4)),
        ("srun -l -N4 python train.py", JobSize::Pods(4)),
        ("srun -n4 python train.py", JobSize::Pods(4)),
        ("srun --ntasks 4 python train.py", JobSize::Pods(4)),
        // `-m` takes a value in srun (the task distribution).
        ("srun -m block -N 4 python train.py", JobSize::Pods(4)),
    ];
    for (line, want) in cases {
        assert_eq!(read(line, &none, 1), Some(want), "{line}");
    }
    // 8 tasks on 8-GPU pods: one pod.
    assert_eq!(
        read("srun -n8 python t.py", &none, 8),
        Some(JobSize::Pods(1))
    );
    // `-k`'s value is optional, so only ever joined: `-kN4` is `-k N4`.
    assert_eq!(read("srun -kN4 python t.py", &none, 1), None);
}

#[test]
fn horovodrun_reads_its_argparse_options() {
    let none = env(&[]);
    let cases = [
        ("horovodrun --num-proc 4 python train.py", JobSize::Pods(4)),
        ("horovodrun --num-proc=4 python train.py", JobSize::Pods(4)),
        ("horovodrun --num-p 4 python train.py", JobSize::Pods(4)),
        ("horovodrun -np 4 python train.py", JobSize::Pods(4)),
        ("horovodrun -n 4 python train.py", JobSize::Pods(4)),
        (
            "horovodrun -np 2 --max-np 4 python train.py",
            JobSize::Pods(4),
        ),
        (
            "horovodrun -np 4 -Ha:1,b:1 python train.py",
            JobSize::Pods(2),
        ),
        (
            "horovodrun --verbose --gloo -np 4 python train.py",
            JobSize::Pods(4),
        ),
    ];
    for (line, want) in cases {
        assert_eq!(read(line, &none, 1), Some(want), "{line}");
    }
    // `--num` is ambiguous (`--num-proc`, `--num-nccl-streams`): argparse refuses it.
    assert_eq!(read("horovodrun --num 4 python t.py", &none, 1), None);
    // The script's own flags are not horovodrun's.
    assert_eq!(read("horovodrun python train.py -np 4", &none, 1), None);
}

#[test]
fn single_pod_command_lines_stay_single_pod() {
    let none = env(&[]);
    for line in [
        "python train.py --nnodes=4",
        "bash -c \"echo torchrun; python train.py --nnodes=4\"",
        "echo 'see torchrun docs'",
        "torchrun \\\n --standalone --nnodes=4 \\\n t.py",
        "(torchrun --standalone --nnodes=4 t.py)",
        "python \"train.py\" --nnodes=\"4\"",
        "python -c 'print(\"--nnodes=4\")'",
        "sh -c 'python train.py \\\n  --nnodes=4'",
    ] {
        assert!(
            read(line, &none, 1).is_none_or(|s| !s.multi_pod()),
            "{line:?}: {:?}",
            read(line, &none, 1)
        );
    }
}

/// torchrun meets at its rendezvous endpoint whatever else it is given: a master
/// address beside it (which only the static rendezvous with no endpoint reads) is a
/// decoy that split one job's ranks into jobs held in a zone each. A wildcard master
/// address names no host the other ranks reach.
#[test]
fn a_master_address_beside_an_endpoint_is_not_the_rendezvous() {
    let none = env(&[]);
    let e = Env::of(&none);
    for decoy in ["decoy-a", "decoy-b"] {
        let line = format!(
            "torchrun --rdzv-backend=c10d --rdzv-endpoint=trainer-0.trainer:29400 --master-addr={decoy} t.py"
        );
        assert_eq!(
            rendezvous(&line, &e, "ml").as_deref(),
            Some("trainer-0.trainer"),
            "{line}"
        );
    }
    let c = env(&[("PET_RDZV_ENDPOINT", "trainer-0.trainer:29400")]);
    assert_eq!(
        rendezvous("torchrun --master-addr=decoy t.py", &Env::of(&c), "ml").as_deref(),
        Some("trainer-0.trainer")
    );
    for wildcard in ["0.0.0.0", "[::]:29500", "::1"] {
        let line = format!("torchrun --master-addr={wildcard} t.py");
        assert_eq!(rendezvous(&line, &e, "ml"), None, "{line}");
    }
}

/// Assignments set variables where the shell makes them: at a command's start, after a
/// reserved word (`then export N=4`), after `env` and its options, `declare -x` or
/// `sudo -E`; never as the argument of another command (`echo export N=1`), nor in a
/// comment.
#[test]
fn assignments_are_read_where_the_shell_makes_them() {
    use super::launchers::assignments;
    let got: Vec<(&str, &str)> = assignments(
        "if true; then export A=1; fi; env -u X B=2 torchrun t; declare -x C=3; sudo -E D=4 bash -c t; echo export E=5; F=6 python prep.py",
    )
    .map(|a| (a.name, a.value))
    .collect();
    // F=6 is prep.py's own: the line's launcher does not see it.
    assert_eq!(got, vec![("A", "1"), ("B", "2"), ("C", "3"), ("D", "4")]);
    let none = env(&[]);
    assert_eq!(
        read(
            "# export PET_STANDALONE=1\ntorchrun --nnodes=4 t.py # --nnodes=1",
            &none,
            1
        ),
        Some(JobSize::Pods(4))
    );
}

/// An assignment the shell makes only on some runs, or after the launcher, or that the
/// launcher's own words do not see, does not settle the variable: the env's value
/// stands beside it, and a count that may be either is no count (several pods). One
/// made on every run before the launcher settles it.
#[test]
fn assignments_made_only_on_some_runs_settle_nothing() {
    let four = env(&[("NNODES", "4")]);
    let unsettled = [
        "torchrun --nnodes=$NNODES t.py; export NNODES=1",
        "if false; then export NNODES=1; fi; torchrun --nnodes=$NNODES t.py",
        "f() { export NNODES=1; }; torchrun --nnodes=$NNODES t.py",
        "f() {\n  export NNODES=1\n}\ntorchrun --nnodes=$NNODES t.py",
        "(export NNODES=1); torchrun --nnodes=$NNODES t.py",
        "test -n x || export NNODES=1; torchrun --nnodes=$NNODES t.py",
        "export NNODES=1 | cat; torchrun --nnodes=$NNODES t.py",
        "export NNODES=1 & torchrun --nnodes=$NNODES t.py",
        "for i in 1; do NNODES=1; done; torchrun --nnodes=$NNODES t.py",
        "case $X in a) echo; NNODES=1;; esac; torchrun --nnodes=$NNODES t.py",
        "cd /w && export NNODES=1; torchrun --nnodes=$NNODES t.py",
        // The words of a command are expanded before its own assignments are made.
        "NNODES=1 torchrun --nnodes=$NNODES t.py",
        "NNODES=1 torchrun --nnodes=${NNODES} t.py",
        // Text that only looks like an assignment: a string, a here-document, a child
        // shell, a command substitution, `local` outside a function.
        "echo \"setup; export NNODES=1\"; torchrun --nnodes=$NNODES t.py",
        "cat > notes <<EOF\nexport NNODES=1\nEOF\ntorchrun --nnodes=$NNODES t.py",
        "if false; then echo \"}\"; export NNODES=1; fi; torchrun --nnodes=$NNODES t.py",
        "bash -c 'export NNODES=1'; torchrun --nnodes=$NNODES t.py",
        "X=`export NNODES=1`; torchrun --nnodes=$NNODES t.py",
        "local NNODES=1; torchrun --nnodes=$NNODES t.py",
        "echo x \\; export NNODES=1; torchrun --nnodes=$NNODES t.py",
        // Set again in ways whose value is not read.
        "export NNODES=1; NNODES+=6; torchrun --nnodes=$NNODES t.py",
        "export NNODES=1; read NNODES < /etc/nnodes; torchrun --nnodes=$NNODES t.py",
        "export NNODES=1; printf -v NNODES 4; torchrun --nnodes=$NNODES t.py",
        "export NNODES=1; : ${NNODES:=4}; torchrun --nnodes=$NNODES t.py",
    ];
    // The same in a shell's double-quoted `-c` script (where it holds no double quote).
    let quoted: Vec<String> = unsettled
        .iter()
        .filter(|l| !l.contains('"'))
        .map(|l| format!("bash -c \"{l}\""))
        .collect();
    for line in unsettled
        .iter()
        .copied()
        .chain(quoted.iter().map(String::as_str))
    {
        // Several, or the env's 4 where the assignment is not read at all.
        let got = read(line, &four, 1);
        assert!(got.is_some_and(|s| s.multi_pod()), "{line}: {got:?}");
    }
    let settled = [
        "export NNODES=1; torchrun --nnodes=$NNODES t.py",
        "cd /w && export NNODES=1 && torchrun --nnodes=$NNODES t.py 2>&1 | tee log",
        "if [ -n x ]; then echo; fi\nNNODES=1\ntorchrun --nnodes=$NNODES t.py",
        "{ echo; }; export NNODES=1; torchrun --nnodes=$NNODES t.py",
        // The same value on every path.
        "if true; then export NNODES=4; fi; torchrun --nnodes=$NNODES t.py",
        // A launcher only named before the assignment does not run there; strings and
        // here-documents open no block.
        "pip install deepspeed\nNNODES=1\ntorchrun --nnodes=$NNODES t.py",
        "echo \"launching torchrun\"\nNNODES=1\ntorchrun --nnodes=$NNODES t.py",
        "cat > ds.json <<EOF\n{\n  \"zero\": {\n  }\n}\nEOF\nNNODES=1\ntorchrun --nnodes=$NNODES t.py",
        "echo \"Starting :-(\"\nNNODES=1\ntorchrun --nnodes=$NNODES t.py",
        "find . -name '*.tmp' -exec rm {} \\;\nNNODES=1\ntorchrun --nnodes=$NNODES t.py",
        "eval \"export NNODES=1\"; torchrun --nnodes=$NNODES t.py",
    ];
    for line in settled {
        let want = if line.contains("NNODES=4") { 4 } else { 1 };
        assert_eq!(read(line, &four, 1), Some(JobSize::Pods(want)), "{line}");
    }
    // A file run in this shell (a venv's or conda's activation) is not read: the env's
    // values stand, as they do under a script trainplace cannot read. A default for a
    // variable the env sets is the env's value.
    let one = env(&[("NNODES", "1"), ("NODE_COUNT", "1")]);
    for line in [
        ". /opt/venv/bin/activate && torchrun --nnodes=$NNODES t.py",
        "eval \"$(conda shell.bash hook)\"; torchrun --nnodes=$NNODES t.py",
        "export NNODES=${NNODES:-4}; torchrun --nnodes=$NNODES t.py",
        "NNODES=${NODE_COUNT}; torchrun --nnodes=$NNODES t.py",
    ] {
        assert_eq!(read(line, &one, 1), Some(JobSize::Pods(1)), "{line}");
    }
    let none = env(&[]);
    assert_eq!(
        read(
            "export NNODES=${NNODES:-4}; torchrun --nnodes=$NNODES t.py",
            &none,
            1
        ),
        Some(JobSize::Several),
        "a default for a variable the image may set"
    );
    // A program's own assignment is its environment, which torchrun reads.
    assert_eq!(
        read("PET_NNODES=1 torchrun t.py", &four, 1),
        Some(JobSize::Pods(1))
    );
}

/// TF_CONFIG: the addresses of its chief, master and workers are its pods (but on the
/// loopback); parameter
/// servers (no accelerators) and an evaluator (outside the cluster) are not ranks.
#[test]
fn tf_config_counts_the_hosts_of_its_training_tasks() {
    let tasks = |text: &str| super::tf_config_tasks(text);
    let w = r#""worker":["w0:2222","w1:2222","w2:2222","w3:2222"]"#;
    assert_eq!(
        tasks(&format!(
            r#"{{"cluster":{{{w}}},"task":{{"type":"worker","index":1}}}}"#
        )),
        Some(4)
    );
    assert_eq!(
        tasks(
            r#"{"cluster":{"chief":["c:1"],"worker":["w0:1"],"ps":["p0:1","p1:1"]},"task":{"type":"worker","index":0}}"#
        ),
        Some(2)
    );
    assert_eq!(
        tasks(
            r#"{"cluster":{"worker":["localhost:1","localhost:2"]},"task":{"type":"worker","index":0}}"#
        ),
        Some(1)
    );
    assert_eq!(
        tasks(&format!(
            r#"{{"cluster":{{{w}}},"task":{{"type":"evaluator","index":0}}}}"#
        )),
        Some(1)
    );
    assert_eq!(
        tasks(r#"{"cluster":{"worker":["svc:2222","svc:2223","svc:2224"]}}"#),
        Some(3),
        "a Service may route each port to a pod of its own"
    );
    assert_eq!(tasks(r#"{"cluster":{"worker":"w0:1"}}"#), None);
    assert_eq!(tasks("not json"), None);
}

/// A rendezvous given as an address, in any form a resolver reads, ties no job; a
/// host name does.
#[test]
fn a_rendezvous_address_in_any_spelling_ties_no_job() {
    let container = json!({});
    let env = Env::of(&container);
    for host in [
        "10.100.23.45",
        "012.0144.027.055",
        "0xa.0x64.0x17.0x2d",
        "10.100.5933",
        "174069549",
        "[fd00::1]",
    ] {
        let line = format!("torchrun --nnodes=2 --rdzv-endpoint={host}:29500 train.py");
        assert_eq!(rendezvous(&line, &env, "ml"), None, "{host}");
    }
    let line = "torchrun --nnodes=2 --rdzv-endpoint=trainer.ml.svc:29500 train.py";
    assert_eq!(rendezvous(line, &env, "ml").as_deref(), Some("trainer"));
}
