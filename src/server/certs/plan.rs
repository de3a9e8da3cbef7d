//! The rotation schedule, pure: from what the Secret holds and the time, what it should
//! hold. Every replica runs it; the Secret's resourceVersion lets one write win.
//!
//! A CA rotation overlaps: at 2/3 of the signing CA's life a next CA is made and trusted
//! (it joins the caBundle) but does not sign yet. Half-way from then to the old CA's end,
//! once both webhook configurations are seen to trust it, it becomes the signing CA and a
//! serving certificate from it is issued. The old CA stays in the bundle until it ends,
//! so a replica still serving the old certificate is trusted until it reloads. Serving
//! certificates are renewed at 2/3 of their life and never outlive their CA.

use super::issue::{self, CertError, Pair, Window, names, new_ca, new_serving, window};
use super::material::{Material, normalised};
use super::settings::Lifetimes;

/// What this run decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The Secret is good as it is.
    Keep,
    /// Write this, for this reason.
    Write { material: Material, why: Why },
}

/// Why the Secret is written (a log field).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// No Secret, or one whose signing CA is unusable: a new CA and certificate.
    Created,
    /// The signing CA passed 2/3 of its life: a next CA, trusted but not signing yet.
    NextCa,
    /// The next CA signs now (with a new serving certificate).
    Promoted,
    /// The serving certificate was renewed (2/3 of its life, other names, or not from the
    /// signing CA).
    Renewed,
    /// A CA that ended left the bundle.
    Pruned,
}

impl Why {
    pub fn as_str(self) -> &'static str {
        match self {
            Why::Created => "created",
            Why::NextCa => "next-ca",
            Why::Promoted => "promoted",
            Why::Renewed => "renewed",
            Why::Pruned => "pruned",
        }
    }
}

/// What the plan looks at besides the Secret.
pub struct Inputs<'a> {
    pub now: i64,
    pub names: &'a [String],
    pub lifetimes: Lifetimes,
    /// Whether every webhook of both configurations already trusts the next CA.
    pub webhooks_trust_next: bool,
}

/// A fresh CA and serving certificate.
pub fn fresh(inp: &Inputs<'_>) -> Result<Material, CertError> {
    let signing = new_ca(inp.now, inp.lifetimes.ca)?;
    let serving = new_serving(&signing, inp.names, inp.now, inp.lifetimes.serving)?;
    Ok(Material {
        serving,
        signing,
        next: None,
        retired: Vec::new(),
    })
}

fn usable_ca(pair: &Pair, now: i64) -> Option<Window> {
    let w = window("CA", &pair.cert).ok()?;
    (w.valid_at(now) && issue::key_matches(pair)).then_some(w)
}

/// When the next CA starts signing: half-way from its making to the signing CA's end.
pub fn promote_at(next: &Window, signing: &Window) -> i64 {
    next.not_before + (signing.not_after - next.not_before) / 2
}

/// Whether the serving certificate can stay: valid, before 2/3 of its life, for exactly
/// the names asked, from the signing CA, with its own key.
fn serving_good(m: &Material, inp: &Inputs<'_>) -> bool {
    let (Ok(leaf), Ok(ca)) = (
        issue::certs("tls.crt", &m.serving.cert),
        issue::certs("signing-ca.crt", &m.signing.cert),
    ) else {
        return false;
    };
    let Ok(w) = issue::der_window("tls.crt", &leaf[0]) else {
        return false;
    };
    let mut have = names(&leaf[0]);
    let mut want = inp.names.to_vec();
    have.sort();
    want.sort();
    w.valid_at(inp.now)
        && inp.now < w.renew_at()
        && have == want
        && issue::issued_by(&leaf[0], &ca[0])
        && issue::key_matches(&m.serving)
}

/// The next state of the Secret (`current`: what it holds, `None` when absent or
/// unreadable).
pub fn plan(current: Option<&Material>, inp: &Inputs<'_>) -> Result<Step, CertError> {
    let Some(cur) = current else {
        return Ok(Step::Write {
            material: fresh(inp)?,
            why: Why::Created,
        });
    };
    let Some(signing_w) = usable_ca(&cur.signing, inp.now) else {
        return Ok(Step::Write {
            material: fresh(inp)?,
            why: Why::Created,
        });
    };
    let mut m = cur.clone();
    let mut why = None;
    m.retired
        .retain(|c| window("ca.crt", c).is_ok_and(|w| w.not_after > inp.now));
    if m.retired.len() != cur.retired.len() {
        why = Some(Why::Pruned);
    }
    let next_w = m.next.as_ref().and_then(|n| usable_ca(n, inp.now));
    if m.next.is_some() && next_w.is_none() {
        m.next = None;
    }
    match next_w {
        Some(nw) if inp.now >= promote_at(&nw, &signing_w) && inp.webhooks_trust_next => {
            let next = m.next.take().unwrap_or_else(|| m.signing.clone());
            m.retired
                .push(normalised("signing-ca.crt", &m.signing.cert)?);
            m.serving = new_serving(&next, inp.names, inp.now, inp.lifetimes.serving)?;
            m.signing = next;
            why = Some(Why::Promoted);
        }
        None if inp.now >= signing_w.renew_at() => {
            m.next = Some(new_ca(inp.now, inp.lifetimes.ca)?);
            why = Some(Why::NextCa);
        }
        _ => {}
    }
    if !serving_good(&m, inp) {
        m.serving = new_serving(&m.signing, inp.names, inp.now, inp.lifetimes.serving)?;
        why = why.or(Some(Why::Renewed));
    }
    Ok(match why {
        Some(why) => Step::Write { material: m, why },
        None => Step::Keep,
    })
}

#[cfg(test)]
mod tests;
