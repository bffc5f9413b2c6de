// stomp-broker-js as its users run it: the package's StompServer on an http server of its
// own, STOMP over WebSocket at ws://127.0.0.1:PORT/ws (STOMP_WS_PORT, default 61619), or on
// the listening socket supervise.py holds (LISTEN_FD).
'use strict';
const http = require('http');
const StompServer = require('stomp-broker-js');

const server = http.createServer();

// No heart-beat option: the broker's default, [0,0] (it never sends nor asks for
// heart-beats), is what a user gets who does not configure it, and the spec lets a server
// decline heart-beats, so the heart-beat cases read 0,0 off CONNECTED and judge that.
new StompServer({server, path: '/ws'});

const where = process.env.LISTEN_FD !== undefined
  ? {fd: Number(process.env.LISTEN_FD)}
  : {port: Number(process.env.STOMP_WS_PORT || 61619), host: '127.0.0.1'};
server.listen(where, () => {
  console.log(`stomp-broker-js ${process.pid} serving STOMP over WebSocket on /ws`);
});
