package router

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"kvlab/common/kvevents"
)

// Subscribe keeps index fed with the KV events of the replica at url
// (index entry replica) until ctx ends: it opens GET url/v1/kv_events,
// applies every batch as it arrives, and when the stream breaks forgets
// what the replica said and connects again after retry. The first batch of
// each connection is a snapshot of the replica's whole cache, so nothing
// said before the break is needed. ready, if not nil, is called after each
// batch is applied (tests wait on it).
func Subscribe(ctx context.Context, client *http.Client, url string, replica int, index *KVIndex, retry time.Duration, ready func(kvevents.Batch)) {
	if client == nil {
		client = http.DefaultClient
	}
	for ctx.Err() == nil {
		err := subscribeOnce(ctx, client, strings.TrimRight(url, "/")+kvevents.StreamPath, replica, index, ready)
		index.Reset(replica)
		_ = err // a replica that is down is the health checker's news, not ours
		select {
		case <-ctx.Done():
		case <-time.After(retry):
		}
	}
}

func subscribeOnce(ctx context.Context, client *http.Client, url string, replica int, index *KVIndex, ready func(kvevents.Batch)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %d", url, resp.StatusCode)
	}
	// A reconnect starts from the snapshot; whatever the index kept from
	// the last connection may have been evicted in between.
	index.Reset(replica)
	return kvevents.ReadStream(ctx, resp.Body, func(b kvevents.Batch) error {
		index.Apply(replica, b)
		if ready != nil {
			ready(b)
		}
		return nil
	})
}

// SubscribeAll starts Subscribe for every replica of the router on its own
// goroutine, with the router's transport; they stop when ctx ends.
func (rt *Router) SubscribeAll(ctx context.Context, index *KVIndex) {
	client := &http.Client{Transport: rt.opts.Transport}
	for _, rep := range rt.replicas {
		go Subscribe(ctx, client, rep.url, rep.index, index, 500*time.Millisecond, nil)
	}
}
