//! `trainplace serve --self-managed-certs` flags, validated into `Settings`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::register::Registration;

/// Largest number of `--cert-extra-names`.
pub const MAX_EXTRA_NAMES: usize = 16;
/// Shortest lifetime accepted for either certificate.
pub const MIN_LIFETIME: Duration = Duration::from_secs(5);
/// Longest lifetime accepted for either certificate: ten years.
pub const MAX_LIFETIME: Duration = Duration::from_secs(3650 * 86_400);

#[derive(Debug, Args)]
pub struct SelfManagedArgs {
    /// Make and rotate the serving certificate here: a CA and a certificate for
    /// `<cert-service>.<cert-namespace>.svc` kept in one Secret that every replica shares,
    /// and the CA kept current in the webhook configurations' caBundle. Needs the RBAC of
    /// the chart's self-managed mode.
    #[arg(
        long,
        env = "TRAINPLACE_SELF_MANAGED_CERTS",
        conflicts_with = "tls_cert"
    )]
    pub self_managed_certs: bool,
    /// The Secret holding the CA, the serving certificate and their keys.
    #[arg(long, env = "TRAINPLACE_CERT_SECRET", default_value = "trainplace-tls")]
    pub cert_secret: String,
    /// Namespace of that Secret and of the Service; default: the namespace of the
    /// Kubernetes client (in a pod, the pod's own).
    #[arg(long, env = "TRAINPLACE_CERT_NAMESPACE")]
    pub cert_namespace: Option<String>,
    /// The Service the API server calls the webhook through.
    #[arg(long, env = "TRAINPLACE_CERT_SERVICE", default_value = "trainplace")]
    pub cert_service: String,
    /// More DNS names or IP addresses for the serving certificate, comma-separated (at
    /// most 16), e.g. when the API server calls the webhook by URL.
    #[arg(long, env = "TRAINPLACE_CERT_EXTRA_NAMES", value_delimiter = ',')]
    pub cert_extra_names: Vec<String>,
    /// The MutatingWebhookConfiguration whose caBundle is kept current.
    #[arg(
        long,
        env = "TRAINPLACE_MUTATING_WEBHOOK",
        default_value = "trainplace"
    )]
    pub mutating_webhook: String,
    /// The ValidatingWebhookConfiguration whose caBundle is kept current.
    #[arg(
        long,
        env = "TRAINPLACE_VALIDATING_WEBHOOK",
        default_value = "trainplace"
    )]
    pub validating_webhook: String,
    /// Register the webhook configurations of this file (YAML: one
    /// MutatingWebhookConfiguration named --mutating-webhook and one
    /// ValidatingWebhookConfiguration named --validating-webhook; the chart renders it)
    /// with the self-managed CA as caBundle, once this replica serves and the Service they
    /// call has a ready endpoint; applied again (server-side apply) at every check, which
    /// undoes drift. Without it, only the caBundle of existing configurations is kept.
    #[arg(
        long,
        env = "TRAINPLACE_REGISTER_WEBHOOKS",
        requires = "self_managed_certs"
    )]
    pub register_webhooks: Option<PathBuf>,
    /// The ClusterRole the registered configurations belong to (their ownerReference):
    /// when it is deleted (`helm uninstall`), the garbage collector deletes them.
    #[arg(long, env = "TRAINPLACE_WEBHOOK_OWNER", requires = "register_webhooks")]
    pub webhook_owner: Option<String>,
    /// Lifetime of the CA (5s to 3650d; units s, m, h, d). A new CA is made at 2/3 of it
    /// and trusted next to the old one until the old one ends.
    #[arg(long, env = "TRAINPLACE_CA_LIFETIME", default_value = "365d", value_parser = parse_lifetime)]
    pub ca_lifetime: Duration,
    /// Lifetime of the serving certificate (5s up to --ca-lifetime); renewed at 2/3 of it.
    #[arg(long, env = "TRAINPLACE_CERT_LIFETIME", default_value = "90d", value_parser = parse_lifetime)]
    pub cert_lifetime: Duration,
}

/// What the self-managed certificate loop needs, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub secret: String,
    /// `None`: the client's default namespace.
    pub namespace: Option<String>,
    pub service: String,
    pub extra_names: Vec<String>,
    pub mutating_webhook: String,
    pub validating_webhook: String,
    /// `--register-webhooks`: the server registers the configurations itself.
    pub register: Option<Registration>,
    pub lifetimes: Lifetimes,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifetimes {
    pub ca: Duration,
    pub serving: Duration,
}

impl Lifetimes {
    /// How often the Secret and the webhook configurations are looked at: 30 times per
    /// serving lifetime and 60 times per CA lifetime, between 100 ms and one minute. With
    /// the defaults, once a minute.
    pub fn check_every(&self) -> Duration {
        (self.serving / 30)
            .min(self.ca / 60)
            .clamp(Duration::from_millis(100), Duration::from_secs(60))
    }
}

impl SelfManagedArgs {
    /// `None` unless `--self-managed-certs`.
    pub fn into_settings(self) -> anyhow::Result<Option<Settings>> {
        let SelfManagedArgs {
            self_managed_certs,
            cert_secret,
            cert_namespace,
            cert_service,
            cert_extra_names,
            mutating_webhook,
            validating_webhook,
            register_webhooks,
            webhook_owner,
            ca_lifetime,
            cert_lifetime,
        } = self;
        if !self_managed_certs {
            return Ok(None);
        }
        for (flag, name) in [
            ("--cert-secret", cert_secret.as_str()),
            ("--cert-service", cert_service.as_str()),
            ("--mutating-webhook", mutating_webhook.as_str()),
            ("--validating-webhook", validating_webhook.as_str()),
        ]
        .into_iter()
        .chain(cert_namespace.as_deref().map(|n| ("--cert-namespace", n)))
        .chain(webhook_owner.as_deref().map(|n| ("--webhook-owner", n)))
        {
            check_name(flag, name)?;
        }
        let extra_names: Vec<String> = cert_extra_names
            .into_iter()
            .map(|n| n.trim().to_string())
            .filter(|n| !n.is_empty())
            .collect();
        if extra_names.len() > MAX_EXTRA_NAMES {
            anyhow::bail!(
                "--cert-extra-names: {} names, at most {MAX_EXTRA_NAMES}",
                extra_names.len()
            );
        }
        for name in &extra_names {
            if name.len() > 253 || name.contains(char::is_whitespace) {
                anyhow::bail!("--cert-extra-names: {name:?} is not a DNS name or IP address");
            }
        }
        if cert_lifetime > ca_lifetime {
            anyhow::bail!(
                "--cert-lifetime ({cert_lifetime:?}) must not be longer than --ca-lifetime ({ca_lifetime:?}): a certificate cannot outlive the CA that signed it"
            );
        }
        Ok(Some(Settings {
            secret: cert_secret,
            namespace: cert_namespace,
            service: cert_service,
            extra_names,
            mutating_webhook,
            validating_webhook,
            register: register_webhooks.map(|file| Registration {
                file,
                owner: webhook_owner,
            }),
            lifetimes: Lifetimes {
                ca: ca_lifetime,
                serving: cert_lifetime,
            },
        }))
    }
}

/// A Kubernetes object name (RFC 1123 subdomain, at most 253 characters).
fn check_name(flag: &str, name: &str) -> anyhow::Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        anyhow::bail!(
            "{flag}: {name:?} is not a Kubernetes object name (lowercase letters, digits, '-' and '.', at most 253)"
        )
    }
}

/// `30s`, `15m`, `12h`, `90d`, between 5 seconds and ten years.
pub fn parse_lifetime(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("{text:?}: give a unit (s, m, h or d), e.g. 90d"))?;
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{text:?} is not a lifetime like 90d or 12h"))?;
    let unit_secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("{text:?}: unit must be s, m, h or d")),
    };
    let d = n
        .checked_mul(unit_secs)
        .map(Duration::from_secs)
        .filter(|d| (MIN_LIFETIME..=MAX_LIFETIME).contains(d))
        .ok_or_else(|| format!("{text:?}: must be between 5s and 3650d"))?;
    Ok(d)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cmd {
        #[arg(long)]
        tls_cert: Option<String>,
        #[command(flatten)]
        args: SelfManagedArgs,
    }

    fn settings(args: &[&str]) -> anyhow::Result<Option<Settings>> {
        let mut all = vec!["serve"];
        all.extend(args);
        Cmd::try_parse_from(all)?.args.into_settings()
    }

    #[test]
    fn lifetimes_parse_with_units_and_bounds() {
        assert_eq!(parse_lifetime("90d"), Ok(Duration::from_secs(90 * 86_400)));
        assert_eq!(parse_lifetime("12h"), Ok(Duration::from_secs(43_200)));
        assert_eq!(parse_lifetime("5s"), Ok(Duration::from_secs(5)));
        assert!(
            parse_lifetime("4s")
                .unwrap_err()
                .contains("between 5s and 3650d")
        );
        assert!(parse_lifetime("3651d").unwrap_err().contains("between"));
        assert!(parse_lifetime("99999999999999999999d").is_err());
        assert!(
            parse_lifetime("18446744073709551615d")
                .unwrap_err()
                .contains("between")
        );
        assert!(parse_lifetime("90").unwrap_err().contains("give a unit"));
        assert!(parse_lifetime("1w").unwrap_err().contains("unit must be"));
    }

    #[test]
    fn defaults_are_a_year_and_ninety_days_checked_once_a_minute() {
        let s = settings(&["--self-managed-certs"]).unwrap().unwrap();
        assert_eq!(s.lifetimes.ca, Duration::from_secs(365 * 86_400));
        assert_eq!(s.lifetimes.serving, Duration::from_secs(90 * 86_400));
        assert_eq!(s.lifetimes.check_every(), Duration::from_secs(60));
        assert_eq!(
            (s.secret.as_str(), s.service.as_str()),
            ("trainplace-tls", "trainplace")
        );
        assert_eq!(settings(&[]).unwrap(), None);
    }

    #[test]
    fn bad_input_is_refused_with_the_flag() {
        let e = settings(&[
            "--self-managed-certs",
            "--ca-lifetime",
            "1h",
            "--cert-lifetime",
            "2h",
        ]);
        assert!(
            e.unwrap_err()
                .to_string()
                .contains("must not be longer than --ca-lifetime")
        );
        let e = settings(&["--self-managed-certs", "--cert-secret", "Bad_Name"]);
        assert!(e.unwrap_err().to_string().contains("--cert-secret"));
        let many = vec!["a"; MAX_EXTRA_NAMES + 1].join(",");
        let e = settings(&["--self-managed-certs", "--cert-extra-names", &many]);
        assert!(e.unwrap_err().to_string().contains("at most 16"));
        assert!(settings(&["--self-managed-certs", "--tls-cert", "x"]).is_err());
    }

    #[test]
    fn short_lifetimes_are_checked_often_but_not_busily() {
        let l = Lifetimes {
            ca: Duration::from_secs(15),
            serving: Duration::from_secs(6),
        };
        assert_eq!(l.check_every(), Duration::from_millis(200));
        let l = Lifetimes {
            ca: MIN_LIFETIME,
            serving: MIN_LIFETIME,
        };
        assert_eq!(l.check_every(), Duration::from_millis(100));
    }
}
