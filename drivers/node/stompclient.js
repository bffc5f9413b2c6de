'use strict';
// A driver (cases/clients/README.md) for stomp-client: its StompClient over TCP. It has no
// WebSocket transport (connect() opens net or tls sockets): a ws:// url is answered
// unsupported. It speaks STOMP 1.0 alone: its CONNECT never carries accept-version (nor
// heart-beat), whatever protocolVersion says (lib/client.js:240-252), so asked for 1.1 or 1.2
// it answers unsupported. It has no transactions and reports no RECEIPT.
//
//   node drivers/node/stompclient.js

const StompClient = require('stomp-client');
const { Unsupported, b64, emit, endpoint, installed, serve, text } = require('./contract');

let client = null;
const messages = [];
const destinations = {}; // subscription id -> destination: it unsubscribes by destination

function connect(c) {
  const { host, port } = endpoint(c.url);
  if (String(c.version || '1.2') !== '1.0') {
    throw new Unsupported(`STOMP ${c.version || '1.2'}: stomp-client speaks 1.0 only`);
  }
  client = new StompClient({ host, port, user: c.login, pass: c.passcode });
  return new Promise((resolve, reject) => {
    // the application gets CONNECTED's session header alone (client.js:212-220)
    client.connect((session) => {
      emit('connected', { headers: { session } });
      resolve();
    }, (error, body) => {
      if (body !== undefined) {
        // an ERROR frame: its headers copied onto an Error, its body beside it (client.js:222-227)
        const { stack, ...headers } = error;
        emit('error', { headers: { ...headers, message: error.message }, body_b64: b64(body) });
      } else {
        // the connection's end ("Server has gone away"), or a frame it could not parse
        console.error(`stomp-client error: ${error.message}${error.details ? ` (${error.details})` : ''}`);
        emit('disconnected');
      }
      reject(error);
    });
  });
}

async function run(op, c) {
  if (op === 'connect') return connect(c);
  if (client === null) throw new Error('not connected');
  switch (op) {
    case 'send':
      if (c.receipt) {
        throw new Unsupported('a receipt: stomp-client reports no RECEIPT to the application');
      }
      client.publish(String(c.destination), text(c, 'stomp-client'), { ...(c.headers || {}) });
      return;
    case 'subscribe':
      destinations[c.id] = String(c.destination);
      client.subscribe(String(c.destination),
        { id: String(c.id), ...(c.ack ? { ack: String(c.ack) } : {}) }, (message, headers) => {
          const n = messages.push(headers) - 1;
          emit('message', { n, headers, body_b64: b64(message) });
        });
      return;
    case 'unsubscribe':
      client.unsubscribe(destinations[c.id], { id: String(c.id) });
      return;
    case 'ack':
    case 'nack': {
      // ack(messageId, subscription, transaction): the application names the message
      const headers = messages[Number(c.message)];
      client[op](headers['message-id'], headers.subscription, c.transaction);
      return;
    }
    case 'begin':
    case 'commit':
    case 'abort':
      throw new Unsupported('transactions: stomp-client has no begin, commit or abort');
    case 'disconnect':
      if (c.receipt) {
        throw new Unsupported('a receipt: stomp-client reports no RECEIPT to the application');
      }
      // disconnect(callback) writes DISCONNECT, ends its side and calls back at the
      // connection's end (client.js:156-178, 191-197)
      return new Promise((resolve) => client.disconnect(resolve));
    default:
      throw new Unsupported(`no command ${op}`);
  }
}

serve('stomp-client', installed('stomp-client'), run);
