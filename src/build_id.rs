//! What this binary was built from: the commit and whether the tree was dirty (build.rs asks
//! git), which `--version` prints and every results file carries, so that a result names the
//! build that made it without a label added by hand.

use serde::{Deserialize, Serialize};

/// A build of clhip.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildId {
    /// The commit's full hash, or `unknown` (built without git, or outside a work tree).
    pub commit: String,
    /// Whether tracked files differed from the commit; `None` where that is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dirty: Option<bool>,
}

impl BuildId {
    /// This binary's build.
    pub fn this() -> Self {
        BuildId {
            commit: env!("CLHIP_GIT_COMMIT").to_string(),
            dirty: match env!("CLHIP_GIT_DIRTY") {
                "true" => Some(true),
                "false" => Some(false),
                _ => None,
            },
        }
    }

    /// `commit 0123456789ab`, `commit 0123456789ab, dirty`, or `commit unknown`.
    pub fn describe(&self) -> String {
        let short = self.commit.get(..12).unwrap_or(&self.commit);
        match self.dirty {
            Some(true) => format!("commit {short}, dirty"),
            Some(false) => format!("commit {short}"),
            None if self.commit == "unknown" => "commit unknown".to_string(),
            None => format!("commit {short}, dirty or not unknown"),
        }
    }
}

/// `0.1.0 (commit 0123456789ab, dirty)`: what `clhip --version` prints after the name.
pub fn version_line() -> String {
    format!(
        "{} ({})",
        env!("CARGO_PKG_VERSION"),
        BuildId::this().describe()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_a_commit_its_state_and_an_unknown_build() {
        let b = |commit: &str, dirty| BuildId {
            commit: commit.into(),
            dirty,
        };
        let full = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(b(full, Some(false)).describe(), "commit 0123456789ab");
        assert_eq!(b(full, Some(true)).describe(), "commit 0123456789ab, dirty");
        assert_eq!(b("unknown", None).describe(), "commit unknown");
        // This build: built in a git work tree, so a full hash and a known state.
        let this = BuildId::this();
        assert_eq!(this.commit.len(), 40, "{this:?}");
        assert!(
            this.commit.chars().all(|c| c.is_ascii_hexdigit()),
            "{this:?}"
        );
        assert!(this.dirty.is_some(), "{this:?}");
    }
}
