'use strict';
// A driver (cases/clients/README.md) for the legacy stompjs 2.3.3 (npm `stompjs`, not
// @stomp/stompjs): its Node entry (index.js), over TCP through its own Stomp.overTCP
// (lib/stomp-node.js), or over WebSocket (ws://) through Stomp.client(url) given the `ws`
// package's WebSocket, as a Node application gives it one.
//
//   node drivers/node/stompjs_legacy.js

const Stomp = require('stompjs');
const WebSocket = require('ws');
const {
  Unsupported, b64, emit, endpoint, familyOp, heartBeat, installed, sendHeaders, serve, text,
} = require('./contract');

Object.assign(globalThis, { WebSocket }); // Node 20 has no WebSocket of its own

const messages = [];
let client = null;

function connect(c) {
  const { scheme, host, port } = endpoint(c.url, ['tcp', 'ws']);
  if (String(c.version || '1.2') === '1.2') {
    // CONNECT's accept-version is Stomp.VERSIONS.supportedVersions(), '1.1,1.0', set as the
    // socket opens over whatever the application gave (stomp.js:330, 453-455); Stomp.client
    // offers the subprotocols v10.stomp and v11.stomp (stomp.js:459-461)
    throw new Unsupported('STOMP 1.2: stompjs 2.3.3 offers 1.1 and 1.0 only');
  }
  client = scheme === 'tcp' ? Stomp.overTCP(host, port) : Stomp.client(c.url);
  if (c.heart_beat) [client.heartbeat.outgoing, client.heartbeat.incoming] = heartBeat(c);
  client.onreceipt = (frame) => emit('receipt', { id: frame.headers['receipt-id'] });
  // as its users run it: the credentials in the connect headers, no host (it adds none)
  const headers = {};
  for (const name of ['login', 'passcode']) {
    if (c[name]) headers[name] = String(c[name]);
  }
  return new Promise((resolve, reject) => {
    client.connect(headers, (frame) => {
      emit('connected', { headers: frame.headers });
      resolve();
    }, (error) => {
      // an ERROR frame, or the text "Whoops! Lost connection to ..." once the socket closes
      if (typeof error === 'string') emit('disconnected');
      else emit('error', { headers: error.headers, body_b64: b64(error.body) });
      reject(new Error(typeof error === 'string' ? error : `ERROR ${error.headers.message || ''}`));
    });
  });
}

function deliver(message) {
  messages.push(message);
  emit('message', { n: messages.length - 1, headers: message.headers,
                    body_b64: b64(message.body) });
}

async function run(op, c) {
  if (op === 'connect') return connect(c);
  if (client === null) throw new Error('not connected');
  if (familyOp(client, messages, deliver, op, c)) return;
  switch (op) {
    case 'send': {
      const headers = sendHeaders(c);
      client.send(String(c.destination), headers, text(c, 'stompjs'));
      return;
    }
    case 'disconnect':
      // disconnect(callback, headers) writes DISCONNECT, closes the socket and calls back at
      // once (stomp.js:337-346): a receipt asked in its headers is never waited for
      return new Promise((resolve) => client.disconnect(resolve,
        c.receipt ? { receipt: `disconnect-${Date.now()}` } : {}));
    default:
      throw new Unsupported(`no command ${op}`);
  }
}

serve('stompjs', installed('stompjs'), run);
