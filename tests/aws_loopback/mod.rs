//! AWS on loopback for the advisor's tests: moto's server (PyPI `moto[server]`) behind a
//! small answerer (`answerer.py`) that serves only what moto does not model, after the
//! real client has validated and sent each request. Both come from `.venv`
//! (scripts/test-deps.sh installs them, pinned); a test that needs them fails, never
//! skips, when they are missing. Both stop when this value drops.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Aws {
    moto: Child,
    answerer: Child,
    /// `http://127.0.0.1:PORT`: the answerer, which passes the rest to moto.
    pub endpoint: String,
    /// One line per request: `moto ACTION` or `answerer ACTION`.
    pub log: PathBuf,
    _dir: tempfile::TempDir,
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A tool from `.venv/bin`, or a failure that says how to get it.
pub fn venv_tool(name: &str) -> PathBuf {
    let path = repo().join(".venv/bin").join(name);
    assert!(
        path.is_file(),
        "{} is missing: run scripts/test-deps.sh (it installs the AWS CLI and moto's server into .venv)",
        path.display()
    );
    path
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_listening(port: u16, what: &str, child: &mut Child) {
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited before listening: {status}");
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{what} not listening on 127.0.0.1:{port} after 60 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

impl Aws {
    pub fn start() -> Aws {
        Self::start_with(&[])
    }

    /// Started with the answerer's `LOOPBACK_*` settings in `env` (answerer.py).
    pub fn start_with(env: &[(&str, &str)]) -> Aws {
        let dir = tempfile::tempdir().unwrap();
        let moto_port = free_port();
        let mut moto = Command::new(venv_tool("moto_server"))
            .args(["-H", "127.0.0.1", "-p", &moto_port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start moto_server");
        wait_listening(moto_port, "moto_server", &mut moto);
        let port = free_port();
        let log = dir.path().join("requests.log");
        let mut answerer = Command::new(venv_tool("python"))
            .arg(repo().join("tests/aws_loopback/answerer.py"))
            .arg(port.to_string())
            .arg(format!("http://127.0.0.1:{moto_port}"))
            .arg(&log)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .spawn()
            .expect("start the answerer");
        wait_listening(port, "the answerer", &mut answerer);
        Aws {
            moto,
            answerer,
            endpoint: format!("http://127.0.0.1:{port}"),
            log,
            _dir: dir,
        }
    }

    /// The environment that points the AWS CLI (AWS_ENDPOINT_URL) and eksctl (its
    /// AWS_<SERVICE>_ENDPOINT variables, pkg/eks/services_v2.go) here, with moto's test
    /// credentials and no config files of the machine's.
    pub fn env(&self, home: &Path) -> Vec<(String, String)> {
        let mut env = vec![
            ("AWS_ENDPOINT_URL".into(), self.endpoint.clone()),
            ("AWS_ACCESS_KEY_ID".into(), "testing".into()),
            ("AWS_SECRET_ACCESS_KEY".into(), "testing".into()),
            ("AWS_DEFAULT_REGION".into(), "us-east-1".into()),
            ("AWS_REGION".into(), "us-east-1".into()),
            ("AWS_EC2_METADATA_DISABLED".into(), "true".into()),
            (
                "AWS_CONFIG_FILE".into(),
                home.join("aws-config").display().to_string(),
            ),
            (
                "AWS_SHARED_CREDENTIALS_FILE".into(),
                home.join("aws-credentials").display().to_string(),
            ),
            ("HOME".into(), home.display().to_string()),
        ];
        for service in [
            "STS",
            "CLOUDFORMATION",
            "ELB",
            "ELBV2",
            "IAM",
            "EC2",
            "EKS",
            "CLOUDTRAIL",
        ] {
            env.push((format!("AWS_{service}_ENDPOINT"), self.endpoint.clone()));
        }
        env
    }

    /// The requests seen so far.
    pub fn requests(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// How many requests so far were `who ACTION` (`who`: moto or answerer).
    pub fn count(&self, who_action: &str) -> usize {
        self.requests().lines().filter(|l| *l == who_action).count()
    }

    /// Forget the requests seen so far.
    pub fn clear(&self) {
        let _ = std::fs::remove_file(&self.log);
    }
}

impl Drop for Aws {
    fn drop(&mut self) {
        let _ = self.answerer.kill();
        let _ = self.answerer.wait();
        let _ = self.moto.kill();
        let _ = self.moto.wait();
    }
}
