//! Launcher command lines, parsed the way each launcher parses them: torchrun and
//! `torch.distributed.run`/`.launch`, DeepSpeed, Accelerate, and MPI-style launchers
//! (mpirun, mpiexec, horovodrun, srun). A shell string (`bash -c "..."`) is split into
//! its commands; each launcher's options end at its first positional argument (the
//! training script, whose own flags are not the launcher's). Python launchers use
//! argparse, which accepts any unambiguous prefix of a long option (`--nnode 4`).
//! <https://docs.python.org/3/library/argparse.html#allow-abbrev>

use super::counts::{count, host_list, node_count, per_pods};
use super::{Env, JobSize};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Launcher {
    Torchrun,
    DeepSpeed,
    Accelerate,
    Mpi,
    Slurm,
}

/// torchrun's long options (torch/distributed/run.py `get_args_parser`, launch.py adds
/// `--use-env`), for argparse's prefix matching.
/// https://github.com/pytorch/pytorch/blob/v2.5.1/torch/distributed/run.py
const TORCHRUN_OPTIONS: [&str; 24] = [
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
];

/// DeepSpeed's launcher options that matter here (deepspeed/launcher/runner.py).
/// https://github.com/deepspeedai/DeepSpeed/blob/v0.16.0/deepspeed/launcher/runner.py
const DEEPSPEED_OPTIONS: [&str; 10] = [
    "num_nodes",
    "num_gpus",
    "num-gpus",
    "node_rank",
    "master_addr",
    "master_port",
    "force_multi",
    "include",
    "no_python",
    "no_local_rank",
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

/// Options that take no value (the next token is not theirs).
const SWITCHES: [&str; 10] = [
    "standalone",
    "no-python",
    "no_python",
    "run-path",
    "module",
    "use-env",
    "force_multi",
    "no_local_rank",
    "multi_gpu",
    "m",
];

/// One launcher invocation: the shell command it is in and where its options start.
/// Options are read from the command's tokens when asked for, not collected: a command
/// line of a million options costs a walk per question, and no copy of them.
struct Invocation<'a> {
    launcher: Launcher,
    command: &'a str,
    start: usize,
}

impl<'a> Invocation<'a> {
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
        let argparse = matches!(
            self.launcher,
            Launcher::Torchrun | Launcher::DeepSpeed | Launcher::Accelerate
        );
        let mut tokens = tokens(self.command).skip(self.start).peekable();
        while let Some(t) = tokens.next() {
            if !t.starts_with('-') || t == "-" {
                break;
            }
            let (name, inline) = match t.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (t, None),
            };
            // argparse options are named without their dashes; MPI's keep them (`-np`
            // is not `--np` everywhere).
            let key = if argparse {
                name.trim_start_matches('-')
            } else {
                name
            };
            let switch = SWITCHES.contains(&key.trim_start_matches('-'));
            let value = match inline {
                Some(v) => Some(v),
                None if switch => None,
                None => tokens.next_if(|next| !next.starts_with('-')),
            };
            each(key, value);
        }
    }

    fn names(&self, given: &str, long: &[&str]) -> bool {
        let known: &[&str] = match self.launcher {
            Launcher::Torchrun => &TORCHRUN_OPTIONS,
            Launcher::DeepSpeed => &DEEPSPEED_OPTIONS,
            Launcher::Accelerate => &ACCELERATE_OPTIONS,
            Launcher::Mpi | Launcher::Slurm => return long.contains(&given),
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

/// Whether the command line runs torchrun (or `torch.distributed.run`/`.launch`), the
/// one launcher that reads `PET_*`: elsewhere those variables are a decoy.
pub(super) fn runs_torchrun(line: &str) -> bool {
    invocations(line).any(|inv| inv.launcher == Launcher::Torchrun)
}

/// The job size the launchers on a command line start, the largest if several do.
pub(super) fn size(line: &str, env: &Env<'_>, per_pod: u32) -> Option<JobSize> {
    invocations(line)
        .filter_map(|inv| invocation_size(&inv, env, per_pod))
        .reduce(JobSize::max)
}

fn invocation_size(inv: &Invocation<'_>, env: &Env<'_>, per_pod: u32) -> Option<JobSize> {
    match inv.launcher {
        Launcher::Torchrun => {
            // torchrun reads each option from the command line, else from `PET_<NAME>`,
            // else its default: one node.
            let standalone = inv.value(&["standalone"]).is_some()
                || env.literal("PET_STANDALONE").is_some_and(truthy);
            if standalone {
                return Some(JobSize::Pods(1));
            }
            if let Some(v) = inv.value(&["nnodes"]) {
                return Some(v.map_or(JobSize::Several, |v| node_count(v, env)));
            }
            match env.get("PET_NNODES") {
                Some(super::EnvValue::Literal(v)) => Some(node_count(v, env)),
                Some(super::EnvValue::Elsewhere) => Some(JobSize::Several),
                // Its default is one node; what the trainer's env says is read then.
                None => None,
            }
        }
        Launcher::DeepSpeed => {
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
            let hosts = inv.value(&["include"]).flatten()?.split('@').count();
            Some(JobSize::Pods(u32::try_from(hosts).unwrap_or(u32::MAX)))
        }
        Launcher::Accelerate => {
            if let Some(v) = inv.value(&["num_machines", "num-machines"]) {
                return Some(v.map_or(JobSize::Several, |v| count(v, env)));
            }
            let procs = inv.value(&["num_processes", "num-processes"])??;
            Some(per_pods(count(procs, env), per_pod, None))
        }
        Launcher::Mpi => {
            if let Some(Some(hosts)) = inv.value(&["-H", "--host", "-host", "--hosts"]) {
                return Some(host_list(hosts));
            }
            let per_node = inv
                .value(&["-N", "--npernode", "-npernode"])
                .flatten()
                .and_then(|v| v.parse().ok());
            let procs = inv.value(&["-np", "-n", "--np", "--n", "-c"])??;
            Some(per_pods(count(procs, env), per_pod, per_node))
        }
        Launcher::Slurm => {
            if let Some(v) = inv.value(&["-N", "--nodes"]) {
                return Some(v.map_or(JobSize::Several, |v| node_count(v, env)));
            }
            let procs = inv.value(&["-n", "--ntasks"])??;
            Some(per_pods(count(procs, env), per_pod, None))
        }
    }
}

fn truthy(v: &str) -> bool {
    matches!(v.trim(), "1" | "true" | "True" | "TRUE" | "yes")
}

/// The variables a shell command line assigns, in order: `export A=1 B=2`, `env A=1 cmd`,
/// and `A=1 cmd` (assignments before a command's first word).
pub(super) fn assignments(line: &str) -> impl Iterator<Item = (&str, &str)> {
    let is_name = |n: &str| {
        n.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    line.split(['\n', ';', '|', '&']).flat_map(move |command| {
        // An assignment is a command's first word, or follows `export`, `env`, a shell's
        // `-c`, or another assignment.
        let mut open = true;
        tokens(command).filter_map(move |w| match w.split_once('=') {
            Some((n, v)) if open && is_name(n) => Some((n, v)),
            _ => {
                open = matches!(w, "export" | "env" | "-c");
                None
            }
        })
    })
}

/// Split a command line into shell commands, and each into tokens; find launchers.
fn invocations(line: &str) -> impl Iterator<Item = Invocation<'_>> {
    line.split(['\n', ';', '|', '&']).filter_map(parse)
}

fn tokens(command: &str) -> impl Iterator<Item = &str> {
    command
        .split(|c: char| c.is_whitespace() || c == '"' || c == '\'' || c == '`')
        .filter(|t| !t.is_empty())
}

/// The launcher a shell command runs, and the index of the token its options start at.
fn launcher_at(command: &str) -> Option<(Launcher, usize)> {
    let mut tokens = tokens(command).enumerate().peekable();
    while let Some((i, t)) = tokens.next() {
        let base = t.rsplit('/').next().unwrap_or(t);
        let found = match base {
            "torchrun" | "torch.distributed.run" | "torch.distributed.launch" => {
                Some(Launcher::Torchrun)
            }
            "deepspeed" | "deepspeed.launcher.runner" => Some(Launcher::DeepSpeed),
            "accelerate" if tokens.peek().is_some_and(|(_, next)| *next == "launch") => {
                return Some((Launcher::Accelerate, i + 2));
            }
            "mpirun" | "mpiexec" | "orterun" | "prterun" | "horovodrun" | "mpiexec.hydra" => {
                Some(Launcher::Mpi)
            }
            "srun" => Some(Launcher::Slurm),
            _ => None,
        };
        if let Some(l) = found {
            return Some((l, i + 1));
        }
    }
    None
}

fn parse(command: &str) -> Option<Invocation<'_>> {
    let (launcher, start) = launcher_at(command)?;
    Some(Invocation {
        launcher,
        command,
        start,
    })
}

/// Where the job's processes meet (torchrun's rendezvous endpoint or master address,
/// DeepSpeed's and Accelerate's master): every pod of one job names the same one.
/// `None` for a local endpoint, which ties nothing together.
pub(crate) fn rendezvous(line: &str, env: &Env<'_>) -> Option<String> {
    let from_line = invocations(line).find_map(|inv| {
        let keys: &[&str] = match inv.launcher {
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
        inv.value(keys).flatten().map(str::to_string)
    });
    let endpoint = from_line.or_else(|| {
        ["PET_RDZV_ENDPOINT", "PET_MASTER_ADDR", "MASTER_ADDR"]
            .iter()
            .find_map(|k| env.literal(k))
            .map(str::to_string)
    })?;
    let host = endpoint.split(':').next().unwrap_or(&endpoint);
    let local =
        host.is_empty() || host == "localhost" || host.starts_with("127.") || host.starts_with('$');
    (!local).then_some(endpoint)
}
