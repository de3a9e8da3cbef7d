//! How many pods a training job has, read from what its launcher is told: torchrun and
//! MPI env (`PET_NNODES`, `WORLD_SIZE`, literal or `valueFrom`) and the command line
//! (`torchrun --nnodes`, `deepspeed --num_nodes`, `mpirun -np`). A pod that says it is
//! one of several is a multi-pod training job even without a label trainplace knows.
//! Volcano's `pytorch` plugin writes its own `WORLD_SIZE` (a pod count) into the pods
//! of a Volcano Job. Each recogniser can be switched off in policy (`recognizers`).

use crate::annotations::LABEL_VOLCANO_JOB;
use crate::podspec::{PodView, command_line, env_entry};
use crate::policy::Recognizers;

/// What the launcher settings say about the job's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JobSize {
    /// This many pods.
    Pods(u32),
    /// More than one pod, count not written literally (`$(NNODES)`, `valueFrom`).
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
}

/// The job size from the first device container's env, then its command line.
pub(crate) fn job_size(view: &PodView<'_>, per_pod: u32, on: &Recognizers) -> Option<JobSize> {
    let c = view.device_containers().next()?.index;
    env_size(view, c, per_pod, on).or_else(|| {
        on.command_line
            .unwrap_or(true)
            .then(|| command_size(&command_line(view.container(c)?), per_pod))
            .flatten()
    })
}

fn env_size(view: &PodView<'_>, c: usize, per_pod: u32, on: &Recognizers) -> Option<JobSize> {
    let container = view.container(c)?;
    let from_elsewhere = |name: &str| {
        on.env_value_from.unwrap_or(true)
            && env_entry(container, name).is_some_and(|e| e.get("valueFrom").is_some())
    };
    if let Some(v) = view.env(c, "PET_NNODES") {
        // torchrun accepts "N" or an elastic range "MIN:MAX"; the maximum bounds the job.
        return Some(count(v.rsplit(':').next()?));
    }
    if from_elsewhere("PET_NNODES") || from_elsewhere("WORLD_SIZE") {
        return Some(JobSize::Several);
    }
    let volcano = view.labels().contains_key(LABEL_VOLCANO_JOB) && on.volcano.unwrap_or(true);
    let world: u32 = view.env(c, "WORLD_SIZE")?.trim().parse().ok()?;
    // Volcano's `pytorch` plugin sets WORLD_SIZE to the job's pod count (the sum of its
    // tasks' replicas), not to a process count.
    // https://github.com/volcano-sh/volcano/blob/ed72c7c815a9fd547a787134676f73d42e9d049c/pkg/controllers/job/plugins/distributed-framework/pytorch/pytorch.go
    if volcano && view.env(c, "PET_NPROC_PER_NODE").is_none() {
        return Some(JobSize::Pods(world));
    }
    let per = view
        .env(c, "PET_NPROC_PER_NODE")
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(per_pod)
        .max(1);
    Some(JobSize::Pods(world.div_ceil(per)))
}

/// A literal count, or several when it is a variable or not a number.
fn count(text: &str) -> JobSize {
    text.trim()
        .parse::<u32>()
        .map_or(JobSize::Several, JobSize::Pods)
}

/// Node flags of torchrun and deepspeed (value = nodes) and MPI's process count.
const NODE_FLAGS: [&str; 3] = ["--nnodes", "--num_nodes", "--num-nodes"];
const PROCESS_FLAGS: [&str; 3] = ["-np", "-n", "--np"];

fn command_size(line: &str, per_pod: u32) -> Option<JobSize> {
    let launcher = [
        "torchrun",
        "deepspeed",
        "mpirun",
        "mpiexec",
        "torch.distributed.run",
    ]
    .iter()
    .any(|l| line.contains(l));
    if !launcher {
        return None;
    }
    // Shell strings (`bash -c "torchrun --nnodes 4 ..."`) split like the shell would.
    let tokens: Vec<&str> = line
        .split(|c: char| c.is_whitespace() || c == '"' || c == '\'' || c == ';')
        .filter(|t| !t.is_empty())
        .collect();
    for (i, t) in tokens.iter().enumerate() {
        let (flag, inline) = match t.split_once('=') {
            Some((f, v)) => (f, Some(v)),
            None => (*t, None),
        };
        let value = || inline.or_else(|| tokens.get(i + 1).copied());
        if NODE_FLAGS.contains(&flag) {
            let v = value()?;
            return Some(count(v.rsplit(':').next().unwrap_or(v)));
        }
        if PROCESS_FLAGS.contains(&flag) && line.contains("mpi") {
            return Some(match count(value()?) {
                JobSize::Pods(procs) => JobSize::Pods(procs.div_ceil(per_pod.max(1))),
                JobSize::Several => JobSize::Several,
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{JobSize, command_size};

    #[test]
    fn command_lines_say_how_many_nodes() {
        let cases = [
            (
                "torchrun --nnodes=4 --nproc_per_node=8 train.py",
                Some(JobSize::Pods(4)),
            ),
            ("torchrun --nnodes 4 train.py", Some(JobSize::Pods(4))),
            ("torchrun --nnodes=2:8 train.py", Some(JobSize::Pods(8))),
            (
                "torchrun --nnodes=$(NNODES) train.py",
                Some(JobSize::Several),
            ),
            (
                "bash -c \"deepspeed --num_nodes 2 train.py\"",
                Some(JobSize::Pods(2)),
            ),
            ("mpirun -np 16 python train.py", Some(JobSize::Pods(2))),
            ("python serve.py --n 4", None),
            ("torchrun train.py", None),
        ];
        for (line, want) in cases {
            assert_eq!(command_size(line, 8), want, "{line}");
        }
    }
}
