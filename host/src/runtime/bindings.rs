//! Host-side bindings of every contract version this host serves, each with its two
//! worlds. The WASI parts map to wasmtime's own bindings; each version's
//! `sandbox-provider` world reuses that version's `resource-backend` interfaces. Nothing
//! outside `runtime/` and `imports/` sees these types: `guest_types` is the host's own
//! vocabulary, and the conversions live beside the world wrappers. Every import is
//! generated with `tracing`: a `trace`-level span around each host import call, which costs
//! nothing while no layer wants it and which the trace exporter (`telemetry`) sends as
//! `import <interface>.<function>`. Module names carry their package's version
//! (`wharf::plugin0_2_0`), as the bindings generator names them when a package is present in
//! more than one version.
#![allow(missing_docs, clippy::all)]

/// `bindgen!` with what every world here shares: async imports that trap on host errors
/// and trace, async exports, WASI from wasmtime's own bindings; plus the world's own `with`.
/// With `v0_2: module`, the interfaces 0.2.0 defines map onto that module of the 0.2.0
/// `resource-backend` bindings.
macro_rules! contract_bindgen {
    (path: $path:tt, world: $world:tt, v0_2: $v0_2:ident, with: { $($with:tt)* }) => {
        contract_bindgen!(
            path: $path,
            world: $world,
            with: {
                "wharf:plugin/types@0.2.0": $v0_2::types,
                "wharf:plugin/container@0.2.0": $v0_2::container,
                "wharf:plugin/exec@0.2.0": $v0_2::exec,
                "wharf:plugin/kv@0.2.0": $v0_2::kv,
                "wharf:plugin/log@0.2.0": $v0_2::log,
                "wharf:plugin/egress@0.2.0": $v0_2::egress,
                $($with)*
            }
        );
    };
    (path: $path:tt, world: $world:tt, with: { $($with:tt)* }) => {
        wasmtime::component::bindgen!({
            path: $path,
            world: $world,
            imports: { default: async | trappable | tracing },
            exports: { default: async },
            with: {
                "wasi:http": wasmtime_wasi_http::p2::bindings::http,
                "wasi:io": wasmtime_wasi::p2::bindings::io,
                "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
                $($with)*
            },
        });
    };
}

/// `wharf:plugin@0.3.0`, the current contract (`wit/plugin.wit`): the interfaces it adds.
/// Those it keeps of 0.2.0 are 0.2.0's own, mapped onto [`v0_2`]'s bindings, so one
/// implementation serves both versions.
pub mod v0_3 {
    /// The `resource-backend` world (its `sandbox-provider` adds no other import).
    pub mod backend {
        use super::super::v0_2::backend::wharf::plugin0_2_0 as v0_2;
        contract_bindgen!(
            path: "../wit",
            world: "wharf:plugin/resource-backend@0.3.0",
            v0_2: v0_2,
            with: {}
        );
    }

    /// The `sandbox-provider` world: its imports are `backend`'s; what it adds is the
    /// `processes` and `suspension` exports (its `provider` export is 0.2.0's, called through [`v0_2`]).
    pub mod provider {
        use super::super::v0_2::backend::wharf::plugin0_2_0 as v0_2;
        use super::backend::wharf::plugin0_3_0 as v0_3;
        contract_bindgen!(
            path: "../wit",
            world: "wharf:plugin/sandbox-provider@0.3.0",
            v0_2: v0_2,
            with: {
                "wharf:plugin/secrets@0.3.0": v0_3::secrets,
                "wharf:plugin/process@0.3.0": v0_3::process,
                "wharf:plugin/files@0.3.0": v0_3::files,
                "wharf:plugin/freezer@0.3.0": v0_3::freezer,
                "wharf:plugin/sandboxing@0.3.0": v0_3::sandboxing,
                "wharf:plugin/progress@0.3.0": v0_3::progress,
                "wharf:plugin/cancellation@0.3.0": v0_3::cancellation,
            }
        );
    }
}

/// `wharf:plugin@0.2.0`, frozen (`wit/deps/wharf-plugin@0.2.0/`); 0.3.0 keeps its
/// interfaces as they are.
pub mod v0_2 {
    /// The `resource-backend` world.
    pub mod backend {
        contract_bindgen!(
            path: "../wit",
            world: "wharf:plugin/resource-backend@0.2.0",
            with: {}
        );
    }

    /// The `sandbox-provider` world.
    pub mod provider {
        use super::backend::wharf::plugin0_2_0 as shared;
        contract_bindgen!(
            path: "../wit",
            world: "wharf:plugin/sandbox-provider@0.2.0",
            v0_2: shared,
            with: {}
        );
    }
}

/// `wharf:plugin@0.1.0`, frozen (`wit/wharf-plugin@0.1.0/`).
pub mod v0_1 {
    /// The `resource-backend` world.
    pub mod backend {
        contract_bindgen!(
            path: "../wit/wharf-plugin@0.1.0",
            world: "wharf:plugin/resource-backend@0.1.0",
            with: {}
        );
    }

    /// The `sandbox-provider` world.
    pub mod provider {
        use super::backend::wharf::plugin0_1_0 as shared;
        contract_bindgen!(
            path: "../wit/wharf-plugin@0.1.0",
            world: "wharf:plugin/sandbox-provider@0.1.0",
            with: {
                "wharf:plugin/types@0.1.0": shared::types,
                "wharf:plugin/container@0.1.0": shared::container,
                "wharf:plugin/exec@0.1.0": shared::exec,
                "wharf:plugin/kv@0.1.0": shared::kv,
                "wharf:plugin/log@0.1.0": shared::log,
            }
        );
    }
}
