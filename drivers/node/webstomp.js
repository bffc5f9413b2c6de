'use strict';
// A driver (cases/clients/README.md) for webstomp-client: webstomp.client(url) over
// WebSocket (ws://), given the `ws` package's WebSocket, as a Node application gives it one.
// webstomp-client has no TCP transport (it writes to a WebSocket only): a tcp:// url is
// answered unsupported.
//
//   node drivers/node/webstomp.js

const WebSocket = require('ws');
const webstomp = require('webstomp-client');
const {
  Unsupported, b64, emit, endpoint, familyOp, heartBeat, installed, sendHeaders, serve, text,
} = require('./contract');

Object.assign(globalThis, { WebSocket }); // Node 20 has no WebSocket of its own
// its debug log, on by default, goes to console.log: standard error here, so that standard
// output holds the contract's events alone
console.log = (...args) => console.error(...args);

const messages = [];
let client = null;

function connect(c) {
  endpoint(c.url, ['ws']);
  // the subprotocols it offers by default, v10.stomp, v11.stomp and v12.stomp
  // (utils.js VERSIONS.supportedProtocols); CONNECT's accept-version is then the version of
  // the one the server accepted (client.js onopen, getSupportedVersion)
  client = webstomp.client(String(c.url),
    c.heart_beat ? { heartbeat: Object.fromEntries(
      ['outgoing', 'incoming'].map((k, i) => [k, heartBeat(c)[i]])) } : {});
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
      // an ERROR frame, or the WebSocket's close event
      if (error?.command === 'ERROR') {
        emit('error', { headers: error.headers, body_b64: b64(error.body) });
        reject(new Error(`ERROR ${error.headers.message || ''}`));
      } else {
        emit('disconnected');
        reject(new Error('the connection closed'));
      }
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
      client.send(String(c.destination), text(c, 'webstomp-client'), headers);
      return;
    }
    case 'disconnect':
      // disconnect(callback, headers) writes DISCONNECT, closes the WebSocket and calls back
      // at once (client.js disconnect): a receipt asked in its headers is never waited for
      return new Promise((resolve) => client.disconnect(resolve,
        c.receipt ? { receipt: `disconnect-${Date.now()}` } : {}));
    default:
      throw new Unsupported(`no command ${op}`);
  }
}

serve('webstomp-client', installed('webstomp-client'), run);
