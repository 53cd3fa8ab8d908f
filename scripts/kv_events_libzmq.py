#!/usr/bin/env python3
"""A libzmq subscriber for the publisher's interoperability test
(TestPublisherWithLibzmqPeers in common/kvevents): Debian's python3-zmq,
the binding vLLM's own subscriber example uses.

  kv_events_libzmq.py PUB_ENDPOINT REPLAY_ENDPOINT

Connects a SUB socket to PUB_ENDPOINT (subscribed to "kv@"), prints the
first message it receives, then asks REPLAY_ENDPOINT for everything from
sequence 0 through a DEALER socket and prints each answer, up to the end
marker; then does the same through a REQ socket, which takes one reply per
request: it asks from 0, and from the sequence after each reply, until the
end marker. Each printed line is JSON: {"frames": [hex, ...]}. A line
{"ready": true} tells the test the SUB socket is connecting.
"""

import json
import sys

import zmq


def show(frames):
    print(json.dumps({"frames": [f.hex() for f in frames]}), flush=True)


def main():
    pub, replay = sys.argv[1], sys.argv[2]
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"kv@")
    sub.connect(pub)
    print(json.dumps({"ready": True}), flush=True)
    if not sub.poll(30000):
        sys.exit("no message on " + pub)
    show(sub.recv_multipart())

    dealer = ctx.socket(zmq.DEALER)
    dealer.connect(replay)
    dealer.send_multipart([b"", (0).to_bytes(8, "big")])
    while True:
        if not dealer.poll(30000):
            sys.exit("no replay answer from " + replay)
        frames = dealer.recv_multipart()
        show(frames)
        if frames[-1] == b"" and len(frames) == 4:
            break

    req = ctx.socket(zmq.REQ)
    req.connect(replay)
    start = 0
    for _ in range(100):
        req.send((start).to_bytes(8, "big"))
        if not req.poll(30000):
            sys.exit("no REQ replay answer from " + replay)
        frames = req.recv_multipart()
        show(frames)
        if len(frames) != 3 or frames[1] == b"\xff" * 8:
            break
        start = int.from_bytes(frames[1], "big") + 1
    sub.close(linger=0)
    dealer.close(linger=0)
    req.close(linger=0)
    ctx.term()


if __name__ == "__main__":
    main()
