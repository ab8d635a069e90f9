//! Generated bindings for the two worlds. Backend authors do not use this module directly.
#![allow(missing_docs, clippy::all, unsafe_code)]

/// The `resource-backend` world; its imports are the ones the SDK wraps in [`crate::host`].
pub mod backend_world {
    wit_bindgen::generate!({
        path: "wit",
        world: "wharf:plugin/resource-backend@0.3.0",
        generate_all,
        pub_export_macro: true,
        export_macro_name: "__export_backend_world",
        default_bindings_module: "wharf_sdk::bindings::backend_world",
        runtime_path: "wharf_sdk::__private::wit_bindgen::rt",
    });
}

/// The `sandbox-provider` world; shares the wharf import interfaces with `backend_world`.
pub mod provider_world {
    wit_bindgen::generate!({
        path: "wit",
        world: "wharf:plugin/sandbox-provider@0.3.0",
        generate_all,
        with: {
            "wharf:plugin/types@0.2.0": crate::bindings::backend_world::wharf::plugin0_2_0::types,
            "wharf:plugin/container@0.2.0": crate::bindings::backend_world::wharf::plugin0_2_0::container,
            "wharf:plugin/exec@0.2.0": crate::bindings::backend_world::wharf::plugin0_2_0::exec,
            "wharf:plugin/kv@0.2.0": crate::bindings::backend_world::wharf::plugin0_2_0::kv,
            "wharf:plugin/log@0.2.0": crate::bindings::backend_world::wharf::plugin0_2_0::log,
            "wharf:plugin/egress@0.2.0": crate::bindings::backend_world::wharf::plugin0_2_0::egress,
            "wharf:plugin/secrets@0.3.0": crate::bindings::backend_world::wharf::plugin0_3_0::secrets,
            "wharf:plugin/process@0.3.0": crate::bindings::backend_world::wharf::plugin0_3_0::process,
            "wharf:plugin/files@0.3.0": crate::bindings::backend_world::wharf::plugin0_3_0::files,
            "wharf:plugin/freezer@0.3.0": crate::bindings::backend_world::wharf::plugin0_3_0::freezer,
            "wharf:plugin/sandboxing@0.3.0": crate::bindings::backend_world::wharf::plugin0_3_0::sandboxing,
            "wharf:plugin/progress@0.3.0": crate::bindings::backend_world::wharf::plugin0_3_0::progress,
            "wharf:plugin/cancellation@0.3.0": crate::bindings::backend_world::wharf::plugin0_3_0::cancellation,
        },
        pub_export_macro: true,
        export_macro_name: "__export_provider_world",
        default_bindings_module: "wharf_sdk::bindings::provider_world",
        runtime_path: "wharf_sdk::__private::wit_bindgen::rt",
    });
}

pub use backend_world::wharf::plugin0_2_0::types as wit_types;
