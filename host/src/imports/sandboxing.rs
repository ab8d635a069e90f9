//! `sandboxing` (contract 0.3.0): a container made the way a session's sandbox is — an
//! isolation level, a user, egress only through the host's proxy — for a backend that runs
//! code it does not trust in containers of its own (the bundled MCP bridge). The options
//! become a [`SandboxProfile`] for that one container and go through `container.create`'s
//! own path, so every check there holds, and what the profile asks is checked against the
//! backend's grants where `container.create` checks a session's.

use super::HostImportsView;
use super::container::{ContainerView, HasContainer};
use super::guest_error;
use crate::error_code::Code;
use crate::policy::{EgressAsk, MAX_EGRESS_ENTRIES, SandboxProfile, check_asked};
use crate::runtime::bindings::v0_2::backend::wharf::plugin0_2_0::container::{
    ContainerInfo, ContainerSpec, Network,
};
use crate::runtime::bindings::v0_2::backend::wharf::plugin0_2_0::types::Error;
use crate::runtime::bindings::v0_3::backend::wharf::plugin0_3_0::sandboxing::{
    Host, SandboxOptions,
};
use std::sync::Arc;
use wasmtime::component::Linker;

/// Links `sandboxing` (0.3.0 on) on the `container` import's view.
pub fn add_to_linker<T: HostImportsView>(linker: &mut Linker<T>) -> anyhow::Result<()> {
    crate::runtime::bindings::v0_3::backend::wharf::plugin0_3_0::sandboxing::add_to_linker::<
        T,
        HasContainer,
    >(linker, HasContainer::view)?;
    Ok(())
}

/// The longest egress entry read (a name is at most 253 bytes, a port 6 more).
const MAX_EGRESS_ENTRY_BYTES: usize = 260;

/// The profile `options` ask for, each part checked as a session config's is (the grants
/// are checked where the container is made); a refusal names the part.
fn profile_of(options: SandboxOptions, spec: &ContainerSpec) -> Result<SandboxProfile, Error> {
    let invalid = |why: String| guest_error(Code::InvalidInput, why);
    let isolation =
        check_asked(options.isolation.as_deref(), options.user.as_deref()).map_err(invalid)?;
    let ask = EgressAsk {
        hosts: options.allow_egress_to,
        cidrs: options.allow_egress_to_cidrs,
    };
    if ask.hosts.len() > MAX_EGRESS_ENTRIES || ask.cidrs.len() > MAX_EGRESS_ENTRIES {
        return Err(invalid(format!(
            "an egress allowlist has at most {MAX_EGRESS_ENTRIES} names and {MAX_EGRESS_ENTRIES} ranges"
        )));
    }
    if let Some(long) = ask
        .hosts
        .iter()
        .chain(&ask.cidrs)
        .find(|e| e.len() > MAX_EGRESS_ENTRY_BYTES)
    {
        return Err(invalid(format!(
            "an egress entry of {} bytes (at most {MAX_EGRESS_ENTRY_BYTES})",
            long.len()
        )));
    }
    if !ask.is_empty() && !matches!(spec.network, Network::None) {
        return Err(invalid(
            "a container with an egress allowlist reaches only the host's egress proxy: its spec's network must be `none`".into(),
        ));
    }
    Ok(SandboxProfile::new(isolation, options.user, false).with_egress(ask))
}

impl Host for ContainerView<'_> {
    async fn create(
        &mut self,
        spec: ContainerSpec,
        options: SandboxOptions,
    ) -> wasmtime::Result<Result<ContainerInfo, Error>> {
        let answer = if self.call.sandbox.is_some() {
            Err(guest_error(
                Code::InvalidInput,
                "this call provisions a session's sandbox, whose own profile applies: use container.create",
            ))
        } else {
            match profile_of(options, &spec) {
                Ok(profile) => self.create_checked(spec, Some(Arc::new(profile))).await,
                Err(e) => Err(e),
            }
        };
        self.counter.counted("sandboxing.create", answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Isolation;

    fn spec(network: Network) -> ContainerSpec {
        ContainerSpec {
            image: "i".into(),
            command: None,
            env: vec![],
            workdir: None,
            labels: vec![],
            mounts: vec![],
            network,
            cpu_millis: None,
            memory_bytes: None,
            pids_limit: None,
            read_only_root: false,
        }
    }

    fn options() -> SandboxOptions {
        SandboxOptions {
            isolation: None,
            user: None,
            allow_egress_to: vec![],
            allow_egress_to_cidrs: vec![],
        }
    }

    #[test]
    fn hostile_options_are_refused_with_4000_naming_the_part() {
        let code = |o: SandboxOptions, n: Network| profile_of(o, &spec(n)).unwrap_err();
        let e = code(
            SandboxOptions {
                isolation: Some("kvm\u{0}".repeat(100)),
                ..options()
            },
            Network::None,
        );
        assert_eq!(e.code, 4000);
        assert!(e.message.contains("isolation") && e.message.len() < 200);
        let e = code(
            SandboxOptions {
                user: Some("../root".into()),
                ..options()
            },
            Network::None,
        );
        assert!(e.message.contains("user"), "{}", e.message);
        let e = code(
            SandboxOptions {
                allow_egress_to: vec!["a.test".into(); MAX_EGRESS_ENTRIES + 1],
                ..options()
            },
            Network::None,
        );
        assert!(e.message.contains("at most"), "{}", e.message);
        let e = code(
            SandboxOptions {
                allow_egress_to: vec!["a".repeat(10_000)],
                ..options()
            },
            Network::None,
        );
        assert!(e.message.contains("10000 bytes"), "{}", e.message);
        let e = code(
            SandboxOptions {
                allow_egress_to: vec!["a.test".into()],
                ..options()
            },
            Network::Bridge,
        );
        assert!(e.message.contains("must be `none`"), "{}", e.message);
    }

    #[test]
    fn options_become_the_profile() {
        let p = profile_of(
            SandboxOptions {
                isolation: Some("gvisor".into()),
                user: Some("1000:1000".into()),
                allow_egress_to: vec!["a.test:80".into()],
                allow_egress_to_cidrs: vec![],
            },
            &spec(Network::None),
        )
        .unwrap();
        assert_eq!(p.isolation, Some(Isolation::Gvisor));
        assert_eq!(p.user.as_deref(), Some("1000:1000"));
        assert_eq!(p.egress.unwrap().hosts, vec!["a.test:80".to_string()]);
        let p = profile_of(options(), &spec(Network::Bridge)).unwrap();
        assert!(p.egress.is_none() && p.isolation.is_none());
    }
}
