'use strict';
// A driver (cases/clients/README.md) for stompit: stompit.connect's Client over TCP.
// stompit has no WebSocket transport (connect() opens net or tls sockets): a ws:// url is
// answered unsupported.
//
//   node drivers/node/stompit.js

const stompit = require('stompit');
const { Unsupported, b64, body, emit, endpoint, installed, serve } = require('./contract');

const messages = [];
const transactions = {};
let client = null;

function connect(c) {
  const { host, port } = endpoint(c.url);
  // accept-version replaces stompit's own '1.0,1.1,1.2' (Client.connect merges them)
  const connectHeaders = { 'accept-version': String(c.version || '1.2'),
                           'heart-beat': String(c.heart_beat || '0,0') };
  for (const name of ['host', 'login', 'passcode']) {
    if (c[name]) connectHeaders[name] = String(c[name]);
  }
  return new Promise((resolve, reject) => {
    client = stompit.connect({ host, port, connectHeaders }, (error) => {
      if (error) reject(error);
      else {
        emit('connected', { headers: client.headers });
        resolve();
      }
    });
    client.on('error', (error) => {
      // stompit turns an ERROR frame into an application error and ends the connection:
      // it keeps the message header (as the error's message) and, for a text/plain body
      // of at most 4096 octets, the body (longMessage); no other header reaches the
      // application (Client.js onError)
      if (error.isApplicationError?.()) {
        emit('error', { headers: { message: error.message },
                        body_b64: b64(error.longMessage ?? '') });
      }
      emit('disconnected');
    });
    client.on('end', () => emit('disconnected'));
  });
}

function deliver(error, message) {
  if (error) return; // the connection ended: reported by its own event
  const n = messages.push(message) - 1;
  const chunks = [];
  message.on('data', (chunk) => chunks.push(chunk));
  message.on('end', () => emit('message', { n, headers: message.headers,
                                            body_b64: b64(Buffer.concat(chunks)) }));
}

function written(frame, data) {
  return new Promise((resolve, reject) => frame.end(data, (error) => (error ? reject(error) : resolve())));
}

async function run(op, c) {
  if (op === 'connect') return connect(c);
  if (client === null) throw new Error('not connected');
  switch (op) {
    case 'send':
      if (c.receipt) {
        // sendFrame's onReceipt numbers receipts itself (1, 2, ...): an application
        // cannot ask one with a value of its choosing (Client.sendFrame)
        throw new Unsupported('a receipt of a given value: stompit numbers its own');
      }
      return written(client.send({ ...(c.headers || {}), destination: String(c.destination) }),
        body(c));
    case 'subscribe':
      client.subscribe({ destination: String(c.destination), id: String(c.id),
                         ack: String(c.ack || 'auto') }, deliver);
      return;
    case 'unsubscribe':
      client.getSubscription(String(c.id)).unsubscribe();
      return;
    case 'ack':
    case 'nack': {
      // Client._getAckHeaders: subscription, message-id and id (the MESSAGE's ack header)
      const headers = c.transaction ? { transaction: String(c.transaction) } : {};
      return new Promise((resolve, reject) => client[op](messages[Number(c.message)], headers,
        undefined, (error) => (error ? reject(error) : resolve())));
    }
    case 'begin':
      transactions[c.transaction] = client.begin(String(c.transaction));
      return;
    case 'commit':
    case 'abort':
      transactions[c.transaction][op]();
      return;
    case 'disconnect':
      // disconnect() always asks a receipt (its own) and ends the connection once it comes
      return new Promise((resolve, reject) => client.disconnect((error) => (error ? reject(error) : resolve())));
    default:
      throw new Unsupported(`no command ${op}`);
  }
}

serve('stompit', installed('stompit'), run);
