'use strict';
// A driver (cases/clients/README.md) for @stomp/stompjs: its Client over TCP through
// @stomp/tcp-wrapper (tcp://), or over WebSocket (ws://) through the `ws` package, which
// stompjs's documentation has Node applications make the global WebSocket.
//
//   node drivers/node/stompjs.js

const { Client, Versions } = require('@stomp/stompjs');
const { TCPWrapper } = require('@stomp/tcp-wrapper');
const WebSocket = require('ws');
const {
  Unsupported, b64, body, emit, endpoint, familyOp, heartBeat, installed, sendHeaders, serve,
} = require('./contract');

Object.assign(globalThis, { WebSocket }); // Node 20 has no WebSocket of its own

const messages = [];
let client = null;

function connect(c) {
  const { scheme, host, port } = endpoint(c.url, ['tcp', 'ws']);
  const [cx, cy] = heartBeat(c);
  // as its users run it: the credentials in connectHeaders, no host (stompjs adds none)
  const connectHeaders = {};
  for (const name of ['login', 'passcode']) {
    if (c[name]) connectHeaders[name] = String(c[name]);
  }
  return new Promise((resolve, reject) => {
    client = new Client({
      // the version asked alone: CONNECT's accept-version names it, and over WebSocket
      // the subprotocol stompjs offers (Versions.protocolVersions) does too
      stompVersions: new Versions([String(c.version || '1.2')]),
      connectHeaders,
      heartbeatOutgoing: cx,
      heartbeatIncoming: cy,
      reconnectDelay: 0, // a dropped connection is reported, not tried again
      ...(scheme === 'tcp' ? { webSocketFactory: () => new TCPWrapper(host, port) }
        : { brokerURL: c.url }),
      onConnect: (frame) => {
        emit('connected', { headers: frame.headers });
        resolve();
      },
      onStompError: (frame) => {
        emit('error', { headers: frame.headers, body_b64: b64(frame.binaryBody) });
        reject(new Error(`ERROR ${frame.headers.message || ''}`));
      },
      onUnhandledReceipt: (frame) => emit('receipt', { id: frame.headers['receipt-id'] }),
      onWebSocketClose: () => {
        emit('disconnected');
        reject(new Error('the connection closed before CONNECTED'));
      },
    });
    client.activate();
  });
}

function deliver(message) {
  messages.push(message);
  emit('message', { n: messages.length - 1, headers: message.headers,
                    body_b64: b64(message.binaryBody) });
}

async function run(op, c) {
  if (op === 'connect') return connect(c);
  if (client === null) throw new Error('not connected');
  if (familyOp(client, messages, deliver, op, c)) return;
  switch (op) {
    case 'send': {
      // receipts are reported through onUnhandledReceipt (none is watched)
      const headers = sendHeaders(c);
      // text as text (a string body); octets (body_b64) as a binaryBody
      const payload = 'body_b64' in c ? { binaryBody: body(c) } : { body: String(c.body ?? '') };
      client.publish({ destination: String(c.destination), headers, ...payload });
      return;
    }
    case 'disconnect':
      // deactivate() always asks a receipt for DISCONNECT (StompHandler.dispose) and closes
      // once it comes; done then (onDisconnect), or when the connection closes first
      return new Promise((resolve) => {
        client.onDisconnect = resolve;
        client.deactivate().then(resolve);
      });
    default:
      throw new Unsupported(`no command ${op}`);
  }
}

serve('@stomp/stompjs', installed('@stomp/stompjs'), run);
