//! Host-side bindings of every contract version this host serves, each with its two
//! worlds. The WASI parts map to wasmtime's own bindings; each version's
//! `sandbox-provider` world reuses that version's `resource-backend` interfaces. Nothing
//! outside `runtime/` and `imports/` sees these types: `guest_types` is the host's own
//! vocabulary, and the conversions live beside the world wrappers. Every import is
//! generated with `tracing`: a `trace`-level span around each host import call, which costs
//! nothing while no layer wants it and which the trace exporter (`telemetry`) sends as
//! `import <interface>.<function>`.
#![allow(missing_docs, clippy::all)]

/// `wharf:plugin@0.2.0`, the current contract (`wit/plugin.wit`).
pub mod v0_2 {
    /// The `resource-backend` world.
    pub mod backend {
        wasmtime::component::bindgen!({
            path: "../wit",
            world: "wharf:plugin/resource-backend@0.2.0",
            imports: { default: async | trappable | tracing },
            exports: { default: async },
            with: {
                "wasi:http": wasmtime_wasi_http::p2::bindings::http,
                "wasi:io": wasmtime_wasi::p2::bindings::io,
                "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
            },
        });
    }

    /// The `sandbox-provider` world.
    pub mod provider {
        wasmtime::component::bindgen!({
            path: "../wit",
            world: "wharf:plugin/sandbox-provider@0.2.0",
            imports: { default: async | trappable | tracing },
            exports: { default: async },
            with: {
                "wasi:http": wasmtime_wasi_http::p2::bindings::http,
                "wasi:io": wasmtime_wasi::p2::bindings::io,
                "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
                "wharf:plugin/types@0.2.0": super::backend::wharf::plugin::types,
                "wharf:plugin/container@0.2.0": super::backend::wharf::plugin::container,
                "wharf:plugin/exec@0.2.0": super::backend::wharf::plugin::exec,
                "wharf:plugin/kv@0.2.0": super::backend::wharf::plugin::kv,
                "wharf:plugin/log@0.2.0": super::backend::wharf::plugin::log,
                "wharf:plugin/egress@0.2.0": super::backend::wharf::plugin::egress,
            },
        });
    }
}

/// `wharf:plugin@0.1.0`, frozen (`wit/deps/wharf-plugin@0.1.0/`).
pub mod v0_1 {
    /// The `resource-backend` world.
    pub mod backend {
        wasmtime::component::bindgen!({
            path: "../wit/wharf-plugin@0.1.0",
            world: "wharf:plugin/resource-backend@0.1.0",
            imports: { default: async | trappable | tracing },
            exports: { default: async },
            with: {
                "wasi:http": wasmtime_wasi_http::p2::bindings::http,
                "wasi:io": wasmtime_wasi::p2::bindings::io,
                "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
            },
        });
    }

    /// The `sandbox-provider` world.
    pub mod provider {
        wasmtime::component::bindgen!({
            path: "../wit/wharf-plugin@0.1.0",
            world: "wharf:plugin/sandbox-provider@0.1.0",
            imports: { default: async | trappable | tracing },
            exports: { default: async },
            with: {
                "wasi:http": wasmtime_wasi_http::p2::bindings::http,
                "wasi:io": wasmtime_wasi::p2::bindings::io,
                "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
                "wharf:plugin/types@0.1.0": super::backend::wharf::plugin::types,
                "wharf:plugin/container@0.1.0": super::backend::wharf::plugin::container,
                "wharf:plugin/exec@0.1.0": super::backend::wharf::plugin::exec,
                "wharf:plugin/kv@0.1.0": super::backend::wharf::plugin::kv,
                "wharf:plugin/log@0.1.0": super::backend::wharf::plugin::log,
            },
        });
    }
}
