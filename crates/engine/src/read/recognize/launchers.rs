//! Launcher command lines, parsed the way each launcher parses them: torchrun and
//! `torch.distributed.run`/`.launch`, DeepSpeed, Accelerate, Horovod, and MPI-style
//! launchers (mpirun, mpiexec, srun). A shell string (`bash -c "..."`) is split into
//! its commands; each launcher's options end at its first positional argument (the
//! training script, whose own flags are not the launcher's). Python launchers use
//! argparse, which accepts any unambiguous prefix of a long option (`--nnode 4`).
//! <https://docs.python.org/3/library/argparse.html#allow-abbrev>
//!
//! The line is first rewritten the way a shell rewrites it before it reads words
//! ([`shell_text`]: line continuations and quotes inside a word removed); the words
//! of a command are split at whitespace, quotes, backquotes and parentheses, so a
//! nested `bash -c "..."`, a `( ... )` subshell and a `$( ... )` substitution are read
//! as the commands they hold. A launcher is named by its program, its Python module
//! (`python -m torch.distributed.run`, `-mtorch.distributed.run`), the module's file
//! run as a script, or a shell variable holding one of these (`$LAUNCH`).

use std::borrow::Cow;
use std::cell::Cell;
use std::collections::HashSet;

use super::counts::{count, host_list, node_count, per_pods, slurm_nodes};
use super::sequence;
use super::{ARGS, EXPANDED_LIMIT, Env, JobSize};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Launcher {
    Torchrun,
    DeepSpeed,
    Accelerate,
    Horovod,
    Mpi,
    Slurm,
    /// LLaMA-Factory's `llamafactory-cli train`: it runs torchrun itself, over `NNODES`
    /// nodes (default 1), when `FORCE_TORCHRUN` is set or the pod has several GPUs.
    /// <https://github.com/hiyouga/LLaMA-Factory-Doc/blob/main/docs/source/advanced/distributed.rst>
    LlamaFactory,
    /// ms-swift's `swift sft|pt|rlhf`: it runs torchrun over `NNODES` nodes (default 1).
    /// <https://swift.readthedocs.io/en/latest/Instruction/Command-line-parameters.html>
    Swift,
    /// PaddlePaddle's `python -m paddle.distributed.launch` (and `fleetrun`): `--nnodes`
    /// (`N` or `MIN:MAX`), else `--ips` (one per node), else `PADDLE_NNODES`.
    /// <https://github.com/PaddlePaddle/Paddle/blob/develop/python/paddle/distributed/launch/context/args_envs.py>
    Paddle,
    /// MosaicML Composer's `composer` launcher: `-n` processes per node, `--world_size`
    /// in all. <https://github.com/mosaicml/composer/blob/dev/composer/cli/launcher.py>
    Composer,
    /// Lightning Fabric's `fabric run` (and `lightning run model`): `--num-nodes`.
    /// <https://github.com/Lightning-AI/pytorch-lightning/blob/master/src/lightning/fabric/cli.py>
    Fabric,
}

/// torchrun's long options (torch/distributed/run.py `get_args_parser`, launch.py adds
/// `--use-env`), for argparse's prefix matching.
/// https://github.com/pytorch/pytorch/blob/v2.5.1/torch/distributed/run.py
const TORCHRUN_OPTIONS: [&str; 27] = [
    "nnodes",
    "nproc-per-node",
    "nproc_per_node",
    "rdzv-backend",
    "rdzv_backend",
    "rdzv-endpoint",
    "rdzv_endpoint",
    "rdzv-id",
    "rdzv_id",
    "rdzv-conf",
    "rdzv_conf",
    "standalone",
    "max-restarts",
    "start-method",
    "role",
    "module",
    "no-python",
    "run-path",
    "log-dir",
    "node-rank",
    "node_rank",
    "master-addr",
    "master_addr",
    "use-env",
    "use_env",
    "run_path",
    "log_dir",
];

/// DeepSpeed's launcher options (deepspeed/launcher/runner.py `parse_args`), for
/// argparse's prefix matching; `-H`, `-i` and `-e` are its short options.
/// https://github.com/deepspeedai/DeepSpeed/blob/v0.16.0/deepspeed/launcher/runner.py
const DEEPSPEED_OPTIONS: [&str; 30] = [
    "H",
    "hostfile",
    "i",
    "include",
    "e",
    "exclude",
    "num_nodes",
    "min_elastic_nodes",
    "max_elastic_nodes",
    "num_gpus",
    "num-gpus",
    "num_accelerators",
    "node_rank",
    "master_addr",
    "master_port",
    "launcher",
    "launcher_args",
    "module",
    "no_python",
    "no_local_rank",
    "no_ssh",
    "no_ssh_check",
    "force_multi",
    "save_pid",
    "enable_each_rank_log",
    "autotuning",
    "elastic_training",
    "bind_cores_to_rank",
    "bind_core_list",
    "ssh_port",
];

/// Accelerate's `launch` options that matter here.
/// https://huggingface.co/docs/accelerate/package_reference/cli#accelerate-launch
const ACCELERATE_OPTIONS: [&str; 8] = [
    "num_machines",
    "num-machines",
    "num_processes",
    "num-processes",
    "machine_rank",
    "main_process_ip",
    "main-process-ip",
    "multi_gpu",
];

/// horovodrun's options (horovod/runner/launch.py `parse_args`, an argparse parser),
/// for argparse's prefix matching: `--num-p 4` is `--num-proc 4`.
/// <https://horovod.readthedocs.io/en/stable/running_include.html>
/// <https://github.com/horovod/horovod/blob/v0.28.1/horovod/runner/launch.py>
const HOROVOD_OPTIONS: [&str; 67] = [
    "v",
    "version",
    "np",
    "num-proc",
    "cb",
    "check-build",
    "disable-cache",
    "start-timeout",
    "network-interfaces",
    "network-interface",
    "output-filename",
    "verbose",
    "config-file",
    "p",
    "ssh-port",
    "i",
    "ssh-identity-file",
    "fusion-threshold-mb",
    "cycle-time-ms",
    "cache-capacity",
    "hierarchical-allreduce",
    "no-hierarchical-allreduce",
    "hierarchical-allgather",
    "no-hierarchical-allgather",
    "autotune",
    "no-autotune",
    "autotune-log-file",
    "autotune-warmup-samples",
    "autotune-steps-per-sample",
    "autotune-bayes-opt-max-samples",
    "autotune-gaussian-process-noise",
    "min-np",
    "min-num-proc",
    "max-np",
    "max-num-proc",
    "slots-per-host",
    "elastic-timeout",
    "reset-limit",
    "blacklist-cooldown-range",
    "timeline-filename",
    "timeline-mark-cycles",
    "no-timeline-mark-cycles",
    "no-stall-check",
    "stall-check",
    "stall-check-warning-time-seconds",
    "stall-check-shutdown-time-seconds",
    "mpi-threads-disable",
    "no-mpi-threads-disable",
    "mpi-args",
    "tcp",
    "binding-args",
    "num-nccl-streams",
    "thread-affinity",
    "gloo-timeout-seconds",
    "log-level",
    "log-with-timestamp",
    "log-without-timestamp",
    "prefix-timestamp",
    "prefix-output-with-timestamp",
    "log-hide-timestamp",
    "no-log-hide-timestamp",
    "H",
    "hosts",
    "hostfile",
    "host-discovery-script",
    "gloo",
    "mpi",
];

/// Options that take no value (the next token is not theirs): argparse's `store_true`
/// options of torchrun, `torch.distributed.launch`, DeepSpeed, Accelerate and
/// horovodrun, in every spelling they accept. One missing here would take the training
/// script as its value, and the script's own flags would be read as the launcher's.
/// <https://github.com/huggingface/accelerate/blob/v1.2.1/src/accelerate/commands/launch.py>
const SWITCHES: [&str; 81] = [
    "standalone",
    "no-python",
    "no_python",
    "run-path",
    "run_path",
    "module",
    "use-env",
    "use_env",
    "virtual-local-rank",
    "virtual_local_rank",
    "force_multi",
    "no_local_rank",
    "no_ssh",
    "no_ssh_check",
    "save_pid",
    "elastic_training",
    "bind_cores_to_rank",
    "multi_gpu",
    "multi-gpu",
    "m",
    // accelerate launch
    "cpu",
    "tpu",
    "ipex",
    "use_cpu",
    "use_deepspeed",
    "use-deepspeed",
    "use_fsdp",
    "use-fsdp",
    "use_megatron_lm",
    "use-megatron-lm",
    "use_xpu",
    "use-xpu",
    "same_network",
    "same-network",
    "enable_cpu_affinity",
    "enable-cpu-affinity",
    "dynamo_use_fullgraph",
    "dynamo-use-fullgraph",
    "dynamo_use_dynamic",
    "dynamo-use-dynamic",
    "downcast_bf16",
    "downcast-bf16",
    "tpu_use_cluster",
    "tpu_use_sudo",
    "debug",
    "quiet",
    "q",
    "dynamo_use_regional_compilation",
    "dynamo-use-regional-compilation",
    "use_parallelism_config",
    "use-parallelism-config",
    "tpu_cluster",
    "no_tpu_cluster",
    // horovodrun (horovod/runner/launch.py: its store_true and store_false options)
    "autotune",
    "no-autotune",
    "hierarchical-allreduce",
    "no-hierarchical-allreduce",
    "hierarchical-allgather",
    "no-hierarchical-allgather",
    "torus-allreduce",
    "no-torus-allreduce",
    "timeline-mark-cycles",
    "no-timeline-mark-cycles",
    "no-stall-check",
    "stall-check",
    "mpi-threads-disable",
    "no-mpi-threads-disable",
    "log-with-timestamp",
    "log-without-timestamp",
    "prefix-timestamp",
    "prefix-output-with-timestamp",
    "log-hide-timestamp",
    "no-log-hide-timestamp",
    "verbose",
    "disable-cache",
    "check-build",
    "cb",
    "gloo",
    "mpi",
    "jsrun",
    "tcp",
];

/// MPI launchers' options that take no value (Open MPI's `mpirun.1`, MPICH and Intel
/// MPI hydra's): the program is "the first non-recognized argument", so a switch just
/// before it (`--allow-run-as-root all_reduce_perf ...`, as the nccl-tests README writes
/// it) must not take it as its value, or the program's own `-c`/`-n` would be read as
/// the process count.
/// <https://docs.open-mpi.org/en/v5.0.x/man-openmpi/man1/mpirun.1.html>
/// <https://github.com/pmodels/mpich/blob/main/src/pm/hydra/README>
const MPI_SWITCHES: [&str; 47] = [
    "allow-run-as-root",
    "oversubscribe",
    "nooversubscribe",
    "report-bindings",
    "tag-output",
    "timestamp-output",
    "xml",
    "display-map",
    "display-devel-map",
    "display-allocation",
    "display-devel-allocation",
    "do-not-launch",
    "nolocal",
    "noprefix",
    "use-hwthread-cpus",
    "bind-to-core",
    "bind-to-socket",
    "bind-to-none",
    "bynode",
    "byslot",
    "enable-recovery",
    "disable-recovery",
    "continuous",
    "merge-stderr-to-stdout",
    "show-progress",
    "debug-daemons",
    "debug-devel",
    "leave-session-attached",
    "preload-binary",
    "s",
    "v",
    "verbose",
    "report-child-jobs-separately",
    "output-proctable",
    "set-cwd-to-session-dir",
    // hydra (MPICH, Intel MPI)
    "l",
    "prepend-rank",
    "info",
    "genvall",
    "genvnone",
    "print-all-exitcodes",
    "ordered-output",
    "print-rank-map",
    "disable-auto-cleanup",
    "disable-hostname-propagation",
    "enable-x",
    "disable-x",
];

/// MPI launchers' options that take two words, a key and its value: Open MPI's
/// `--mca` family (`mpirun.1`: "The --mca switch takes two arguments: <key> and
/// <value>") and MPICH/Intel MPI hydra's `-genv`/`-env`.
/// <https://docs.open-mpi.org/en/v5.0.x/man-openmpi/man1/mpirun.1.html>
/// <https://github.com/pmodels/mpich/blob/main/src/pm/hydra/README>
const MPI_PAIRS: [&str; 14] = [
    "-mca",
    "--mca",
    "-gmca",
    "--gmca",
    "-prtemca",
    "--prtemca",
    "-pmixmca",
    "--pmixmca",
    "-omca",
    "--omca",
    "-genv",
    "--genv",
    "-env",
    "--env",
];

/// srun's short options that take no value (getopt letters without `:`); every other
/// letter takes one, joined (`-N4`) or as the next word.
/// <https://slurm.schedmd.com/srun.html>
const SRUN_SHORT_SWITCHES: &str = "EHhlOQsuVvXZ";

/// srun's long options that take no value, or one only when joined with `=`.
const SRUN_LONG_SWITCHES: [&str; 20] = [
    "label",
    "overcommit",
    "quiet",
    "unbuffered",
    "verbose",
    "exclusive",
    "pty",
    "hold",
    "disable-status",
    "no-allocate",
    "oversubscribe",
    "contiguous",
    "exact",
    "overlap",
    "multi-prog",
    "test-only",
    "preserve-env",
    "no-kill",
    "kill-on-bad-exit",
    "immediate",
];

/// One launcher invocation: the shell command it is in and where its options start.
/// Options are read from the command's tokens when asked for, not collected: a command
/// line of a million options costs a walk per question, and no copy of them.
struct Invocation<'a, 'e> {
    launcher: Launcher,
    command: &'a str,
    /// The index, among the command's words as the shell runs them ([`words`]), of the
    /// first word after the launcher.
    start: usize,
    env: &'a Env<'e>,
    /// The room for variables' values each walk of the command starts with (the same
    /// every walk, so every walk reads the same words), and the walk's own.
    room_start: usize,
    room: Cell<usize>,
    /// The command names more launchers than are read ([`NESTED_LAUNCHERS`]): one past
    /// them may start a job of any size.
    overflow: bool,
}

impl<'a> Invocation<'a, '_> {
    /// The command's words as the shell runs them, from the launcher's options on.
    fn words(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.room.set(self.room_start);
        words(self.command, self.env, &self.room).skip(self.start)
    }

    /// Whether `value` names a variable set from elsewhere (`valueFrom`), alone or after
    /// `=` in an option word: the shell splits what it holds into words.
    fn set_elsewhere(&self, value: &str) -> bool {
        value
            .find('$')
            .and_then(|at| variable(&value[at..]))
            .is_some_and(|name| matches!(self.env.get(name), Some(super::EnvValue::Elsewhere)))
    }

    /// Whether the launcher's options hold a word trainplace cannot read ([`UNREAD`]: an
    /// expansion it does not resolve, a variable set from elsewhere as an option or a
    /// value, one past the room): it may hold any option, so the size it starts is not
    /// known.
    fn unread(&self) -> bool {
        let mut unread = false;
        self.options(|name, _| unread |= name == UNREAD);
        unread
    }

    /// The value of the last option that names `long` (an argparse launcher also
    /// accepts a unique prefix of it).
    fn value(&self, long: &[&str]) -> Option<Option<&'a str>> {
        let mut found = None;
        self.options(|name, value| {
            if self.names(name, long) {
                found = Some(value);
            }
        });
        found
    }

    /// Each option before the first positional argument (the training script, whose
    /// own flags are not the launcher's), with its value when it has one.
    fn options(&self, mut each: impl FnMut(&str, Option<&'a str>)) {
        let mut tokens = self.words().peekable();
        while let Some(t) = tokens.next() {
            // A redirection may stand anywhere among a command's words; the shell takes
            // it out before the program runs.
            if let Some(target_follows) = redirection(t) {
                if target_follows {
                    tokens.next();
                }
                continue;
            }
            // A word the shell expands into words trainplace cannot read (`$@`, `$1`,
            // `${X:-...}`, a variable defined nowhere it can see) may be any options.
            if t.starts_with('$') {
                each(UNREAD, None);
                break;
            }
            if !t.starts_with('-') || t == "-" {
                break;
            }
            let (key, inline) = self.option(t);
            let value = match inline {
                Some(v) => Some(v),
                None if self.switch(key) => None,
                None => tokens.next_if(|next| !next.starts_with('-')),
            };
            // MPI's options of a key and a value (`--mca btl ^openib`, `-genv N V`)
            // take the next word too.
            if self.launcher == Launcher::Mpi
                && MPI_PAIRS.contains(&key)
                && tokens
                    .next()
                    .is_some_and(|w| w == UNREAD || self.set_elsewhere(w))
            {
                each(UNREAD, None);
                break;
            }
            // A value set from elsewhere is split by the shell too: it may hold options.
            if value.is_some_and(|v| v == UNREAD || self.set_elsewhere(v)) {
                each(UNREAD, None);
                break;
            }
            each(key, value);
        }
    }

    /// An option word's name, as [`Invocation::names`] matches it, and its value when
    /// written in the same word.
    fn option(&self, word: &'a str) -> (&'a str, Option<&'a str>) {
        if self.launcher == Launcher::Slurm
            && let Some(short) = getopt_short(word)
        {
            return short;
        }
        if self.launcher == Launcher::Horovod
            && let Some(hosts) = word.strip_prefix("-H").filter(|h| !h.is_empty())
            && !hosts.starts_with('=')
        {
            // argparse joins a one-letter option's value to it: `-Ha:4,b:4`.
            return ("H", Some(hosts));
        }
        let (name, inline) = match word.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (word, None),
        };
        // argparse options, and srun's (one letter after `-`, words after `--`), are
        // named without their dashes; MPI's keep them (`-np` is not `--np` everywhere).
        let key = if self.launcher == Launcher::Mpi {
            name
        } else {
            name.trim_start_matches('-')
        };
        (key, inline)
    }

    /// Whether an option takes no value, so the next word is not its value.
    fn switch(&self, key: &str) -> bool {
        let bare = key.trim_start_matches('-');
        match self.launcher {
            Launcher::Slurm if bare.len() == 1 => SRUN_SHORT_SWITCHES.contains(bare),
            Launcher::Slurm => SRUN_LONG_SWITCHES.contains(&bare),
            Launcher::Mpi => MPI_SWITCHES.contains(&bare) || SWITCHES.contains(&bare),
            _ => SWITCHES.contains(&bare),
        }
    }

    fn names(&self, given: &str, long: &[&str]) -> bool {
        let known: &[&str] = match self.launcher {
            Launcher::Torchrun => &TORCHRUN_OPTIONS,
            Launcher::DeepSpeed => &DEEPSPEED_OPTIONS,
            Launcher::Accelerate => &ACCELERATE_OPTIONS,
            Launcher::Horovod => &HOROVOD_OPTIONS,
            Launcher::Mpi
            | Launcher::Slurm
            | Launcher::LlamaFactory
            | Launcher::Swift
            | Launcher::Paddle
            | Launcher::Composer
            | Launcher::Fabric => {
                return long.contains(&given);
            }
        };
        if long.contains(&given) {
            return true;
        }
        // argparse: a prefix of exactly one option's names (spelling variants of one
        // option count once).
        let hits: Vec<&&str> = known
            .iter()
            .filter(|o| given.len() >= 2 && o.starts_with(given))
            .collect();
        !hits.is_empty() && hits.iter().all(|o| long.contains(o))
    }
}

/// Whether `word` is a shell redirection (`2>>/logs/err`, `>`, `&>out`, `<in`), and
/// whether its target is the next word (`>` alone). `None` for any other word.
/// <https://pubs.opengroup.org/onlinepubs/9699919799/utilities/V3_chap02.html#tag_18_07>
fn redirection(word: &str) -> Option<bool> {
    let rest = word.trim_start_matches(|c: char| c.is_ascii_digit());
    let rest = rest.strip_prefix('&').unwrap_or(rest);
    let op = [">>", ">&", ">|", "<<", "<&", "<>", ">", "<"]
        .into_iter()
        .find(|op| rest.starts_with(op))?;
    Some(rest.len() == op.len())
}

/// A grouped short-option word as srun's getopt reads it: switches first (`-l`), then
/// one letter that takes a value, joined to it (`-N4`, `-lN4`) or in the next word
/// (`-lN 4`). `None` for a word that is not such a group (`-N`, `--nodes`).
/// <https://slurm.schedmd.com/srun.html>
fn getopt_short(word: &str) -> Option<(&str, Option<&str>)> {
    let group = word
        .strip_prefix('-')
        .filter(|g| g.len() > 1 && !g.starts_with('-'))?;
    let at = group.find(|c| !SRUN_SHORT_SWITCHES.contains(c))?;
    let letter = group[at..].chars().next()?;
    let (key, rest) = group[at..].split_at(letter.len_utf8());
    Some((key, (!rest.is_empty()).then_some(rest)))
}

/// Whether the command line runs torchrun (or `torch.distributed.run`/`.launch`), the
/// one launcher that reads `PET_*`: elsewhere those variables are a decoy.
pub(super) fn runs_torchrun(line: &str, env: &Env<'_>) -> bool {
    invocations(line, env).any(|inv| inv.launcher == Launcher::Torchrun)
}

/// A container's `command` and `args` as one line for the readers here. No shell splits
/// a list element: each is one argument. So once an element names a launcher, its later
/// elements are that launcher's arguments, and what would read as more words or
/// commands inside one (`--log-dir "/logs/run 1"`, `--role "a;b"`,
/// `--launcher_args "--mca btl ^openib"`: whitespace, quotes, parentheses, `; | &`) is
/// joined into the one word (`_`); a `$(VAR)` reference stays for the kubelet's
/// expansion. Elements before a launcher (a `bash -c` string) are read as written.
pub(crate) fn argv_line(container: &serde_json::Value) -> String {
    let elements = || {
        ["command", "args"]
            .iter()
            .flat_map(|k| crate::read::json::items(container, &[k]))
            .filter_map(serde_json::Value::as_str)
    };
    let mut line = String::with_capacity(elements().map(|w| w.len() + 1).sum());
    let mut launched = false;
    // A shell's (or Python's) `-c` string, a launcher's too (`mpirun -np 2 bash -c
    // "torchrun ..."`), is read as the command line it is, the commands it holds
    // included; a shell's has its comments taken out.
    let mut interpreter: Option<bool> = None; // Some(is a shell) while in its options
    let (mut script, mut value) = (None::<bool>, false);
    for element in elements() {
        if !line.is_empty() {
            line.push(' ');
        }
        match script {
            Some(shell) => {
                let text = if shell {
                    without_comments(element)
                } else {
                    None
                };
                line.push_str(text.as_deref().unwrap_or(element));
                launched |= named(element).is_some();
            }
            None if launched => one_word(element, &mut line),
            None => {
                line.push_str(element);
                launched |= named(element).is_some();
            }
        }
        script = None;
        let base = element.rsplit('/').next().unwrap_or(element);
        match interpreter {
            _ if std::mem::take(&mut value) => {}
            Some(shell) if element.starts_with("--") => {
                // bash's long options; two take the next word.
                value = shell && matches!(element, "--rcfile" | "--init-file");
            }
            Some(shell) if element.len() > 1 && element.starts_with('-') => {
                let flags = &element[1..];
                if flags.contains('c') {
                    script = Some(shell);
                    interpreter = None;
                } else {
                    // `-o pipefail`, `-O extglob`: the next word is the option's.
                    value = shell && (flags.ends_with('o') || flags.ends_with('O'));
                }
            }
            _ => {
                interpreter = if SHELLS.contains(&base) {
                    Some(true)
                } else if base.starts_with("python") {
                    Some(false)
                } else {
                    None
                };
            }
        }
    }
    line
}

/// Shells whose `-c` string is a command line.
const SHELLS: [&str; 5] = ["bash", "sh", "dash", "zsh", "ash"];

/// `element` as one word: what a shell or the word splitting here would split at is
/// `_`, but for `$(...)` references.
fn one_word(element: &str, out: &mut String) {
    let mut reference = false;
    let mut prev = None;
    for c in element.chars() {
        let kept = match c {
            // An argument is no comment.
            '#' if prev.is_none() => '_',
            '(' if prev == Some('$') => {
                reference = true;
                c
            }
            ')' if reference => {
                reference = false;
                c
            }
            c if c.is_whitespace()
                || matches!(c, ';' | '|' | '&' | '"' | '\'' | '`' | '(' | ')') =>
            {
                '_'
            }
            c => c,
        };
        out.push(kept);
        prev = Some(c);
    }
}

/// Whether what a command line runs is a script trainplace cannot read: none at all
/// (the image's entrypoint), or a command that runs one: a shell given a file (`bash
/// train.sh`, also inside a `bash -c` string), a `.sh` or `./` path, `source`, `make`,
/// or a program named by a variable trainplace cannot read (`sh -c "$CMD"` with `CMD`
/// from a ConfigMap, `$(CMD)` the kubelet could not expand, `$1`), behind `exec`,
/// `env`, `tini --` or assignments. Variables are read as the shell reads them.
pub(super) fn runs_a_script(line: &str, env: &Env<'_>) -> bool {
    let room = Cell::new(EXPANDED_LIMIT);
    let mut any = false;
    for command in commands(line) {
        let mut words = words(command, env, &room).peekable();
        if words.peek().is_none() {
            continue;
        }
        any = true;
        if runs_a_script_file(words) {
            return true;
        }
    }
    !any
}

/// One command's words: whether the program it runs is a script file.
fn runs_a_script_file<'a>(mut words: impl Iterator<Item = &'a str>) -> bool {
    // The first word of a `-c` string, read as the command it runs.
    let mut pending = None;
    while let Some(w) = pending.take().or_else(|| words.next()) {
        let base = w.rsplit('/').next().unwrap_or(w);
        if matches!(base, "exec" | "env" | "tini" | "--" | "nohup")
            || w.split_once('=').is_some_and(|(n, _)| is_name(n))
        {
            continue;
        }
        if SHELLS.contains(&base) {
            // Its options, then a `-c` string (its words follow) or a file.
            let mut string = false;
            let next = loop {
                match words.next() {
                    Some(f) if f.starts_with('-') => string |= f.contains('c'),
                    next => break next,
                }
            };
            match next {
                Some(f) if string => pending = Some(f),
                Some(_) => return true,
                None => return false,
            }
            continue;
        }
        return matches!(base, "source" | "." | "make")
            || base.ends_with(".sh")
            || w.starts_with("./")
            // A program the shell takes from what trainplace cannot read.
            || w.starts_with('$');
    }
    false
}

/// The job size the launchers on a command line start, the largest if several do.
pub(super) fn size(line: &str, env: &Env<'_>, per_pod: u32) -> Option<JobSize> {
    invocations(line, env)
        .filter_map(|inv| invocation_size(&inv, env, per_pod))
        .reduce(JobSize::max)
}

fn invocation_size(inv: &Invocation<'_, '_>, env: &Env<'_>, per_pod: u32) -> Option<JobSize> {
    let standalone = || {
        inv.value(&["standalone"]).is_some() || env.literal("PET_STANDALONE").is_some_and(truthy)
    };
    // A torchrun that runs standalone is one node whatever else it is given; any other
    // launcher given options trainplace cannot read starts a job of unknown size.
    if inv.launcher == Launcher::Torchrun && standalone() {
        return Some(JobSize::Pods(1));
    }
    if inv.unread() || inv.overflow {
        return Some(JobSize::Several);
    }
    match inv.launcher {
        Launcher::Torchrun => {
            // torchrun reads each option from the command line, else from `PET_<NAME>`,
            // else its default: one node.
            if let Some(v) = inv.value(&["nnodes"]) {
                return Some(v.map_or(JobSize::Several, |v| node_count(v, env)));
            }
            // Its default is one node; what the trainer's env says is read then.
            env_nodes(env, "PET_NNODES")
        }
        Launcher::DeepSpeed => {
            // An elastic job grows to `--max_elastic_nodes`.
            let elastic = inv
                .value(&["max_elastic_nodes"])
                .map(|v| v.map_or(JobSize::Several, |v| count(v, env)))
                .filter(|n| *n != JobSize::Pods(u32::MAX));
            if let Some(n) = elastic.filter(|n| n.multi_pod()) {
                return Some(n);
            }
            if let Some(v) = inv.value(&["num_nodes"]) {
                let n = v.map_or(JobSize::Several, |v| count(v, env));
                // -1 (the default) means every host of the hostfile.
                return Some(if n == JobSize::Pods(u32::MAX) {
                    JobSize::Several
                } else {
                    n
                });
            }
            if inv.value(&["force_multi"]).is_some() || inv.value(&["node_rank"]).is_some() {
                return Some(JobSize::Several);
            }
            let Some(include) = inv.value(&["include", "i"]) else {
                // A hostfile given and no filter: every host in it.
                return inv.value(&["hostfile", "H"]).map(|_| JobSize::Several);
            };
            let hosts = include?.split('@').count();
            Some(JobSize::Pods(u32::try_from(hosts).unwrap_or(u32::MAX)))
        }
        Launcher::Accelerate => {
            if let Some(v) = inv.value(&["num_machines", "num-machines"]) {
                return Some(v.map_or(JobSize::Several, |v| count(v, env)));
            }
            // A machine past the first (its count in a `--config_file`) is one of several.
            let rank = inv.value(&["machine_rank", "machine-rank"]).flatten();
            if rank.is_some_and(|r| r.trim() != "0") {
                return Some(JobSize::Several);
            }
            let procs = inv.value(&["num_processes", "num-processes"])??;
            Some(per_pods(count(procs, env), per_pod, None))
        }
        Launcher::Horovod => horovod_size(inv, env, per_pod),
        Launcher::LlamaFactory => {
            // launcher.py: torchrun when forced (its own reading of a switch: `true`,
            // `y` or `1`, any case), for Megatron (`USE_MCA`, `USE_MEGATRON_BRIDGE`), or
            // over several GPUs; elastic (`RDZV_ID`) up to `MAX_NNODES`.
            // https://github.com/hiyouga/LLaMA-Factory/blob/main/src/llamafactory/launcher.py
            let on = |k: &str| env.literal(k).is_some_and(enabled);
            let torchrun = ["FORCE_TORCHRUN", "USE_MCA", "USE_MEGATRON_BRIDGE"]
                .into_iter()
                .any(on)
                || per_pod > 1;
            if !torchrun {
                return Some(JobSize::Pods(1));
            }
            let elastic = env
                .get("RDZV_ID")
                .and_then(|_| env_nodes(env, "MAX_NNODES"));
            [env_nodes(env, "NNODES"), elastic]
                .into_iter()
                .flatten()
                .reduce(JobSize::max)
                .or(Some(JobSize::Pods(1)))
        }
        Launcher::Composer => {
            let world = inv.value(&["world_size"])?;
            let per_node = inv
                .value(&["n", "nproc"])
                .flatten()
                .and_then(|v| v.parse().ok());
            Some(world.map_or(JobSize::Several, |w| {
                per_pods(count(w, env), per_pod, per_node)
            }))
        }
        Launcher::Fabric => {
            let v = inv.value(&["num-nodes", "num_nodes"])?;
            Some(v.map_or(JobSize::Several, |v| count(v, env)))
        }
        Launcher::Swift => Some(env_nodes(env, "NNODES").unwrap_or(JobSize::Pods(1))),
        Launcher::Paddle => {
            if let Some(v) = inv.value(&["nnodes"]) {
                return Some(v.map_or(JobSize::Several, |v| node_count(v, env)));
            }
            if let Some(ips) = inv.value(&["ips"]) {
                return Some(ips.map_or(JobSize::Several, host_list));
            }
            env_nodes(env, "PADDLE_NNODES")
        }
        Launcher::Mpi => mpi_size(inv, env, per_pod),
        Launcher::Slurm => {
            if let Some(v) = inv.value(&["N", "nodes"]) {
                return Some(v.map_or(JobSize::Several, |v| slurm_nodes(v, env)));
            }
            let procs = inv.value(&["n", "ntasks"])??;
            Some(per_pods(count(procs, env), per_pod, None))
        }
    }
}

/// Env that names the hostfile an MPI launcher reads when it is given none.
const MPI_HOSTFILE_ENV: [&str; 3] = [
    "OMPI_MCA_orte_default_hostfile",
    "HYDRA_HOST_FILE",
    "I_MPI_HYDRA_HOST_FILE",
];

/// App contexts of one MPI command line read past the first; more is a job of unknown
/// size (each context is a walk of the command).
const MPI_CONTEXTS: usize = 16;

/// mpirun/mpiexec: the pods of each app context (`mpirun -np 1 a : -np 15 b`, Open MPI's
/// and hydra's MPMD form), added up. A context's host list, else its process count over
/// the pod's accelerators (or `-N` per node); a line of several contexts where one
/// names no count, or of a hostfile and no count (every slot of every host in it), is
/// of unknown size.
/// <https://docs.open-mpi.org/en/v5.0.x/man-openmpi/man1/mpirun.1.html>
fn mpi_size(inv: &Invocation<'_, '_>, env: &Env<'_>, per_pod: u32) -> Option<JobSize> {
    let one = |inv: &Invocation<'_, '_>| -> Option<JobSize> {
        // Every host list given: Open MPI joins repeated `--host` options into one.
        let mut hosts: Vec<&str> = Vec::new();
        inv.options(|name, value| {
            if inv.names(name, &["-H", "--host", "-host", "--hosts", "-hosts"])
                && let Some(v) = value
            {
                hosts.push(v);
            }
        });
        if !hosts.is_empty() {
            return Some(host_list(&hosts.join(",")));
        }
        // Processes per node: Open MPI's `-N`/`--npernode` and `--map-by ppr:N:node`,
        // hydra's `-ppn`/`-perhost`.
        let ppr = inv
            .value(&["--map-by", "-map-by"])
            .flatten()
            .and_then(|v| v.strip_prefix("ppr:"))
            .and_then(|v| v.split_once(':'))
            .filter(|(_, unit)| unit.starts_with("node"))
            .map(|(n, _)| n);
        let per_node = inv
            .value(&["-N", "--npernode", "-npernode", "-ppn", "-perhost"])
            .flatten()
            .or(ppr)
            .and_then(|v| v.parse().ok());
        if let Some(procs) = inv.value(&["-np", "-n", "--np", "--n", "-c"]) {
            return Some(procs.map_or(JobSize::Several, |p| {
                per_pods(count(p, env), per_pod, per_node)
            }));
        }
        let hostfile = inv.value(&[
            "--hostfile",
            "-hostfile",
            "--machinefile",
            "-machinefile",
            "-f",
            "--default-hostfile",
        ]);
        // The MPI Operator names the hostfile in env for each implementation, and mpirun
        // with no count runs on every slot of it.
        // https://github.com/kubeflow/mpi-operator/blob/master/pkg/controller/mpi_job_controller.go
        let from_env = MPI_HOSTFILE_ENV.iter().any(|k| env.get(k).is_some());
        (hostfile.is_some() || from_env).then_some(JobSize::Several)
    };
    let starts: Vec<usize> = inv
        .words()
        .enumerate()
        .filter(|(_, w)| *w == ":")
        .map(|(i, _)| inv.start + i + 1)
        .take(MPI_CONTEXTS + 1)
        .collect();
    let first = one(inv);
    if starts.is_empty() {
        return first;
    }
    if starts.len() > MPI_CONTEXTS {
        return Some(JobSize::Several);
    }
    let mut total = first.unwrap_or(JobSize::Several);
    for start in starts {
        let context = Invocation {
            start,
            room: Cell::new(inv.room_start),
            ..*inv
        };
        total = match (total, one(&context)) {
            (JobSize::Pods(a), Some(JobSize::Pods(b))) => JobSize::Pods(a.saturating_add(b)),
            _ => JobSize::Several,
        };
    }
    Some(total)
}

/// The node count an env variable gives a launcher (`N`, or an elastic `MIN:MAX`): a
/// count set from elsewhere is several nodes; `None` when it is not set.
fn env_nodes(env: &Env<'_>, name: &str) -> Option<JobSize> {
    match env.get(name)? {
        super::EnvValue::Literal(v) => Some(node_count(v, env)),
        super::EnvValue::Elsewhere => Some(JobSize::Several),
    }
}

/// horovodrun: its host list, else its process count (`-np`, `--num-proc`; an elastic
/// job's `--max-np` bounds it) over the pod's accelerators or `--slots-per-host`.
/// argparse also takes `-n` for `-np`, the one option it prefixes.
fn horovod_size(inv: &Invocation<'_, '_>, env: &Env<'_>, per_pod: u32) -> Option<JobSize> {
    if let Some(Some(hosts)) = inv.value(&["H", "hosts"]) {
        return Some(host_list(hosts));
    }
    let per_node = inv
        .value(&["slots-per-host"])
        .flatten()
        .and_then(|v| v.parse().ok());
    let procs = [
        inv.value(&["np", "n", "num-proc"]),
        inv.value(&["max-np", "max-num-proc"]),
    ]
    .into_iter()
    .flatten()
    .map(|v| v.map_or(JobSize::Several, |v| count(v, env)))
    .reduce(JobSize::max)?;
    Some(per_pods(procs, per_pod, per_node))
}

/// LLaMA-Factory's reading of a switch variable.
fn enabled(v: &str) -> bool {
    matches!(v.trim().to_ascii_lowercase().as_str(), "true" | "y" | "1")
}

fn truthy(v: &str) -> bool {
    matches!(v.trim(), "1" | "true" | "True" | "TRUE" | "yes")
}

/// An assignment a shell command line makes, and whether the shell makes it on every
/// run before the line's first launcher reads its variables ([`sequence::certain`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Assigned<'a> {
    pub name: &'a str,
    pub value: &'a str,
    pub certain: bool,
}

/// The variables a shell command line assigns, in order: `export A=1 B=2`, `env A=1 cmd`,
/// and `A=1 cmd` (assignments before a command's first word).
pub(super) fn assignments(line: &str) -> impl Iterator<Item = Assigned<'_>> {
    // The first command that runs a launcher as its program; failing that, the first
    // that names one (a launcher behind a wrapper trainplace does not know).
    let mut launch = sequence::Launch::find(line, runs_launcher);
    if !launch.found() {
        launch = sequence::Launch::find(line, |text| tokens(text).any(|w| named(w).is_some()));
    }
    sequence::pieces(line).enumerate().flat_map(move |(i, p)| {
        let certain = launch.certain(i, &p);
        let made = command_assignments(p.text, launch.found());
        // A program's own assignments are made after its words are expanded: the
        // program's environment has them, its `$NAME` words the value before.
        let expanded = if made.iter().any(|(_, _, own)| *own) {
            referenced(p.text)
        } else {
            HashSet::new()
        };
        made.into_iter().map(move |(name, value, own)| Assigned {
            name,
            value,
            certain: certain && !(own && expanded.contains(name)),
        })
    })
}

/// Whether a command runs a launcher as its program: after assignments, `env`, `sudo`,
/// `exec` and the like with their options, as a shell's `-c` script, or as `python -m`'s
/// module or script; not one that merely names a launcher (`pip install deepspeed`,
/// `echo torchrun`, `which torchrun`, `python -c "import deepspeed"`, `accelerate env`).
fn runs_launcher(command: &str) -> bool {
    let words: Vec<&str> = tokens(command).collect();
    let mut i = 0;
    while let Some(&w) = words.get(i) {
        let base = w.rsplit('/').next().unwrap_or(w);
        let wrapper = w.split_once('=').is_some_and(|(n, _)| is_name(n))
            || RESERVED.contains(&w)
            || PREFIXES.contains(&w)
            || WRAPPERS.contains(&base)
            || w.starts_with('-')
            || w.trim_end_matches(['s', 'm', 'h']).parse::<f64>().is_ok();
        if wrapper {
            i += 1;
            continue;
        }
        let next = words.get(i + 1).copied();
        if SHELLS.contains(&base) {
            // A shell runs its `-c` script; a script file is not read here.
            match words[i + 1..].iter().position(|x| sequence::is_c_switch(x)) {
                Some(at) => {
                    i += at + 2;
                    continue;
                }
                None => return false,
            }
        }
        if base.starts_with("python") {
            return words[i + 1..]
                .iter()
                .take_while(|x| **x != "-c")
                .any(|x| named(x).is_some());
        }
        return match named(w) {
            Some(Named::Launcher(_)) => true,
            Some(Named::AccelerateCli) => next == Some("launch"),
            Some(Named::TuneCli | Named::FabricCli | Named::LightningCli) => next == Some("run"),
            Some(Named::LlamaFactoryCli) => next == Some("train"),
            Some(Named::SwiftCli) => next.is_some_and(|n| ["sft", "pt", "rlhf"].contains(&n)),
            None => false,
        };
    }
    false
}

/// Programs that run the command after them (with their own options and, for
/// `timeout`, a duration).
const WRAPPERS: [&str; 12] = [
    "exec",
    "nohup",
    "time",
    "nice",
    "setsid",
    "stdbuf",
    "numactl",
    "taskset",
    "timeout",
    "tini",
    "dumb-init",
    "--",
];

/// The names a command refers to as `$NAME` or `${NAME...}`. Linear in the command.
fn referenced(command: &str) -> HashSet<&str> {
    command
        .split('$')
        .skip(1)
        .filter_map(|rest| {
            let (name, _) = leading_name(rest.strip_prefix('{').unwrap_or(rest));
            is_name(name).then_some(name)
        })
        .collect()
}

/// The longest run of name characters `text` starts with, and what follows it.
pub(super) fn leading_name(text: &str) -> (&str, &str) {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    text.split_at(end)
}

/// One command's assignments that reach a launcher. An assignment sets a variable at a
/// command's start (after reserved words: `then export N=4`), after `export`,
/// `declare -x` and the like, or alone; one before a program (`N=1 prep`, `env -u X N=1
/// prep`, `sudo -E N=1 prep`) is that program's only (POSIX XCU 2.9.1), so it counts
/// only when the command runs a launcher or a shell, or when the line runs no launcher
/// (`WORLD_SIZE=8 python train.py`: the trainer reads it); never as the argument of
/// another command (`echo export N=1`). A shell's `-c` string starts a command again.
/// Each comes with whether it is a program's own (before its first word), which the
/// program's environment holds but its own `$NAME` words do not see.
fn command_assignments(command: &str, line_launches: bool) -> Vec<(&str, &str, bool)> {
    let words: Vec<&str> = tokens(command).collect();
    // The last word that names a launcher: a program before it may run one.
    let last_launcher = words.iter().rposition(|w| named(w).is_some());
    let mut out = Vec::new();
    // `${N:=4}` and `${N=4}` assign N wherever they are expanded.
    out.extend(default_assigned(command).map(|n| (n, UNSETTLED, false)));
    let mut pending: Vec<(&str, &str, bool)> = Vec::new();
    let (mut open, mut persistent, mut skip_value) = (true, false, false);
    for (i, &w) in words.iter().enumerate() {
        if std::mem::take(&mut skip_value) {
            continue;
        }
        if open && let Some((n, v)) = w.split_once('=') {
            // `N+=6` appends: a value trainplace does not compute.
            let (n, v) = match n.strip_suffix('+') {
                Some(n) => (n, UNSETTLED),
                None => (n, v),
            };
            if is_name(n) {
                if persistent {
                    out.push((n, v, false));
                } else {
                    pending.push((n, v, false));
                }
                continue;
            }
        }
        if open && EXPORTERS.contains(&w) {
            persistent = true;
            continue;
        }
        if open && (PREFIXES.contains(&w) || RESERVED.contains(&w)) {
            continue;
        }
        if open && w.starts_with('-') && w != "-c" {
            // Options of env, sudo, declare; some take the next word.
            skip_value = matches!(w, "-u" | "-C" | "-g" | "-S");
            continue;
        }
        // A program, or a shell's `-c` (its string's commands follow).
        let reaches = !line_launches
            || w == "-c"
            || SHELLS.contains(&w.rsplit('/').next().unwrap_or(w))
            || last_launcher.is_some_and(|l| l >= i);
        if reaches {
            // The program's own: marked so.
            out.extend(pending.iter().map(|&(n, v, _)| (n, v, true)));
        }
        pending.clear();
        // Builtins that set the variables they name to values trainplace does not read.
        if open {
            out.extend(
                setters(w, &words[i + 1..])
                    .into_iter()
                    .map(|n| (n, UNSETTLED, false)),
            );
        }
        // `eval` runs its words as a command of this shell.
        open = w == "-c" || w == "eval";
        persistent = false;
    }
    // Assignments alone on a command set the shell's variables.
    out.append(&mut pending);
    out
}

/// The value [`command_assignments`] gives a variable set to what trainplace does not
/// compute (`N+=6`, `read N`, `printf -v N`, `unset N`, `${N:=4}`): it unsettles the
/// variable. No shell word holds a NUL.
pub(super) const UNSETTLED: &str = "\0";

/// The variables builtin `program` sets from `args`: `read`'s and `mapfile`'s names,
/// `printf -v`'s, `unset`'s (empty for any other program).
fn setters<'a>(program: &str, args: &[&'a str]) -> Vec<&'a str> {
    let names = |skip_values: &[&str]| {
        let mut skip = false;
        let mut out = Vec::new();
        for &a in args {
            if std::mem::take(&mut skip) {
                continue;
            }
            if a.starts_with('-') {
                skip = skip_values.contains(&a);
            } else if is_name(a) {
                out.push(a);
            }
        }
        out
    };
    match program {
        "read" | "mapfile" | "readarray" => names(&[
            "-p", "-d", "-n", "-N", "-t", "-u", "-i", "-a", "-C", "-c", "-O", "-s",
        ]),
        "unset" => names(&[]),
        "printf" => args
            .iter()
            .position(|a| *a == "-v")
            .and_then(|at| args.get(at + 1))
            .filter(|n| is_name(n))
            .map_or_else(Vec::new, |n| vec![*n]),
        _ => Vec::new(),
    }
}

/// The names a command assigns through `${N:=word}` or `${N=word}`.
fn default_assigned(command: &str) -> impl Iterator<Item = &str> {
    command.split("${").skip(1).filter_map(|rest| {
        let (name, after) = leading_name(rest);
        (is_name(name) && (after.starts_with(":=") || after.starts_with('='))).then_some(name)
    })
}

/// Commands whose assignments set (and export) the shell's variables.
/// (`local` only inside a function, whose body is not top level: at the top it fails
/// and assigns nothing, so it is not one.) `let` assigns arithmetic expressions.
const EXPORTERS: [&str; 5] = ["export", "declare", "typeset", "readonly", "let"];

/// Commands that pass the assignments after them to the program they run.
const PREFIXES: [&str; 2] = ["env", "sudo"];

/// Shell reserved words that may stand before a command (`then export N=4`, `do
/// N=4 torchrun ...`): the command starts after them.
const RESERVED: [&str; 10] = [
    "then", "do", "else", "elif", "if", "while", "until", "{", "!", "time",
];

/// A shell variable name: a letter or `_`, then letters, digits and `_`.
pub(super) fn is_name(n: &str) -> bool {
    n.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The shell commands of a line: split at newlines and the control operators `;`,
/// `|`, `&` (and so `&&`, `||`).
fn commands(line: &str) -> impl Iterator<Item = &str> {
    line.split(['\n', ';', '|', '&'])
}

/// Split a command line into shell commands, and each into tokens; find launchers.
fn invocations<'a, 'e>(
    line: &'a str,
    env: &'a Env<'e>,
) -> impl Iterator<Item = Invocation<'a, 'e>> {
    // Variables' values read as words, over the whole line (see `resolved`).
    let room = Cell::new(EXPANDED_LIMIT);
    commands(line).flat_map(move |command| {
        let room_start = room.get();
        // A launcher may run another in the same command (`mpirun -np 2 bash -c
        // "torchrun ..."`, `srun torchrun ...`): each is read, up to a few.
        let mut found: Vec<Invocation<'a, 'e>> = Vec::new();
        let mut from = 0;
        loop {
            let walk = Cell::new(room_start);
            let Some((launcher, start)) = launcher_at(command, env, &walk, from) else {
                break;
            };
            if found.len() == NESTED_LAUNCHERS {
                if let Some(last) = found.last_mut() {
                    last.overflow = true;
                }
                break;
            }
            found.push(Invocation {
                launcher,
                command,
                start,
                env,
                room_start,
                room: Cell::new(room_start),
                overflow: false,
            });
            from = start;
        }
        // What one walk of the command takes is taken from the line's room once.
        if let Some(inv) = found.first() {
            inv.words().for_each(drop);
            room.set(inv.room.get());
        }
        found
    })
}

/// Launchers read in one shell command, one run by another.
const NESTED_LAUNCHERS: usize = 4;

/// A command's words: split at whitespace, quotes and backquotes (so a quoted
/// `bash -c` string is read as the commands it holds), and at `(` and `)`, so a
/// subshell `( ... )` or a substitution `$( ... )` opens onto the command inside it,
/// while the command it sits in goes on after it. An unexpanded `$(VAR)` reference
/// reads as the word `$`, a count trainplace cannot derive.
fn tokens(command: &str) -> impl Iterator<Item = &str> {
    command
        .split(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '(' | ')'))
        .filter(|t| !t.is_empty())
}

/// The shell rewriting of a command line that comes before its words are read, as the
/// POSIX shell does it: a backslash-newline (or backslash-CRLF) is removed, joining
/// the lines; a backslash before any other character is removed and that character
/// kept as written (`--nn\odes` is `--nnodes`); the quotes around part of a word are
/// removed, joining it (`torch"run"`, `"--nnodes"=4`), and so is the `$` of `$'...'`
/// (ANSI-C quoting) and `$"..."`. A quote at the edge of a word (beside whitespace or
/// an end of the line) stays, and [`tokens`] splits at it, so a quoted `bash -c`
/// string is still read as commands. Linear in the line; a line with nothing to remove
/// is returned as it is, not copied.
/// <https://pubs.opengroup.org/onlinepubs/9699919799/utilities/V3_chap02.html#tag_18_02>
pub(super) fn shell_text(line: &str) -> Cow<'_, str> {
    match ansi_c(line) {
        Some(decoded) => Cow::Owned(shell_words(&decoded).into_owned()),
        None => shell_words(line),
    }
}

/// `line` with its ANSI-C quoted strings (`$'...'`, bash's) decoded, `None` when it has
/// none: `\xHH` and octal `\NNN` are the bytes they name (`$'\x2d\x2dnnodes=4'` is
/// `--nnodes=4`), `\n` and `\t` whitespace, another escaped character itself. The
/// decoded text stays single-quoted.
/// <https://www.gnu.org/software/bash/manual/html_node/ANSI_002dC-Quoting.html>
fn ansi_c(line: &str) -> Option<String> {
    if !line.contains("$'") {
        return None;
    }
    crate::budget::draw_len(ARGS, line.len());
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find("$'") {
        out.push_str(&rest[..at]);
        out.push('\'');
        let body = &rest[at + 2..];
        let mut chars = body.char_indices().peekable();
        let mut end = body.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\'' => {
                    end = i + 1;
                    break;
                }
                '\\' => {
                    let Some((_, e)) = chars.next() else { break };
                    let digits = |chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>,
                                  radix: u32,
                                  most: usize,
                                  first: Option<char>| {
                        let mut v: u32 = first.and_then(|f| f.to_digit(radix)).unwrap_or(0);
                        let mut n = usize::from(first.is_some());
                        while n < most
                            && let Some(&(_, d)) = chars.peek()
                            && let Some(x) = d.to_digit(radix)
                        {
                            v = v * radix + x;
                            n += 1;
                            chars.next();
                        }
                        char::from_u32(v).unwrap_or('?')
                    };
                    out.push(match e {
                        'x' => digits(&mut chars, 16, 2, None),
                        '0'..='7' => digits(&mut chars, 8, 3, Some(e)),
                        'n' => '\n',
                        't' => '\t',
                        other => other,
                    });
                }
                c => out.push(c),
            }
        }
        out.push('\'');
        rest = &body[end.min(body.len())..];
    }
    out.push_str(rest);
    Some(out)
}

/// A shell script without its comments, `None` when it has none or when it holds what
/// this reading does not follow (a `$( )` or backquoted substitution, a here-document,
/// a `${ }` expansion, ANSI-C quoting: each opens its own quoting), where it is read
/// whole: a word that starts with `#` outside quotes, after a blank (space, tab, newline)
/// or an operator, begins a comment that runs to the end of its line (POSIX XCU 2.3,
/// rule 9), so a commented-out launcher line is not read, nor a commented-out export.
/// Comments are found before quotes and escapes are removed: an escaped quote (`"a \"
/// # b"`) is no quote. Only a shell's own `-c` script is read so, never an argument.
/// <https://pubs.opengroup.org/onlinepubs/9699919799/utilities/V3_chap02.html#tag_18_03>
fn without_comments(text: &str) -> Option<String> {
    if !text.contains('#')
        || ["$(", "`", "<<", "${", "$'"]
            .iter()
            .any(|t| text.contains(t))
    {
        return None;
    }
    let mut out: Option<String> = None;
    let (mut single, mut double) = (false, false);
    let mut prev: Option<char> = None;
    let mut kept_from = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            // An escaped character is itself, a quote or a `#` included (but inside
            // single quotes, where a backslash is itself).
            '\\' if !single => {
                prev = chars.next().map(|(_, e)| e);
                continue;
            }
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single
                && !double
                && prev.is_none_or(|p| {
                    matches!(p, ' ' | '\t' | '\n' | ';' | '&' | '|' | '(' | ')')
                }) =>
            {
                let kept = out.get_or_insert_with(|| {
                    crate::budget::draw_len(ARGS, text.len());
                    String::with_capacity(text.len())
                });
                kept.push_str(&text[kept_from..i]);
                // To the end of the line; the newline stays and ends the command.
                let end = text[i..].find('\n').map_or(text.len(), |n| i + n);
                kept_from = end;
                while chars.next_if(|&(j, _)| j < end).is_some() {}
                prev = None;
                continue;
            }
            _ => {}
        }
        prev = Some(c);
    }
    out.map(|mut kept| {
        kept.push_str(&text[kept_from..]);
        kept
    })
}

/// [`shell_text`]'s rewriting of words, before comments are taken out.
fn shell_words(line: &str) -> Cow<'_, str> {
    let bytes = line.as_bytes();
    let mut out: Option<String> = None;
    // Where the bytes not yet copied to `out` start, and the last byte kept.
    let (mut kept_from, mut prev) = (0, None);
    let mut i = 0;
    while i < bytes.len() {
        let removed = removed_at(bytes, i, prev);
        if removed == 0 {
            prev = Some(bytes[i]);
            i += 1;
            continue;
        }
        let text = out.get_or_insert_with(|| {
            crate::budget::draw_len(ARGS, line.len());
            String::with_capacity(line.len())
        });
        text.push_str(&line[kept_from..i]);
        let escape = bytes[i] == b'\\' && removed == 1;
        i += removed;
        kept_from = i;
        if escape && i < bytes.len() {
            // The escaped character is kept as written, whatever it is.
            prev = Some(bytes[i]);
            i += 1;
        }
    }
    match out {
        Some(mut text) => {
            text.push_str(&line[kept_from..]);
            Cow::Owned(text)
        }
        None => Cow::Borrowed(line),
    }
}

/// How many bytes the shell removes at `i` (0: the byte is kept). `prev` is the last
/// byte kept before it.
fn removed_at(bytes: &[u8], i: usize, prev: Option<u8>) -> usize {
    let next = bytes.get(i + 1).copied();
    match bytes[i] {
        b'\\' => match (next, bytes.get(i + 2)) {
            (Some(b'\n'), _) => 2,
            (Some(b'\r'), Some(b'\n')) => 3,
            // An escaped control operator is a word, not an operator (`find -exec rm {}
            // \;`): kept as written, so no reading splits the command there.
            (Some(b';' | b'|' | b'&'), _) => 0,
            _ => 1,
        },
        b'$' if matches!(next, Some(b'\'' | b'"')) => 1,
        b'"' | b'\'' => {
            // A control operator ends a word as whitespace does: `echo "a; b";` keeps
            // its closing quote, so the string stays one.
            let inside = |b: Option<u8>| {
                b.is_some_and(|b| !b.is_ascii_whitespace() && !matches!(b, b';' | b'|' | b'&'))
            };
            usize::from(inside(prev) && inside(next))
        }
        _ => 0,
    }
}

/// What a word of a command names: a launcher, whose options follow it, or the
/// `accelerate` command line, a launcher when `launch` follows, or torchtune's `tune`,
/// which runs torchrun with its options when `run` follows (`tune run --nnodes 4
/// --nproc_per_node 8 RECIPE --config ...`; <https://docs.pytorch.org/torchtune/stable/tune_cli.html>).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Named {
    Launcher(Launcher),
    AccelerateCli,
    TuneCli,
    LlamaFactoryCli,
    SwiftCli,
    FabricCli,
    LightningCli,
}

/// The launcher a word names: a program (its path's last part), a Python module
/// (`torch.distributed.run`, as `-m`'s next word or joined to it), or the module's
/// file run as a script.
fn named(word: &str) -> Option<Named> {
    let word = python_module(word).unwrap_or(word);
    if let Some(found) = module_script(word) {
        return Some(found);
    }
    let base = word.rsplit('/').next().unwrap_or(word);
    // Distributions install MPI's launchers under their implementation's name too
    // (Debian's `mpirun.openmpi`, `mpiexec.mpich`, through alternatives).
    let mpi = ["mpirun", "mpiexec", "orterun", "prterun"].iter().any(|m| {
        base.strip_prefix(m)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
    });
    if mpi {
        return Some(Named::Launcher(Launcher::Mpi));
    }
    let launcher = match base {
        // DLRover's `dlrover-run` takes torchrun's options (a superset of them).
        // <https://github.com/intelligent-machine-learning/dlrover/blob/master/docs/tutorial/torch_elastic_job.md>
        "torchrun" | "torch.distributed.run" | "torch.distributed.launch" | "dlrover-run" => {
            Launcher::Torchrun
        }
        // DeepSpeed installs `deepspeed`, `ds` and `deepspeed.pt`, all its runner.
        // <https://github.com/deepspeedai/DeepSpeed/blob/v0.16.0/setup.py>
        "deepspeed" | "ds" | "deepspeed.pt" | "deepspeed.launcher.runner" => Launcher::DeepSpeed,
        "paddle.distributed.launch" | "fleetrun" => Launcher::Paddle,
        // ms-swift's `swift` and `megatron` commands run torchrun over NNODES.
        "swift" | "megatron" => return Some(Named::SwiftCli),
        "composer" => Launcher::Composer,
        "fabric" => return Some(Named::FabricCli),
        "lightning" => return Some(Named::LightningCli),
        "accelerate" | "accelerate.commands.accelerate_cli" => return Some(Named::AccelerateCli),
        "tune" | "torchtune._cli.tune" => return Some(Named::TuneCli),
        "llamafactory-cli" | "lmf" => return Some(Named::LlamaFactoryCli),
        "accelerate-launch" | "accelerate.commands.launch" => Launcher::Accelerate,
        "horovodrun" | "horovod.runner.launch" => Launcher::Horovod,
        "srun" => Launcher::Slurm,
        _ => return None,
    };
    Some(Named::Launcher(launcher))
}

/// CPython's switches that take no value (`-u`, `-B`, `-O`, ...): they may come before
/// `-m` in one word.
/// <https://docs.python.org/3/using/cmdline.html>
const PYTHON_SWITCHES: &str = "bBdEhiIOPqRsSuvVx?";

/// The module of a CPython word that joins it to `-m`, after any switches
/// (`-mtorch.distributed.run`, `-umtorch.distributed.run`): CPython reads the rest of
/// the word as `-m`'s value. <https://docs.python.org/3/using/cmdline.html>
fn python_module(word: &str) -> Option<&str> {
    let group = word.strip_prefix('-').filter(|g| !g.starts_with('-'))?;
    let at = group.find(|c| !PYTHON_SWITCHES.contains(c))?;
    group[at..]
        .strip_prefix('m')
        .filter(|module| !module.is_empty())
}

/// Launcher modules whose file runs the launcher when run as a script
/// (`python .../site-packages/torch/distributed/run.py`: each ends in
/// `if __name__ == "__main__"`).
const MODULE_SCRIPTS: [(&str, Named); 6] = [
    (
        "torch/distributed/run.py",
        Named::Launcher(Launcher::Torchrun),
    ),
    (
        "torch/distributed/launch.py",
        Named::Launcher(Launcher::Torchrun),
    ),
    (
        "deepspeed/launcher/runner.py",
        Named::Launcher(Launcher::DeepSpeed),
    ),
    (
        "accelerate/commands/launch.py",
        Named::Launcher(Launcher::Accelerate),
    ),
    (
        "accelerate/commands/accelerate_cli.py",
        Named::AccelerateCli,
    ),
    (
        "horovod/runner/launch.py",
        Named::Launcher(Launcher::Horovod),
    ),
];

/// The launcher whose module file a path names (the path ends in the package's own
/// directories, so a user's `launch.py` is not one).
fn module_script(word: &str) -> Option<Named> {
    MODULE_SCRIPTS
        .iter()
        .find(|(file, _)| {
            word.strip_suffix(file)
                .is_some_and(|dir| dir.is_empty() || dir.ends_with('/'))
        })
        .map(|&(_, named)| named)
}

/// A word that is a shell variable's value (`$LAUNCH`, `${LAUNCH}`): the variable's name.
fn variable(word: &str) -> Option<&str> {
    let name = word.strip_prefix('$')?;
    let name = name
        .strip_prefix('{')
        .and_then(|n| n.strip_suffix('}'))
        .unwrap_or(name);
    is_name(name).then_some(name)
}

/// A word that stands for a variable trainplace cannot read: one set from elsewhere
/// (`valueFrom`), or past the room for values on one line.
const UNREAD: &str = "$";

/// A word as the shell runs it: a variable's value from the command line's own
/// assignments or the container's env (the words it splits into); [`UNREAD`] for one
/// set from elsewhere or too long to read; else the word as written (a variable defined
/// nowhere trainplace sees, which the image may define). Each value read is drawn from the review's
/// budget, and from `room`: past [`EXPANDED_LIMIT`] bytes of values on one line (what
/// Linux execs in one argument) a value is not read, so a long value named by every
/// command of a long line is not read again and again.
fn resolved<'s>(word: &'s str, env: &'s Env<'_>, room: &Cell<usize>) -> &'s str {
    let Some(name) = variable(word) else {
        return word;
    };
    match env.get(name) {
        // Defined nowhere trainplace sees (the image may define it): as written.
        None => word,
        Some(super::EnvValue::Elsewhere) => UNREAD,
        Some(super::EnvValue::Literal(value)) => {
            let fits = value.len() <= room.get();
            if fits && crate::budget::draw_len(ARGS, value.len()) {
                room.set(room.get() - value.len());
                value
            } else {
                UNREAD
            }
        }
    }
}

/// A command's words as the shell runs them: each word that is a variable replaced by
/// the words of its value ([`resolved`]).
fn words<'s: 'r, 'r>(
    command: &'s str,
    env: &'s Env<'_>,
    room: &'r Cell<usize>,
) -> impl Iterator<Item = &'s str> + 'r {
    tokens(command).flat_map(move |t| {
        let value = resolved(t, env, room);
        // The unread marker is one word; `tokens` would drop nothing from it.
        tokens(value)
    })
}

/// The launcher a shell command runs, and the index of the word its options start at.
fn launcher_at(
    command: &str,
    env: &Env<'_>,
    room: &Cell<usize>,
    from: usize,
) -> Option<(Launcher, usize)> {
    let mut words = words(command, env, room).enumerate().skip(from).peekable();
    while let Some((i, w)) = words.next() {
        match named(w) {
            Some(Named::Launcher(l)) => return Some((l, i + 1)),
            Some(Named::AccelerateCli) => {
                if let Some((j, _)) = words.next_if(|&(_, next)| next == "launch") {
                    return Some((Launcher::Accelerate, j + 1));
                }
            }
            Some(Named::TuneCli) => {
                if let Some((j, _)) = words.next_if(|&(_, next)| next == "run") {
                    return Some((Launcher::Torchrun, j + 1));
                }
            }
            Some(Named::LlamaFactoryCli) => {
                if let Some((j, _)) = words.next_if(|&(_, next)| next == "train") {
                    return Some((Launcher::LlamaFactory, j + 1));
                }
            }
            Some(Named::FabricCli) => {
                if let Some((j, _)) = words.next_if(|&(_, next)| next == "run") {
                    return Some((Launcher::Fabric, j + 1));
                }
            }
            Some(Named::LightningCli) => {
                if words.next_if(|&(_, next)| next == "run").is_some()
                    && let Some((j, _)) = words.next_if(|&(_, next)| next == "model")
                {
                    return Some((Launcher::Fabric, j + 1));
                }
            }
            Some(Named::SwiftCli) => {
                if let Some((j, _)) =
                    words.next_if(|&(_, next)| matches!(next, "sft" | "pt" | "rlhf"))
                {
                    return Some((Launcher::Swift, j + 1));
                }
            }
            None => {}
        }
    }
    None
}

/// Where the job's processes meet (torchrun's rendezvous endpoint or master address,
/// DeepSpeed's and Accelerate's master): every pod of one job names the same one.
/// `None` for a local endpoint, which ties nothing together.
pub(crate) fn rendezvous(line: &str, env: &Env<'_>, namespace: &str) -> Option<String> {
    // torchrun meets at its rendezvous endpoint (the flag, else `PET_RDZV_ENDPOINT`),
    // whatever its backend; only with none does its static rendezvous use the master
    // address (`get_rdzv_endpoint` in torch/distributed/run.py), so a master address
    // beside an endpoint is a decoy.
    let option = |keys: &[&str]| {
        invocations(line, env).find_map(|inv| {
            let mine: &[&str] = match inv.launcher {
                Launcher::Torchrun => &[
                    "rdzv-endpoint",
                    "rdzv_endpoint",
                    "master-addr",
                    "master_addr",
                ],
                Launcher::DeepSpeed => &["master_addr"],
                Launcher::Accelerate => &["main_process_ip", "main-process-ip"],
                _ => return None,
            };
            let keys: Vec<&str> = keys.iter().copied().filter(|k| mine.contains(k)).collect();
            if keys.is_empty() {
                return None;
            }
            inv.value(&keys).flatten().map(str::to_string)
        })
    };
    let endpoint = option(&["rdzv-endpoint", "rdzv_endpoint"])
        .or_else(|| env.literal("PET_RDZV_ENDPOINT").map(str::to_string))
        .filter(|e| !e.is_empty())
        .or_else(|| {
            option(&[
                "master-addr",
                "master_addr",
                "main_process_ip",
                "main-process-ip",
            ])
        })
        .or_else(|| {
            ["PET_MASTER_ADDR", "MASTER_ADDR"]
                .iter()
                .find_map(|k| env.literal(k))
                .map(str::to_string)
        })?;
    // torchrun takes a bracketed host (`[host]:port`, an IPv6 address) as the host.
    let host = match endpoint.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(rest),
        None => endpoint.split(':').next().unwrap_or(&endpoint),
    };
    // A local or wildcard address names no host the job's other pods can reach.
    let local = host.is_empty()
        || host == "localhost"
        || host.starts_with("127.")
        || host == "0.0.0.0"
        || host == "::"
        || host == "::1"
        || host.starts_with('$');
    // An address names no host by a name the job's other pods must spell the same way:
    // one rank given a Service's name and another its ClusterIP would be two jobs, each
    // held in a zone of its own. Such a job is tied together by a label instead.
    (!local && !names_an_address(host)).then(|| same_host(host, namespace))
}

/// Whether `host` is an IP address as a resolver reads it: IPv6, or IPv4 in any form
/// glibc's `inet_aton` takes (through `getaddrinfo`, where torch's store resolves its
/// endpoint): one to four dot-separated numbers, each decimal, octal (`012`) or hex
/// (`0xa`), so `10.100.23.45`, `012.0144.027.055`, `0xa.0x64.0x17.0x2d`, `10.100.5933`
/// and `174069549` are one address.
/// <https://man7.org/linux/man-pages/man3/inet_aton.3.html>
fn names_an_address(host: &str) -> bool {
    let number = |part: &str| match part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
        Some(hex) => hex.bytes().all(|b| b.is_ascii_hexdigit()),
        None => !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()),
    };
    host.parse::<std::net::IpAddr>().is_ok()
        || (host.split('.').count() <= 4 && host.split('.').all(number))
}

/// One spelling of a rendezvous host, so ranks that write it differently still meet
/// at one: DNS names are case-insensitive, a trailing dot only marks a name absolute,
/// and a pod's own namespace is searched first, so a Service (`NAME`) and a pod under
/// a headless Service (`HOST.SUBDOMAIN`) resolve alike with `.NAMESPACE`, `.svc` and
/// `.svc.cluster.local` after them; the port is left out (`MASTER_ADDR` names none,
/// torchrun's endpoint does). Spellings of different hosts that read alike here are
/// held together, which holds more, never less.
/// https://kubernetes.io/docs/concepts/services-networking/dns-pod-service/
fn same_host(host: &str, namespace: &str) -> String {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let host = host.strip_suffix(".cluster.local").unwrap_or(&host);
    let host = host.strip_suffix(".svc").unwrap_or(host);
    let own = host
        .strip_suffix(namespace)
        .and_then(|h| h.strip_suffix('.'))
        .filter(|h| !namespace.is_empty() && !h.is_empty());
    own.unwrap_or(host).to_string()
}
