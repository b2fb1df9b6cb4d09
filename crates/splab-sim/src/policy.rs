//! Policies: the decisions of a superpage design, organised by seed 003's five events of a
//! superpage's life (physical allocation, preparation, mapping creation, mapping destruction,
//! deallocation), plus mmap placement and daemons. A policy is a value; the named designs are
//! presets. Mechanisms (vm, phys, reservations) never read a policy's name, only its options.
//!
//! Contract: every field has a default that means "what a base-pages-only OS does", so a new
//! design is one preset, or one new option at one event.

use serde::Serialize;

use crate::error::Result;
use crate::spec::Spec;

/// Event 1, physical allocation: what the fault handler asks of physical memory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AllocPolicy {
    /// One base page per fault from the buddy allocator.
    BasePage,
}

/// Event 2, preparation: how a new page's contents are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PrepPolicy {
    /// Zero (or read) each base page when it is faulted in.
    PerPage,
}

/// Where mmap places mappings that do not fix their address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// Base-page aligned, first fit from the top (Linux `arch_get_unmapped_area_topdown`).
    BasePage,
    /// Aligned to the largest superpage not larger than the mapping (seed 000 5.3).
    SuperpageAligned,
}

#[derive(Clone, Debug, Serialize)]
pub struct Policy {
    /// The preset's name, for reports only.
    pub name: String,
    /// The spec as given (name and parameters), for reports.
    pub spec: String,
    pub alloc: AllocPolicy,
    pub prep: PrepPolicy,
    pub placement: Placement,
}

/// Names accepted by `Policy::from_spec`, with one-line descriptions for `splab list`.
pub const POLICIES: &[(&str, &str)] = &[(
    "base",
    "base pages only: one base page per fault, no superpages (the baseline)",
)];

impl Policy {
    pub fn base() -> Policy {
        Policy {
            name: "base".into(),
            spec: "base".into(),
            alloc: AllocPolicy::BasePage,
            prep: PrepPolicy::PerPage,
            placement: Placement::BasePage,
        }
    }

    pub fn from_spec(text: &str) -> Result<Policy> {
        let spec = Spec::parse("policy", text)?;
        let names: Vec<&str> = POLICIES.iter().map(|p| p.0).collect();
        let mut p = match spec.name.as_str() {
            "base" => Policy::base(),
            _ => return Err(spec.unknown_name(&names)),
        };
        p.spec = text.trim().to_string();
        spec.finish()?;
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_policies() {
        assert_eq!(
            Policy::from_spec("base").unwrap().alloc,
            AllocPolicy::BasePage
        );
        let e = Policy::from_spec("solaris").unwrap_err().to_string();
        assert!(e.contains("'solaris'") && e.contains("base"), "{e}");
        assert!(Policy::from_spec("base:x=1").is_err());
    }
}
