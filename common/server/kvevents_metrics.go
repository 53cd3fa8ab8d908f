package server

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"kvlab/common/kvevents"
)

// The KV-event series of /metrics: what the HTTP streams and the ZeroMQ
// publishers dropped, and for whom. The per-subscriber series have one
// entry per ZeroMQ subscriber connected now (at most
// kvevents.PublisherOptions.MaxSubscribers), labelled by the number the
// publisher gave it and its address; a subscriber's series goes when it
// does, and the _total series without labels keep every subscriber's count.
var (
	descStreams = prometheus.NewDesc("kvlab:kv_events_http_streams",
		"Open GET /v1/kv_events streams.", nil, nil)
	descStreamsCut = prometheus.NewDesc("kvlab:kv_events_http_streams_cut_total",
		"GET /v1/kv_events streams ended because the client fell too far behind or a write to it timed out.", nil, nil)
	descSubscribers = prometheus.NewDesc("kvlab:kv_events_zmq_subscribers",
		"ZeroMQ subscribers connected.", nil, nil)
	descSubDropped = prometheus.NewDesc("kvlab:kv_events_zmq_subscriber_dropped_total",
		"Batches dropped for one connected ZeroMQ subscriber because its queue was full (-kv-events-hwm).", []string{"subscriber", "peer"}, nil)
	descSubQueued = prometheus.NewDesc("kvlab:kv_events_zmq_subscriber_queued",
		"Batches waiting to be written to one connected ZeroMQ subscriber.", []string{"subscriber", "peer"}, nil)
	descDropped = prometheus.NewDesc("kvlab:kv_events_zmq_dropped_total",
		"Batches dropped for ZeroMQ subscribers whose queue was full, every subscriber since start.", nil, nil)
	descCut = prometheus.NewDesc("kvlab:kv_events_zmq_subscribers_cut_total",
		"ZeroMQ subscribers disconnected because a write to them took longer than -kv-events-write-timeout.", nil, nil)
	descRefused = prometheus.NewDesc("kvlab:kv_events_zmq_subscribers_refused_total",
		"ZeroMQ subscribers and replay clients refused because -kv-events-max-subscribers were connected.", nil, nil)
	descReplayBatches = prometheus.NewDesc("kvlab:kv_events_replay_buffer_batches",
		"Batches the replay buffer holds.", nil, nil)
	descReplayBytes = prometheus.NewDesc("kvlab:kv_events_replay_buffer_bytes",
		"Payload bytes the replay buffer holds (at most -kv-events-buffer-bytes).", nil, nil)
)

// register adds k's series to reg; nothing when k is nil (events off).
func (k *KVEvents) register(reg *prometheus.Registry) {
	if k != nil {
		reg.MustRegister(k)
	}
}

// Describe implements prometheus.Collector.
func (k *KVEvents) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descStreams, descStreamsCut, descSubscribers, descSubDropped, descSubQueued,
		descDropped, descCut, descRefused, descReplayBatches, descReplayBytes} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (k *KVEvents) Collect(ch chan<- prometheus.Metric) {
	k.mu.Lock()
	streams, cut, pubs := len(k.subs), k.cut, append([]*kvevents.Publisher(nil), k.pubs...)
	k.mu.Unlock()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge(descStreams, float64(streams))
	counter(descStreamsCut, float64(cut))
	var subs, dropped, cutZMQ, refused, batches, bytes float64
	for _, p := range pubs {
		st := p.Stats()
		subs += float64(len(st.Subscribers))
		dropped += float64(st.Dropped)
		cutZMQ += float64(st.Cut)
		refused += float64(st.Refused)
		batches += float64(st.ReplayBatches)
		bytes += float64(st.ReplayBytes)
		for _, s := range st.Subscribers {
			id := strconv.FormatUint(s.ID, 10)
			counter(descSubDropped, float64(s.Dropped), id, s.Peer)
			gauge(descSubQueued, float64(s.Queued), id, s.Peer)
		}
	}
	gauge(descSubscribers, subs)
	counter(descDropped, dropped)
	counter(descCut, cutZMQ)
	counter(descRefused, refused)
	gauge(descReplayBatches, batches)
	gauge(descReplayBytes, bytes)
}
