//! The export macros: one line at the bottom of a backend crate.

/// Exports a [`Backend`](crate::Backend) type as the component's `backend` interface.
///
/// ```ignore
/// wharf_sdk::export_backend!(MyBackend);
/// ```
#[macro_export]
macro_rules! export_backend {
    ($backend:ty) => {
        type __WharfBackendExport = $crate::__private::BackendExport<$backend>;
        $crate::bindings::backend_world::__export_backend_world!(__WharfBackendExport with_types_in $crate::bindings::backend_world);
    };
}

/// Exports a [`Provider`](crate::Provider) type as the component's `provider` interface.
///
/// ```ignore
/// wharf_sdk::export_provider!(MyProvider);
/// ```
#[macro_export]
macro_rules! export_provider {
    ($provider:ty) => {
        type __WharfProviderExport = $crate::__private::ProviderExport<$provider>;
        $crate::bindings::provider_world::__export_provider_world!(__WharfProviderExport with_types_in $crate::bindings::provider_world);
    };
}
