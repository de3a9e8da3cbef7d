//! Reading a live cluster for `trainplace audit`: the list calls, in pages of [`PAGE`]
//! objects handed on one page at a time, and the progress line on stderr.

use kube::api::{Api, DynamicObject, ListParams, VersionMatch};

/// Objects per list call: the API server answers a large cluster's pods in pages, so
/// no single response (nor its time in the API server) grows with the cluster, and the
/// audit holds one page of objects at a time.
pub(super) const PAGE: u32 = 500;

/// Where a list starts: the newest objects, or exactly those at a resource version an
/// earlier list saw (so two reads of the pods describe one moment of the cluster).
#[derive(Debug, Clone, Copy)]
pub(super) enum From<'a> {
    Newest,
    Exactly(&'a str),
}

/// Hand every object `api` lists to `page`, one page at a time (`limit` and
/// `continue`), the count so far on the progress line. Returns the list's resource
/// version.
pub(super) async fn for_each_page(
    api: &Api<DynamicObject>,
    from: From<'_>,
    progress: &Progress,
    what: &str,
    mut page: impl FnMut(Vec<DynamicObject>) -> anyhow::Result<()>,
) -> Result<String, PageError> {
    let mut params = ListParams::default().limit(PAGE);
    if let From::Exactly(version) = from {
        params = params.at(version).matching(VersionMatch::Exact);
    }
    let mut listed = 0;
    let mut version = None;
    loop {
        let list = api.list(&params).await.map_err(PageError::List)?;
        listed += list.items.len();
        version = version.or(list.metadata.resource_version);
        page(list.items).map_err(PageError::Page)?;
        progress.count(what, listed);
        match list.metadata.continue_.filter(|c| !c.is_empty()) {
            // A continued list carries its resource version in the token.
            Some(token) => params = ListParams::default().limit(PAGE).continue_token(&token),
            None => return Ok(version.unwrap_or_default()),
        }
    }
}

/// Why a paged list stopped: the API server refused a page, or handling a page failed.
#[derive(Debug)]
pub(super) enum PageError {
    List(kube::Error),
    Page(anyhow::Error),
}

impl PageError {
    /// The API server's answer was this HTTP status.
    pub(super) fn is_status(&self, code: u16) -> bool {
        matches!(self, PageError::List(kube::Error::Api(e)) if e.code == code)
    }

    /// As an error naming the list.
    pub(super) fn naming(self, plural: &str) -> anyhow::Error {
        match self {
            PageError::List(e) => anyhow::anyhow!("cannot list {plural}: {e}"),
            PageError::Page(e) => e.context(format!("cannot read the listed {plural}")),
        }
    }
}

/// Progress of a live audit on stderr, only when stderr is a terminal (a script's
/// stderr stays for errors): which list is being read, overwritten in place.
pub(super) struct Progress {
    on: bool,
    total: usize,
    done: std::cell::Cell<usize>,
    /// What the current step does with the objects it lists ("reading", "judging").
    verb: std::cell::Cell<&'static str>,
}

impl Progress {
    pub(super) fn new(total: usize) -> Self {
        use std::io::IsTerminal;
        Progress {
            on: std::io::stderr().is_terminal(),
            total,
            done: std::cell::Cell::new(0),
            verb: std::cell::Cell::new("reading"),
        }
    }

    /// The next step: `verb` ("reading", "judging") the objects of `what`.
    pub(super) fn step(&self, verb: &'static str, what: &str) {
        self.done.set(self.done.get() + 1);
        self.verb.set(verb);
        if self.on {
            crate::cli::out::stderr(format_args!(
                "\r\x1b[2Kaudit: {verb} {what} ({}/{})",
                self.done.get(),
                self.total
            ));
        }
    }

    fn count(&self, what: &str, listed: usize) {
        if self.on {
            crate::cli::out::stderr(format_args!(
                "\r\x1b[2Kaudit: {} {what} ({}/{}): {listed}",
                self.verb.get(),
                self.done.get(),
                self.total
            ));
        }
    }

    pub(super) fn done(&self) {
        if self.on {
            crate::cli::out::stderr(format_args!("\r\x1b[2K"));
        }
    }
}
