-- Schema version 9: an event carries the trace it was published in (issue 12).
-- bus_events.trace: the W3C trace context (traceparent, tracestate) as JSON,
-- or NULL when tracing was off; its consumer continues that trace.
ALTER TABLE bus_events ADD COLUMN trace TEXT;
