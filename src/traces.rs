//! OpenTelemetry traces: herald's `tracing` spans exported over OTLP/HTTP (README, Traces), and
//! the W3C trace context between those spans and what herald stores ([`TraceParent`]).
//!
//! Off unless `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set; the
//! exporter reads the other standard `OTEL_…` variables itself (headers, timeout, batch sizes,
//! sampler). Without an exporter no span leaves the process and every helper here does nothing
//! but pass a received `traceparent` on.

use std::time::Duration;

use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState, TracerProvider,
};
use opentelemetry::{Context, Value};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::runtime::Tokio;
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider, SpanData, SpanProcessor};
use tracing::Subscriber;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::registry::LookupSpan;

use crate::domain::TraceParent;

/// The field a span sets to `true` when it turns out to have done nothing (a poll that found no
/// work): such a span is not exported, so that an idle herald sends no traces.
pub const IDLE: &str = "idle";

/// The trace exporter, while one runs.
pub struct Export {
    provider: SdkTracerProvider,
}

impl Export {
    /// The exporter the environment asks for: `None` where no OTLP endpoint is set, where
    /// `OTEL_SDK_DISABLED=true`, or where the exporter cannot be built (said on stderr: the log
    /// subscriber is not installed yet). Must run inside the tokio runtime, which batches and
    /// sends the spans.
    pub fn from_env() -> Option<Export> {
        let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
        let asked = set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
        let disabled = std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.trim() == "true");
        if !asked || disabled {
            return None;
        }
        // The exporter builds its reqwest client now, before `main` installs the process's TLS
        // provider; the same one (ring), so whichever comes first, it is the one.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let exporter = match opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .build()
        {
            Ok(exporter) => exporter,
            Err(err) => {
                eprintln!("herald: traces are off: cannot build the OTLP exporter: {err}");
                return None;
            }
        };
        let service = std::env::var("OTEL_SERVICE_NAME")
            .ok()
            .filter(|name| !name.trim().is_empty())
            .unwrap_or_else(|| "herald".to_owned());
        let provider = SdkTracerProvider::builder()
            .with_span_processor(WithoutIdle(
                BatchSpanProcessor::builder(exporter, Tokio).build(),
            ))
            .with_resource(
                Resource::builder()
                    .with_service_name(service)
                    .with_attribute(opentelemetry::KeyValue::new(
                        "service.version",
                        env!("CARGO_PKG_VERSION"),
                    ))
                    .build(),
            )
            .build();
        Some(Export { provider })
    }

    /// The layer that turns herald's spans into OpenTelemetry spans for this exporter.
    ///
    /// Without the layer's extras, which are work at every poll of a traced future or
    /// attributes on every span that no one reads here: its busy and idle times (two clock reads
    /// at every poll), making each span OpenTelemetry's current context while entered (herald's
    /// helpers below ask the span itself), and the code location, thread and target attributes.
    /// Together they were nearly half of what a traced attempt cost (README, Performance).
    pub fn layer<S>(&self) -> tracing_opentelemetry::OpenTelemetryLayer<S, SdkTracer>
    where
        S: Subscriber + for<'span> LookupSpan<'span>,
    {
        tracing_opentelemetry::layer()
            .with_tracked_inactivity(false)
            .with_context_activation(false)
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_tracer(self.provider.tracer("herald"))
    }

    /// Exports what is still batched, then stops. The wait is bounded by the export's own
    /// timeout (`OTEL_EXPORTER_OTLP_TIMEOUT`, 10 s by default): the batch on tokio does not
    /// heed a shorter one.
    pub fn shutdown(&self) {
        let flush = || self.provider.shutdown();
        // The batch runs on the runtime: wait for it without holding up a worker thread it
        // may need (there is none to hold up where the runtime is gone).
        let result = match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
            Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(flush),
            _ => flush(),
        };
        if let Err(err) = result {
            eprintln!("herald: the last spans may not have been exported: {err}");
        }
    }
}

/// Passes every ended span on to the batch, except those marked [`IDLE`].
#[derive(Debug)]
struct WithoutIdle<P>(P);

impl<P: SpanProcessor> SpanProcessor for WithoutIdle<P> {
    fn on_start(&self, span: &mut opentelemetry_sdk::trace::Span, cx: &Context) {
        self.0.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        let idle = span
            .attributes
            .iter()
            .any(|kv| kv.key.as_str() == IDLE && kv.value == Value::Bool(true));
        if !idle {
            self.0.on_end(span);
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.0.set_resource(resource);
    }
}

/// Makes `span` (not yet entered) a child of the caller's `traceparent`: the request continues
/// the caller's trace.
pub fn continue_trace(span: &tracing::Span, caller: &TraceParent) {
    let _ = span.set_parent(Context::new().with_remote_span_context(span_context(caller)));
}

/// Links `span` (not yet entered) to the trace `to`: what it does follows from that trace but
/// happens in its own (an attempt minutes after its enqueue).
pub fn link(span: &tracing::Span, to: &TraceParent) {
    span.add_link(span_context(to));
}

/// Puts the trace id on `span`'s `trace_id` field, where it is exported: every log line inside
/// it then names the trace to look up.
pub fn record_trace_id(span: &tracing::Span) {
    let cx = span.context();
    let trace = cx.span().span_context().clone();
    if trace.is_valid() {
        span.record("trace_id", tracing::field::display(trace.trace_id()));
    }
}

/// The current span's context as a `traceparent`, where it is exported; else `received` (what
/// the caller sent, kept to be passed on).
pub fn current_or(received: Option<TraceParent>) -> Option<TraceParent> {
    context_of(&tracing::Span::current()).or(received)
}

/// `span`'s own context as a `traceparent`, where spans are exported.
pub fn context_of(span: &tracing::Span) -> Option<TraceParent> {
    let cx = span.context();
    let span = cx.span();
    let own = span.span_context();
    if !own.is_valid() {
        return None;
    }
    TraceParent::parse(&format!(
        "00-{}-{}-{:02x}",
        own.trace_id(),
        own.span_id(),
        own.trace_flags().to_u8()
    ))
}

fn span_context(parent: &TraceParent) -> SpanContext {
    let flags = match parent.sampled() {
        true => TraceFlags::SAMPLED,
        false => TraceFlags::default(),
    };
    SpanContext::new(
        TraceId::from_hex(parent.trace_id()).unwrap_or(TraceId::INVALID),
        SpanId::from_hex(parent.parent_id()).unwrap_or(SpanId::INVALID),
        flags,
        true,
        TraceState::default(),
    )
}
