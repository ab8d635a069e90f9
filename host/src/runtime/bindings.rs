//! Host-side bindings of the two worlds. The WASI parts map to wasmtime's own bindings;
//! the `sandbox-provider` world reuses the `resource-backend` world's wharf interfaces.
#![allow(missing_docs, clippy::all)]

/// The `resource-backend` world.
pub mod backend {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "wharf:plugin/resource-backend",
        imports: { default: async | trappable },
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
        world: "wharf:plugin/sandbox-provider",
        imports: { default: async | trappable },
        exports: { default: async },
        with: {
            "wasi:http": wasmtime_wasi_http::p2::bindings::http,
            "wasi:io": wasmtime_wasi::p2::bindings::io,
            "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
            "wharf:plugin/types": super::backend::wharf::plugin::types,
            "wharf:plugin/container": super::backend::wharf::plugin::container,
            "wharf:plugin/exec": super::backend::wharf::plugin::exec,
            "wharf:plugin/kv": super::backend::wharf::plugin::kv,
            "wharf:plugin/log": super::backend::wharf::plugin::log,
        },
    });
}

pub use backend::wharf::plugin::types as wit_types;
