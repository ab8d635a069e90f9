//! `GET /metrics`: the front door's metrics in OpenMetrics text (scrape-time gauges read
//! at each scrape).

use crate::front_door::Wharf;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// `GET /metrics`.
pub async fn serve(State(wharf): State<Arc<Wharf>>) -> Response {
    match wharf.render_metrics().await {
        Ok(text) => (
            [(
                axum::http::header::CONTENT_TYPE,
                crate::metrics::CONTENT_TYPE,
            )],
            text,
        )
            .into_response(),
        Err(_) => crate::api::envelope::RequestClock::start()
            .reply(Err(crate::error_code::WharfError::internal(
                "metrics could not be encoded",
            )))
            .into_response(),
    }
}
