package main

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mcp-exec/mcp-exec/launcher"
)

// metrics is the Prometheus side of launcher.Metrics. Every series is documented in
// docs/operations.md; none carries caller data or unbounded labels.
type metrics struct {
	reg        *prometheus.Registry
	execs      *prometheus.CounterVec
	duration   prometheus.Histogram
	queueWait  prometheus.Histogram
	outBytes   prometheus.Counter
	truncated  prometheus.Counter
	created    prometheus.Counter
	removed    prometheus.Counter
	cleanupErr prometheus.Counter
	engineErr  prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		execs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_exec_executions_total",
			Help: "Executions by outcome: ok, non_zero, timeout, oom, cancelled, busy, error.",
		}, []string{"outcome"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "mcp_exec_execution_duration_seconds",
			Help:    "Time from code delivered to program finished.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}),
		queueWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "mcp_exec_queue_wait_seconds",
			Help:    "Time an execution waited for a free sandbox slot.",
			Buckets: []float64{.001, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
		outBytes:   prometheus.NewCounter(prometheus.CounterOpts{Name: "mcp_exec_output_bytes_total", Help: "Bytes of stdout and stderr returned."}),
		truncated:  prometheus.NewCounter(prometheus.CounterOpts{Name: "mcp_exec_truncations_total", Help: "Executions whose output passed the cap."}),
		created:    prometheus.NewCounter(prometheus.CounterOpts{Name: "mcp_exec_containers_created_total", Help: "Sandbox containers created."}),
		removed:    prometheus.NewCounter(prometheus.CounterOpts{Name: "mcp_exec_containers_removed_total", Help: "Sandbox containers removed."}),
		cleanupErr: prometheus.NewCounter(prometheus.CounterOpts{Name: "mcp_exec_cleanup_failures_total", Help: "Sandbox removals that failed."}),
		engineErr:  prometheus.NewCounter(prometheus.CounterOpts{Name: "mcp_exec_engine_errors_total", Help: "Errors from the container engine."}),
	}
	for _, o := range []string{launcher.OutcomeOK, launcher.OutcomeNonZero, launcher.OutcomeTimeout, launcher.OutcomeOOM,
		launcher.OutcomeCancelled, launcher.OutcomeBusy, launcher.OutcomeError} {
		m.execs.WithLabelValues(o) // every outcome is exported from the start, at 0
	}
	m.reg.MustRegister(m.execs, m.duration, m.queueWait, m.outBytes, m.truncated,
		m.created, m.removed, m.cleanupErr, m.engineErr,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// watchPool exports the warm pool's and the session pool's configured sizes and idle
// counts, and the sessions opened from each source, read at scrape time.
func (m *metrics) watchPool(l *launcher.Launcher) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mcp_exec_pool_size", Help: "Configured warm pool size (0: cold mode)."},
			func() float64 { return float64(l.PoolStats().Size) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mcp_exec_pool_idle", Help: "Warm sandboxes ready and waiting for code."},
			func() float64 { return float64(l.PoolStats().Idle) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mcp_exec_session_pool_size", Help: "Configured session pool size (0: every session starts cold)."},
			func() float64 { return float64(l.SessionPoolStats().Size) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mcp_exec_session_pool_idle", Help: "Session sandboxes ready and waiting for session_create."},
			func() float64 { return float64(l.SessionPoolStats().Idle) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mcp_exec_sessions_opened_total", Help: "Sessions opened, by where their sandbox came from.", ConstLabels: prometheus.Labels{"source": "pool"}},
			func() float64 { return float64(l.SessionPoolStats().FromPool) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mcp_exec_sessions_opened_total", Help: "Sessions opened, by where their sandbox came from.", ConstLabels: prometheus.Labels{"source": "cold"}},
			func() float64 { return float64(l.SessionPoolStats().Cold) }),
	)
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

func (m *metrics) ExecDone(outcome string, r launcher.Result) {
	m.execs.WithLabelValues(outcome).Inc()
	m.queueWait.Observe(r.QueueWait.Seconds())
	switch outcome {
	case launcher.OutcomeOK, launcher.OutcomeNonZero, launcher.OutcomeTimeout, launcher.OutcomeOOM:
		m.duration.Observe(r.Duration.Seconds())
		m.outBytes.Add(float64(len(r.Stdout) + len(r.Stderr)))
		if r.Truncated {
			m.truncated.Inc()
		}
	}
}

func (m *metrics) ContainerCreated() { m.created.Inc() }
func (m *metrics) ContainerRemoved() { m.removed.Inc() }
func (m *metrics) CleanupFailed()    { m.cleanupErr.Inc() }
func (m *metrics) EngineError()      { m.engineErr.Inc() }
