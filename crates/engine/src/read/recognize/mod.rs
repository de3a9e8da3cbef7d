//! How many pods a training job has, read the way the job really starts: the container's
//! env as the kubelet builds it (the last entry of a name wins; `$(VAR)` in command and
//! args is expanded from it), then the shell's own rewriting of the line (continued
//! lines joined, quotes inside words removed), then each launcher's own flags and env
//! with the launcher's precedence (see [`launchers`]). Every container that can run the trainer
//! is read: app containers and native sidecars that hold devices. A pod that says it
//! is one of several is a multi-pod training job even without a label trainplace knows.
//! Volcano's `pytorch` plugin writes its own `WORLD_SIZE` (a pod count) into the pods
//! of a Volcano Job. Each recogniser can be switched off in policy (`recognizers`).

mod counts;
mod launchers;
mod sequence;

use std::borrow::Cow;
use std::cell::{Cell, OnceCell};
use std::collections::HashMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::read::annotations::LABEL_VOLCANO_JOB;
use crate::read::json::items;
use crate::read::podspec::PodView;

/// Recognisers of multi-pod training jobs beyond the operators' labels; each is on
/// unless switched off.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Recognizers {
    /// `torchrun --nnodes`, `deepspeed --num_nodes`, `mpirun -np` in command or args.
    pub command_line: Option<bool>,
    /// `PET_NNODES` / `WORLD_SIZE` set through `valueFrom`.
    pub env_value_from: Option<bool>,
    /// KubeRay pods (`ray.io/cluster`).
    pub ray: Option<bool>,
    /// Volcano pods (`volcano.sh/job-name`).
    pub volcano: Option<bool>,
}

const ENV: &str = "spec.containers[].env";
const ARGS: &str = "spec.containers[].command and args";

/// What the launcher settings say about the job's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JobSize {
    /// This many pods.
    Pods(u32),
    /// More than one pod, count not written literally (`$NNODES` unset, `valueFrom`).
    Several,
}

impl JobSize {
    /// Pods in the job when known (`None` = several, count unknown).
    pub fn pods(self) -> Option<u32> {
        match self {
            JobSize::Pods(n) => Some(n),
            JobSize::Several => None,
        }
    }

    pub fn multi_pod(self) -> bool {
        self.pods().is_none_or(|n| n > 1)
    }

    /// The larger of two readings: several beats one pod, a known count beats several.
    fn max(self, other: JobSize) -> JobSize {
        match (self, other) {
            (JobSize::Pods(a), JobSize::Pods(b)) => JobSize::Pods(a.max(b)),
            (JobSize::Pods(n), JobSize::Several) | (JobSize::Several, JobSize::Pods(n))
                if n > 1 =>
            {
                JobSize::Pods(n)
            }
            _ => JobSize::Several,
        }
    }
}

/// A container's env as the kubelet builds it: entries in order, the last of a name
/// wins. `valueFrom` entries have no literal value. The first few names are found by
/// reading the entries from the end (the usual review looks up a handful); past
/// [`SCANS_BEFORE_MAP`] lookups a map is built once, so a command line of many `$(VAR)`
/// references costs time linear in it and in the env.
pub(crate) struct Env<'a> {
    entries: &'a [Value],
    values: OnceCell<HashMap<&'a str, EnvValue<'a>>>,
    scans: Cell<u32>,
    /// Env the workload's operator appends to every container of the template (after
    /// the template's own entries, so its values win).
    operator: &'a [(&'static str, String)],
    /// Variables the command line itself sets (`export N=4; ...`, `N=4 torchrun ...`,
    /// `env N=4 ...`): they win over the container's env for what follows. `None`: the
    /// line sets it only on some runs, to a value other than the one it has otherwise.
    assigned: HashMap<String, Option<String>>,
}

/// Lookups answered by reading the env from its end before the map is built.
const SCANS_BEFORE_MAP: u32 = 8;

/// One env var as the container sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EnvValue<'a> {
    Literal(&'a str),
    /// Set from a ConfigMap, Secret, field or resource: a value trainplace cannot read.
    Elsewhere,
}

/// Text a `$(VAR)` expansion may add to a command line beyond what is written: Linux
/// execs no single argument longer than 128 KiB (`MAX_ARG_STRLEN`), so a launcher's
/// flags are never past it. Past this, references stay as written and read as counts
/// trainplace cannot derive.
pub(crate) const EXPANDED_LIMIT: usize = 128 * 1024;

/// An env entry's name and value (`None`: it has no name).
fn entry(e: &Value) -> Option<(&str, EnvValue<'_>)> {
    let name = e.get("name").and_then(Value::as_str)?;
    let value = match e.get("value").and_then(Value::as_str) {
        Some(v) => EnvValue::Literal(v),
        None if e.get("valueFrom").is_some() => EnvValue::Elsewhere,
        None => EnvValue::Literal(""),
    };
    Some((name, value))
}

impl<'a> Env<'a> {
    pub(crate) fn of(container: &'a Value) -> Self {
        Env {
            entries: items(container, &["env"]),
            values: OnceCell::new(),
            scans: Cell::new(0),
            assigned: HashMap::new(),
            operator: &[],
        }
    }

    /// This env with the entries the workload's operator appends to it.
    pub(crate) fn with_operator(mut self, operator: &'a [(&'static str, String)]) -> Self {
        self.operator = operator;
        self
    }

    /// The container's own entry for `name`: the last one.
    fn own(&self, name: &str) -> Option<EnvValue<'a>> {
        if self.values.get().is_none() && self.scans.get() < SCANS_BEFORE_MAP {
            self.scans.set(self.scans.get() + 1);
            if !crate::budget::draw_len(ENV, self.entries.len()) {
                return None;
            }
            return self
                .entries
                .iter()
                .rev()
                .find(|e| e.get("name").and_then(Value::as_str) == Some(name))
                .and_then(entry)
                .map(|(_, v)| v);
        }
        self.values
            .get_or_init(|| {
                let mut values = HashMap::with_capacity(self.entries.len());
                if crate::budget::draw_len(ENV, self.entries.len()) {
                    values.extend(self.entries.iter().filter_map(entry));
                }
                values
            })
            .get(name)
            .copied()
    }

    /// This env with the assignments a shell command line makes. One the shell makes on
    /// every run before the launcher replaces the value; one it makes only on some runs
    /// (in a branch, a loop, a function, a subshell, after `||`, after the launcher)
    /// leaves the variable unsettled unless it sets the value it already has: the
    /// launcher may read either, so neither is taken for the job's size.
    pub(crate) fn with_assignments(mut self, line: &str) -> Self {
        for a in launchers::assignments(line) {
            let expanded = self.reference(a.value);
            let written = expanded.as_deref().unwrap_or(a.value);
            let value = if a.value == launchers::UNSETTLED {
                None
            } else if a.certain {
                Some(written.to_string())
            } else {
                let before = match self.assigned.get(a.name) {
                    Some(known) => known.as_deref().map(EnvValue::Literal),
                    None => self.unassigned(a.name),
                };
                (before == Some(EnvValue::Literal(written))).then(|| written.to_string())
            };
            self.assigned.insert(a.name.to_string(), value);
        }
        self
    }

    /// An assigned value that is one reference to a variable set to a non-empty literal
    /// (`$N`, `"${N}"`, `${N:-1}`, `${N-1}`, `${N:=1}`): that literal, as the shell
    /// expands it (a default applies only to an unset or empty variable). `None` for
    /// anything else, which is read as written.
    /// <https://pubs.opengroup.org/onlinepubs/9699919799/utilities/V3_chap02.html#tag_18_06_02>
    fn reference(&self, value: &str) -> Option<String> {
        let v = value.trim_matches('"');
        let name = match v.strip_prefix("${").and_then(|r| r.strip_suffix('}')) {
            Some(inner) => {
                let (name, rest) = launchers::leading_name(inner);
                let defaulted = [":-", "-", ":=", "="].iter().any(|op| rest.starts_with(op));
                (rest.is_empty() || defaulted).then_some(name)?
            }
            None => v.strip_prefix('$')?,
        };
        match self.get(name).filter(|_| launchers::is_name(name))? {
            EnvValue::Literal(set) if !set.is_empty() => Some(set.to_string()),
            _ => None,
        }
    }

    pub(crate) fn get(&self, name: &str) -> Option<EnvValue<'_>> {
        match self.assigned.get(name) {
            Some(Some(v)) => Some(EnvValue::Literal(v)),
            Some(None) => Some(EnvValue::Elsewhere),
            None => self.unassigned(name),
        }
    }

    /// The value the container starts with: the operator's entry, else its own.
    fn unassigned(&self, name: &str) -> Option<EnvValue<'_>> {
        if let Some((_, v)) = self.operator.iter().rev().find(|(n, _)| *n == name) {
            return Some(EnvValue::Literal(v));
        }
        self.own(name)
    }

    pub(crate) fn literal(&self, name: &str) -> Option<&str> {
        match self.get(name)? {
            EnvValue::Literal(v) => Some(v),
            EnvValue::Elsewhere => None,
        }
    }

    /// `$(VAR)` references expanded as the kubelet expands command and args
    /// (`third_party/forked/golang/expansion`): a defined literal replaces the
    /// reference, `$$` is one `$`, a `$` before anything else stays with that
    /// character, an undefined or unclosed reference stays as written, and a value
    /// put in is not expanded again. Each byte is read once; past [`EXPANDED_LIMIT`]
    /// of added text (or the review's budget) the rest stays as written.
    /// https://kubernetes.io/docs/tasks/inject-data-application/define-interdependent-environment-variables/
    pub(crate) fn expand<'t>(&self, text: &'t str) -> Cow<'t, str> {
        if !text.contains('$') {
            // Nothing to expand: the text itself, not a copy of it.
            crate::budget::draw_len(ARGS, text.len());
            return Cow::Borrowed(text);
        }
        let limit = text.len().saturating_add(EXPANDED_LIMIT);
        let mut out = String::with_capacity(text.len());
        // No `$(` after the last `)` closes: known once, so unclosed references are
        // not each read to the end of the text.
        let last_close = text.rfind(')');
        let mut cursor = 0;
        while let Some(off) = text[cursor..].find('$') {
            let at = cursor + off;
            let rest = &text[at + 1..];
            let Some(next) = rest.chars().next() else {
                break;
            };
            out.push_str(&text[cursor..at]);
            cursor = match next {
                '$' => {
                    out.push('$');
                    at + 2
                }
                '(' => {
                    let end = last_close
                        .filter(|&c| c > at)
                        .and_then(|_| rest.find(')'))
                        .map(|e| at + 1 + e);
                    let Some(end) = end else {
                        out.push_str("$(");
                        cursor = at + 2;
                        continue;
                    };
                    let value = self.literal(&text[at + 2..end]);
                    // What the whole line would be with this value and the rest as
                    // written: within the limit, or the rest stays as written.
                    let rest = text.len() - (end + 1);
                    match value {
                        Some(v)
                            if out.len() + v.len() + rest <= limit
                                && crate::budget::draw_len(ARGS, v.len()) =>
                        {
                            grow(&mut out, v.len(), limit);
                            out.push_str(v);
                        }
                        Some(_) => {
                            // Past the limit: the rest is not derived.
                            cursor = at;
                            break;
                        }
                        None => out.push_str(&text[at..=end]),
                    }
                    end + 1
                }
                c => {
                    let end = at + 1 + c.len_utf8();
                    out.push_str(&text[at..end]);
                    end
                }
            };
        }
        grow(&mut out, text.len() - cursor, limit);
        out.push_str(&text[cursor..]);
        crate::budget::draw_len(ARGS, text.len());
        Cow::Owned(out)
    }
}

/// Make room in `out` for `more` bytes, doubling at most up to `limit` (the longest the
/// expansion may be), so the buffer never grows to twice a long line.
fn grow(out: &mut String, more: usize, limit: usize) {
    let need = out.len() + more;
    if need > out.capacity() {
        let target = need.max(out.capacity().saturating_mul(2).min(limit));
        out.reserve_exact(target - out.len());
    }
}

/// The rendezvous the pod's trainer names (torchrun's endpoint, a master address), as a
/// label value: a digest, since an endpoint is not a valid label value.
pub(crate) fn rendezvous_label(
    view: &PodView<'_>,
    namespace: &str,
    operator: &[(&'static str, String)],
) -> Option<String> {
    use sha2::{Digest, Sha256};
    let endpoint = view.trainer_containers().find_map(|c| {
        let env = Env::of(c).with_operator(operator);
        let joined = launchers::argv_line(c);
        let expanded = env.expand(&joined);
        let line = launchers::shell_text(&expanded);
        launchers::rendezvous(&line, &env.with_assignments(&line), namespace)
    })?;
    let digest = Sha256::digest(endpoint.as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    Some(format!("r{hex}"))
}

/// The job size from every container that can run the trainer: the largest reading.
/// `operator` is the env the workload's operator appends to each container.
pub(crate) fn job_size(
    view: &PodView<'_>,
    per_pod: u32,
    on: &Recognizers,
    operator: &[(&'static str, String)],
) -> Option<JobSize> {
    view.trainer_containers()
        .filter_map(|c| container_size(view, c, per_pod, on, operator))
        .reduce(JobSize::max)
}

/// One container: its launcher's command line (read with the launcher's own env),
/// else the env a trainer started without a launcher reads.
fn container_size(
    view: &PodView<'_>,
    container: &Value,
    per_pod: u32,
    on: &Recognizers,
    operator: &[(&'static str, String)],
) -> Option<JobSize> {
    let env = Env::of(container).with_operator(operator);
    let joined = launchers::argv_line(container);
    let expanded = env.expand(&joined);
    // Read as the shell reads it: continuations joined, quotes inside words removed.
    let line = launchers::shell_text(&expanded);
    let env = env.with_assignments(&line);
    let launched = on
        .command_line
        .unwrap_or(true)
        .then(|| launchers::size(&line, &env, per_pod))
        .flatten();
    match launched {
        Some(size) => Some(size),
        None => env_size(
            view,
            &env,
            per_pod,
            on,
            (
                launchers::runs_torchrun(&line, &env),
                // No command: the image's entrypoint runs, given the args.
                container.get("command").is_none() || launchers::runs_a_script(&line, &env),
            ),
        ),
    }
}

/// The env the trainer reads when its launcher's flags do not say: `torch.distributed`
/// reads `WORLD_SIZE`; `PET_*` when the container runs torchrun, the one launcher that
/// reads them. Where what runs is a script trainplace cannot see into (the image's
/// entrypoint, `bash train.sh`), `PET_NNODES` above one still says the job has that
/// many pods: it can only make the job larger, while a `PET_NNODES: "1"` or a large
/// `PET_NPROC_PER_NODE` there would be a decoy that shrinks it. A program seen to be
/// something else (`python evaluate.py`) does not read it.
fn env_size(
    view: &PodView<'_>,
    env: &Env<'_>,
    per_pod: u32,
    on: &Recognizers,
    (torchrun, opaque): (bool, bool),
) -> Option<JobSize> {
    let value_from = on.env_value_from.unwrap_or(true);
    let pet = |name: &str| env.get(name).filter(|_| torchrun);
    match pet("PET_NNODES") {
        // torchrun accepts "N" or an elastic range "MIN:MAX"; the maximum bounds the job.
        Some(EnvValue::Literal(v)) => return Some(counts::node_count(v, env)),
        Some(EnvValue::Elsewhere) if value_from => return Some(JobSize::Several),
        _ => {}
    }
    let scripted = match env.get("PET_NNODES").filter(|_| !torchrun && opaque) {
        Some(EnvValue::Literal(v)) => Some(counts::node_count(v, env)).filter(|s| s.multi_pod()),
        _ => None,
    };
    let world = world_size(view, env, per_pod, on, value_from, pet);
    let cluster = cluster_env(env, value_from);
    let frameworks = framework_sizes(env, per_pod);
    [scripted, world, cluster, frameworks]
        .into_iter()
        .flatten()
        .reduce(JobSize::max)
}

/// What the env a trainer reads without any launcher says of the job: TensorFlow's
/// `TF_CONFIG` lists every task of the cluster (its `cluster` map, by role: chief,
/// worker, ps), on as many pods as it names hosts; a rank ([`RANKS`]) above 0 is a
/// pod past the first of several. A `TF_CONFIG` set from elsewhere, or that is no such
/// map, is a job of a size trainplace cannot count; a rank set from elsewhere (an
/// Indexed Job's completion index) says nothing: a Job of one completion is one node.
/// <https://www.tensorflow.org/guide/distributed_training#setting_up_the_tf_config_environment_variable>
/// <https://lightning.ai/docs/pytorch/stable/clouds/cluster_intermediate_1.html>
fn cluster_env(env: &Env<'_>, value_from: bool) -> Option<JobSize> {
    let unread = || value_from.then_some(JobSize::Several);
    let tasks = match env.get("TF_CONFIG") {
        Some(EnvValue::Literal(v)) => Some(tf_config_tasks(v).map_or(JobSize::Several, |n| {
            JobSize::Pods(u32::try_from(n).unwrap_or(u32::MAX))
        })),
        Some(EnvValue::Elsewhere) => unread(),
        None => None,
    };
    let past_first = |name: &str| match env.get(name) {
        Some(EnvValue::Literal(v)) => v.trim().parse::<u64>().map_or(Some(JobSize::Several), |r| {
            (r > 0).then_some(JobSize::Several)
        }),
        Some(EnvValue::Elsewhere) | None => None,
    };
    let ranks = RANKS.into_iter().filter_map(past_first);
    std::iter::once(tasks)
        .flatten()
        .chain(ranks)
        .reduce(JobSize::max)
}

/// Env a trainer started without a launcher reads as its own rank among the job's
/// processes or nodes: PyTorch Lightning's and Accelerate's `NODE_RANK`,
/// `torch.distributed`'s `RANK` (env:// initialisation, one process per pod), JAX's
/// `JAX_PROCESS_ID`. Above 0, the pod is one of several.
/// <https://pytorch.org/docs/stable/distributed.html#environment-variable-initialization>
/// <https://jax.readthedocs.io/en/latest/multi_process.html>
const RANKS: [&str; 3] = ["NODE_RANK", "RANK", "JAX_PROCESS_ID"];

/// Env a framework reads as the job's node count when its own launcher is not used:
/// PyTorch Lightning's `Trainer` (`PL_TRAINER_NUM_NODES`, its arguments' defaults from
/// env), Lightning Fabric (`LT_NUM_NODES`), and `JAX_NUM_PROCESSES` (one process per
/// node, as the Kubeflow Trainer's JAX runtime runs it).
/// <https://lightning.ai/docs/pytorch/stable/common/trainer.html>
/// <https://lightning.ai/docs/fabric/stable/fundamentals/launch.html>
/// <https://github.com/kubeflow/trainer/tree/master/pkg/runtime/framework/plugins/jax>
const NODE_COUNTS: [&str; 3] = ["PL_TRAINER_NUM_NODES", "LT_NUM_NODES", "JAX_NUM_PROCESSES"];

/// Env a framework reads as the job's process count, one per accelerator: Paddle's
/// collective trainers (`PADDLE_TRAINERS_NUM`).
/// <https://github.com/PaddlePaddle/Paddle/blob/develop/python/paddle/distributed/parallel.py> (ParallelEnv)
const PROCESS_COUNTS: [&str; 1] = ["PADDLE_TRAINERS_NUM"];

/// The job size the frameworks' own env says (`NODE_COUNTS`, `PROCESS_COUNTS`), when
/// above one pod: such env can only make the job larger (a count of one, or one set
/// from elsewhere, says nothing).
fn framework_sizes(env: &Env<'_>, per_pod: u32) -> Option<JobSize> {
    let literal = |name: &str| match env.get(name) {
        Some(EnvValue::Literal(v)) => Some(counts::count(v, env)),
        _ => None,
    };
    let nodes = NODE_COUNTS.into_iter().filter_map(literal);
    let processes = PROCESS_COUNTS
        .into_iter()
        .filter_map(literal)
        .map(|n| counts::per_pods(n, per_pod, None));
    nodes
        .chain(processes)
        .filter(|s| s.multi_pod())
        .reduce(JobSize::max)
}

/// The longest `TF_CONFIG` read.
const TF_CONFIG_LIMIT: usize = 64 * 1024;

/// The pods of the training tasks a `TF_CONFIG` lists in its `cluster` map: its chief,
/// master and workers, one per `host:port` address (tasks on the loopback share a pod).
/// Parameter servers hold no accelerators in TensorFlow's strategies, and an evaluator,
/// outside the cluster, is none of its ranks: `Some(1)` for its own pod. `None` when it
/// is not such a map.
/// <https://www.tensorflow.org/tutorials/distribute/parameter_server_training>
fn tf_config_tasks(text: &str) -> Option<usize> {
    // Parsed into a tree several times its size: a config past any real cluster's (a
    // thousand workers take some 30 KiB) is one trainplace does not count.
    if text.len() > TF_CONFIG_LIMIT || !crate::budget::draw_len("env[TF_CONFIG]", text.len()) {
        return None;
    }
    let config: Value = serde_json::from_str(text).ok()?;
    let cluster = config.get("cluster")?.as_object()?;
    let task = config
        .get("task")
        .and_then(|t| t.get("type"))
        .and_then(Value::as_str);
    if task == Some("evaluator") {
        return Some(1);
    }
    let mut hosts = std::collections::HashSet::new();
    for role in ["chief", "master", "worker"] {
        let Some(tasks) = cluster.get(role) else {
            continue;
        };
        for address in tasks.as_array()? {
            let address = address.as_str()?;
            // Tasks on the pod's own loopback share it; any other address may be a
            // pod of its own (a Service routes each port where it is told).
            let host = address.rsplit_once(':').map_or(address, |(host, _)| host);
            let local = host == "localhost" || host.starts_with("127.") || host == "[::1]";
            hosts.insert(if local { "localhost" } else { address });
        }
    }
    Some(hosts.len().max(1))
}

/// The job size `WORLD_SIZE` says: processes over the pod's accelerators (or
/// `PET_NPROC_PER_NODE` under torchrun), or pods under Volcano's plugin.
fn world_size<'e>(
    view: &PodView<'_>,
    env: &'e Env<'_>,
    per_pod: u32,
    on: &Recognizers,
    value_from: bool,
    pet: impl Fn(&str) -> Option<EnvValue<'e>>,
) -> Option<JobSize> {
    let world = match env.get("WORLD_SIZE")? {
        EnvValue::Literal(v) => v,
        EnvValue::Elsewhere => return value_from.then_some(JobSize::Several),
    };
    let JobSize::Pods(world) = counts::count(world, env) else {
        return Some(JobSize::Several);
    };
    // Volcano's `pytorch` plugin sets WORLD_SIZE to the job's pod count (the sum of its
    // tasks' replicas), not to a process count.
    // https://github.com/volcano-sh/volcano/blob/ed72c7c815a9fd547a787134676f73d42e9d049c/pkg/controllers/job/plugins/distributed-framework/pytorch/pytorch.go
    let volcano = view.labels().contains_key(LABEL_VOLCANO_JOB) && on.volcano.unwrap_or(true);
    let per_node = match pet("PET_NPROC_PER_NODE") {
        Some(EnvValue::Literal(v)) => Some(v),
        _ => None,
    };
    if volcano && per_node.is_none() {
        return Some(JobSize::Pods(world));
    }
    Some(JobSize::Pods(
        world.div_ceil(counts::per_node(per_node, per_pod)),
    ))
}

#[cfg(test)]
mod tests;
