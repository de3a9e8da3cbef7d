//! GPU names as `nvidia-smi -L` prints them (`GPU 0: NVIDIA H100 80GB HBM3 (UUID: ...)`),
//! with where each line sits, so a topology matrix can be matched to the names next to it.

use crate::line::{pod_prefix, strip_ansi, strip_log_prefix};

/// `GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)`, as `nvidia-smi -L` prints it.
pub(crate) struct GpuName {
    index: usize,
    prefix: Option<String>,
    gpu: u32,
    model: String,
}

pub(crate) fn read(lines: &[&str]) -> Vec<GpuName> {
    lines
        .iter()
        .enumerate()
        .filter(|(_, raw)| raw.contains("GPU ") && raw.contains("(UUID: "))
        .filter_map(|(index, raw)| {
            let line = strip_log_prefix(&strip_ansi(raw)).to_string();
            let (gpu, rest) = line.trim().strip_prefix("GPU ")?.split_once(": ")?;
            let (model, _) = rest.split_once(" (UUID: ")?;
            Some(GpuName {
                index,
                prefix: pod_prefix(raw).map(str::to_string),
                gpu: gpu.parse().ok()?,
                model: model.trim().to_string(),
            })
        })
        .collect()
}

/// The model of GPU 0 (else the first GPU listed) among the names in `range`.
pub(crate) fn model(
    names: &[GpuName],
    range: std::ops::Range<usize>,
    prefix: Option<Option<&str>>,
) -> Option<String> {
    let mut names = names
        .iter()
        .filter(|name| range.contains(&name.index))
        .filter(|name| prefix.is_none_or(|prefix| name.prefix.as_deref() == prefix))
        .peekable();
    let first = names.peek().map(|name| name.model.clone());
    names
        .find(|name| name.gpu == 0)
        .map(|name| name.model.clone())
        .or(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_nvidia_smi_list_lines_and_prefers_gpu_0() {
        let lines = [
            "[pod/a/c] GPU 1: NVIDIA L40S (UUID: GPU-2)",
            "[pod/a/c] GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)",
            "GPU 0: NVIDIA A10G (UUID: GPU-3)",
            "  MIG 1g.10gb     Device  0: (UUID: MIG-4)",
        ];
        let names = read(&lines);
        assert_eq!(names.len(), 3);
        let pod = model(&names, 0..4, Some(Some("pod/a/c")));
        assert_eq!(pod.as_deref(), Some("NVIDIA H100 80GB HBM3"));
        assert_eq!(
            model(&names, 0..4, Some(None)).as_deref(),
            Some("NVIDIA A10G")
        );
        assert_eq!(model(&names, 0..1, None).as_deref(), Some("NVIDIA L40S"));
        assert_eq!(model(&names, 3..4, None), None);
    }
}
