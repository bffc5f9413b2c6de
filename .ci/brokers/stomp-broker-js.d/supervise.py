#!/usr/bin/env python3
"""supervise.py PORT NODE SERVER_JS: hold a listening socket on 127.0.0.1:PORT and run
`NODE SERVER_JS` on it (its fd in LISTEN_FD), starting it again each time it exits.

stomp-broker-js dies on some frames (an uncaught exception ends the Node process, and with
it every session). Restarting it lets a catalogue run grade the cases after such a frame;
the socket is held here, never accepted on, so connections made while Node starts again
wait in the backlog instead of being refused. Each exit is logged with its status."""
import os
import socket
import subprocess
import sys
import time

port, node, server_js = int(sys.argv[1]), sys.argv[2], sys.argv[3]
listener = socket.create_server(("127.0.0.1", port), backlog=511)
fd = listener.fileno()
env = {**os.environ, "LISTEN_FD": str(fd)}
starts = 0
while True:
    starts += 1
    began = time.monotonic()
    status = subprocess.run([node, server_js], env=env, pass_fds=(fd,)).returncode
    print(f"supervise: stomp-broker-js exited with status {status} after "
          f"{time.monotonic() - began:.1f} s (start {starts}); starting it again", flush=True)
    if time.monotonic() - began < 1:
        time.sleep(1)  # an install that cannot start does not spin
